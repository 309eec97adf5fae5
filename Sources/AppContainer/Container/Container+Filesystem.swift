import Glibc

/// The container's filesystem rules (ARCHITECTURE.md, "Network and FUSE filesystems"): no container where an item's
/// identity does not survive a link, and no write where locks may keep to one path until the container is declared
/// single-host.
extension Container {
    /// Refuses (73) a container on a filesystem that fails `IdentityProbe`, probed in its state folder, or in `root`
    /// itself where that holds none yet (so that every command, `init` included, names the filesystem). A local
    /// filesystem costs one `fstatfs`: it is never probed.
    /// `named` is the container's path as the user gave it, for the line (else `root`).
    static func refuseUnsafeFilesystem(_ root: [UInt8], named: [UInt8]? = nil) throws(ContainerError) {
        let shown = String(decoding: named ?? root, as: UTF8.self)
        let filesystem: Filesystem
        let verdict: IdentityProbe.Verdict?
        do {
            let folder = try FileDescriptor(root, [.directory])
            filesystem = try Filesystem(of: folder)
            guard filesystem.pollReason != nil else { return }
            let state = root + Array("/\(stateRelativePath)".utf8)
            if let stateFolder = try? FileDescriptor(state, [.directory, .noFollow]) {
                verdict = IdentityProbe.verdict(in: stateFolder.rawValue, filesystem: filesystem)
            } else {
                verdict = IdentityProbe.verdict(in: folder.rawValue, filesystem: filesystem)
            }
        } catch .notDirectory {
            return  // not a folder: the caller says so
        } catch {
            throw error.failure("look at", shown)
        }
        guard let verdict, verdict != .keepsIdentity else { return }
        throw ContainerError(
            .cannotCreate,
            "'\(shown)' is on \(filesystem.name), \(verdict.problem), so inbox cannot tell its items apart there: put"
                + " the container on a local disk, NFS, SMB through the kernel's cifs or a bind mount, or run inbox on"
                + " the server ('ssh SERVER inbox deliver - --as NAME')")
    }

    /// The filesystem that holds the container.
    package func filesystem() throws(ContainerError) -> Filesystem {
        do {
            return try Filesystem(of: try FileDescriptor(rootBytes, [.directory]))
        } catch {
            throw error.failure("look at", root)
        }
    }

    /// Refuses (73) a command that writes to this container while its filesystem's locks may not reach another host
    /// or another path to the same files (`Filesystem.localLockReason`) and the container is not declared
    /// single-host (`Preferences.singleHost`, or `declared` for this run: `watch --single-host`). A local
    /// filesystem costs one `fstatfs`.
    package func requireSingleHost(declared: Bool = false) throws(ContainerError) {
        if let refusal = try singleHostRefusal(declared: declared) { throw refusal }
    }

    /// The failure `requireSingleHost` throws, or nil where writes may go on.
    package func singleHostRefusal(declared: Bool = false) throws(ContainerError) -> ContainerError? {
        guard !declared else { return nil }
        let filesystem = try filesystem()
        guard let reason = filesystem.localLockReason, try !Preferences.load(self).singleHost else { return nil }
        return ContainerError(.cannotCreate, singleHostAdvice(filesystem, reason: reason, refusing: true))
    }

    /// The line that says how to declare the container single-host: `refusing` a write, or at `init`.
    package func singleHostAdvice(_ filesystem: Filesystem, reason: String, refusing: Bool) -> String {
        "'\(root)' is on \(filesystem.name) (\(reason)), whose locks may not reach another host or another path to"
            + " it: \(refusing ? "nothing writes there until" : "writes wait until") it is declared single-host,"
            + " if no other host or path writes to it: inbox --container '\(root)' init --single-host"
    }
}
