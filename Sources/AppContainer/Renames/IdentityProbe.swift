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

    /// The probe's folder in the folder it probes: `.inbox-probe.<pid>.<random>`, holding the file `a` and its second
    /// name `b`. A folder of its own, so that no other process's names change the listing it reads.
    static let prefix = ".inbox-probe."

    private static func probe(in folder: CInt) -> Verdict? {
        removeAbandoned(in: folder)
        let room = "\(prefix)\(getpid()).\(UInt64.random(in: 0...UInt64.max))"
        guard (try? system_mkdirat(folder, room, mode: 0o700)) != nil else { return nil }
        defer { remove(room, in: folder) }
        guard let inside = try? FileDescriptor(folder: room, at: folder),
            let file = try? FileDescriptor(at: inside.rawValue, "a", [.writeOnly, .create, .exclusive], mode: 0o600)
        else { return nil }
        // Held locked while it probes, so that no other process's sweep takes the folder for one a killed probe left.
        let verdict = (try? system_flock(file.rawValue, LOCK_EX)).flatMap {
            look(in: inside.rawValue, created: try? file.fileStatus())
        }
        // Closed before its names go (`remove`), so that no FUSE client keeps one as a hidden name.
        try? file.close()
        return verdict
    }

    /// Links `a` to `b` in the probe's folder and looks at both, and at the folder's listing.
    private static func look(in folder: CInt, created: FileStatus?) -> Verdict? {
        guard let created else { return nil }
        do {
            try system_linkat(folder, "a", folder, "b")
        } catch .notPermitted, .notImplemented, .notSupported {
            return .refusesLink
        } catch .ioError where RenameFlagSupport.isRclone(folder) {
            return .refusesLink  // rclone answers `link`, which it does not implement, with EIO
        } catch {
            return nil
        }
        do {
            let one = try fileStatus(in: folder, "a", fresh: true)
            let other = try fileStatus(in: folder, "b", fresh: true)
            guard one.inode == created.inode, other.inode == created.inode, other.linkCount == 2 else {
                return .newInodePerName
            }
            let listed = try FileDescriptor(folder: ".", at: folder).entriesAndInodes()
            let inodes = listed.filter { ["a", "b"].contains($0.name.string) }.map(\.inode)
            guard inodes.count == 2 else { return nil }  // cannot tell: another process took the folder
            return inodes.allSatisfy { $0 == created.inode } ? .keepsIdentity : .listsOtherInodes
        } catch {
            return nil
        }
    }

    /// Removes the probe folders a killed process left in `folder`: those whose file's lock can be taken, or that
    /// hold no file (its live prober holds it locked). One that cannot be looked at stays.
    private static func removeAbandoned(in folder: CInt) {
        var found: [FileName] = []
        try? FileDescriptor(folder: ".", at: folder).forEachListed { entry throws(Errno) in
            if entry.name.string.hasPrefix(prefix) { found.append(entry.name) }
            return true
        }
        for room in found {
            if let file = try? FileDescriptor(at: folder, room.string + "/a", [.noFollow, .nonBlocking]) {
                let abandoned = (try? system_flock(file.rawValue, LOCK_EX | LOCK_NB)) != nil
                try? file.close()
                guard abandoned else { continue }
            }
            remove(room.string, in: folder)
        }
    }

    /// Removes the probe folder `room` and the two names in it; what fails to go stays, for the next sweep.
    private static func remove(_ room: String, in folder: CInt) {
        _ = try? system_unlinkat(folder, room + "/b")
        _ = try? system_unlinkat(folder, room + "/a")
        _ = try? system_unlinkat(folder, room, removeDirectory: true)
    }
}
