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

    private static let known = Mutex<[UInt64: Verdict]>([:])

    /// The verdict for the filesystem of `folder`, probed in it the first time this process asks of that device.
    /// Nil when the probe could not be made (a folder this user cannot write, a read-only mount): nothing is
    /// refused on that word, and the next ask probes again.
    package static func verdict(in folder: CInt) -> Verdict? {
        guard let device = try? FileStatus(system_fstat(folder)).device else { return nil }
        if let verdict = known.withLock({ $0[device] }) { return verdict }
        guard let verdict = probe(in: folder) else { return nil }
        known.withLock { $0[device] = verdict }
        return verdict
    }

    /// The names the probe uses in a folder: `.inbox-probe.<pid>.<random>` and the same with `.link`.
    static let prefix = ".inbox-probe."

    private static func probe(in folder: CInt) -> Verdict? {
        let tag = "\(prefix)\(getpid()).\(UInt64.random(in: 0...UInt64.max))"
        let first = tag
        let second = tag + ".link"
        let created: FileStatus
        do {
            let file = try FileDescriptor(at: folder, first, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o600)
            created = try file.fileStatus()
        } catch {
            return nil
        }
        // Removed whatever the probe found: neither name is anyone else's.
        defer {
            _ = try? system_unlinkat(folder, second)
            _ = try? system_unlinkat(folder, first)
        }
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
}
