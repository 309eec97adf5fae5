import Glibc
import Synchronization

/// Whether a filesystem keeps a file's identity across a link (ARCHITECTURE.md, "Network and FUSE filesystems"):
/// inbox tells an item by its device and inode, and some FUSE filesystems (sshfs, every one on libfuse's path API
/// without `use_ino`) give a file a new inode number under each new name, while their folders list yet another.
/// Probed once per filesystem in a process, and only on a network or FUSE one: a file in a folder of the container
/// linked to a second name must report one inode under both, with two links, and the folder must list that inode
/// for both names.
package enum IdentityProbe {
    /// What the probe found.
    package enum Verdict: Sendable, Equatable {
        /// A file keeps its inode under a second name, and the folder lists it.
        case keepsIdentity
        /// `link` is refused (rclone).
        case refusesLink
        /// The second name holds another inode, or the file does not count two links.
        case newInodePerName
        /// The folder lists other inode numbers than the names' status (FUSE's "unknown" 4294967295, say).
        case listsOtherInodes

        /// The end of the refusal's line: what goes wrong there.
        var problem: String {
            switch self {
            case .keepsIdentity: "nothing"
            case .refusesLink: "which refuses hard links"
            case .newInodePerName: "which gives a file a new inode number under each new name"
            case .listsOtherInodes: "whose folders list other inode numbers than their files have"
            }
        }
    }

    /// The verdicts found, by device and mount (another mount may get a device number once it is free).
    private static let known = Mutex<[String: Verdict]>([:])

    /// The verdict for the filesystem of `folder`, probed in it the first time this process asks of that mount.
    /// Nil when the probe could not be made (a folder this user cannot write, a read-only mount): nothing is
    /// refused on that word, and the next ask probes again. `filesystem`, when known, saves reading the mount table.
    package static func verdict(in folder: CInt, filesystem: Filesystem? = nil) -> Verdict? {
        guard let device = try? FileStatus(system_fstat(folder)).device else { return nil }
        // Without a mount table (a sandbox without /proc), the device alone.
        let key = "\(device) " + (filesystem?.mount ?? (try? Filesystem(of: folder))?.mount ?? "")
        if let verdict = known.withLock({ $0[key] }) { return verdict }
        guard let verdict = probe(in: folder) else { return nil }
        known.withLock { $0[key] = verdict }
        return verdict
    }

    /// The names the probe uses in a folder: `.inbox-probe.<pid>.<random>` and the same with `.link`.
    static let prefix = ".inbox-probe."

    private static func probe(in folder: CInt) -> Verdict? {
        removeAbandoned(in: folder)
        let first = "\(prefix)\(getpid()).\(UInt64.random(in: 0...UInt64.max))"
        let second = first + ".link"
        // Held locked while it probes, so that no other process's sweep takes it for one a killed probe left.
        guard
            let file = try? FileDescriptor(
                at: folder, first, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o600)
        else { return nil }
        let verdict = (try? system_flock(file.rawValue, LOCK_EX)).flatMap {
            look(in: folder, first, second, created: try? file.fileStatus())
        }
        // Closed first, so that no FUSE client keeps an unlinked name of it as a hidden one; neither name is anyone
        // else's.
        try? file.close()
        _ = try? system_unlinkat(folder, second)
        _ = try? system_unlinkat(folder, first)
        return verdict
    }

    /// Links `first` to `second` and looks at both, and at the folder's listing.
    private static func look(in folder: CInt, _ first: String, _ second: String, created: FileStatus?) -> Verdict? {
        guard let created else { return nil }
        do {
            try system_linkat(folder, first, folder, second)
        } catch .notPermitted, .notImplemented, .notSupported {
            return .refusesLink
        } catch .ioError where RenameFlagSupport.isRclone(folder) {
            return .refusesLink  // rclone answers `link`, which it does not implement, with EIO
        } catch {
            return nil
        }
        do {
            let one = try fileStatus(in: folder, first, fresh: true)
            let other = try fileStatus(in: folder, second, fresh: true)
            guard one.inode == created.inode, other.inode == created.inode, other.linkCount == 2 else {
                return .newInodePerName
            }
            var listed = 0
            try FileDescriptor(folder: ".", at: folder).forEachListed { entry throws(Errno) in
                let name = entry.name.string
                if name == first || name == second {
                    guard entry.inode == created.inode else { return false }
                    listed += 1
                }
                return listed < 2
            }
            return listed == 2 ? .keepsIdentity : .listsOtherInodes
        } catch {
            return nil
        }
    }

    /// Removes the probe names a killed process left in `folder`: those whose file's lock can be taken (both names
    /// of a probe are one file, which its live prober holds locked). A name that cannot be looked at stays.
    private static func removeAbandoned(in folder: CInt) {
        var found: [FileName] = []
        try? FileDescriptor(folder: ".", at: folder).forEachListed { entry throws(Errno) in
            if entry.name.string.hasPrefix(prefix) { found.append(entry.name) }
            return true
        }
        for name in found {
            guard let file = try? FileDescriptor(at: folder, name, [.noFollow, .nonBlocking]) else { continue }
            let abandoned = (try? system_flock(file.rawValue, LOCK_EX | LOCK_NB)) != nil
            try? file.close()
            if abandoned { _ = try? system_unlinkat(folder, name) }
        }
    }
}
