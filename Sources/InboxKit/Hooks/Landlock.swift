import AppContainer
import CLinux
import Glibc
import Synchronization

/// The sandbox of an external handler (ARCHITECTURE.md, "The hook sandbox"): no write access to the container,
/// read and execute everywhere, writes elsewhere as usual.
///
/// Landlock cannot take a right away beneath a folder it grants it on, so the ruleset handles the write
/// rights and grants them beneath every child of `/` and of each of the container's ancestors, except the
/// child on the way to the container: the container gets none, nor do the ancestors' own entries (a hook
/// cannot create a file directly in an ancestor folder, such as `/tmp` for a container below it).
///
/// Landlock does not cover chmod, chown, utimes, extended attributes or inode flags, so a seccomp filter
/// makes those fail with EPERM, everywhere: it cannot tell a path inside the container from one outside.
/// It also refuses the calls that go around file rules (io_uring, ptrace, process_vm_readv/writev, file
/// handles, userfaultfd, bpf, personality, mounts) and every system call of another ABI (32-bit or x32
/// programs), whose numbers differ.
///
/// Rules follow paths: a bind mount that shows the container somewhere else leaves it writable there.
///
/// Both confine only the thread that asks (no TSYNC), and a thread's confinement passes to the processes
/// it spawns: the runner confines a short-lived thread of its own, which spawns the hook and ends.
enum Landlock {
    /// The kernel's Landlock ABI version; 0 when Landlock or seccomp filters are missing (or disabled).
    static let abiVersion: CInt = {
        guard let version = try? system_landlock_abi_version(), version >= 1 else { return 0 }
        do {
            try system_seccomp_filter_available()
        } catch {
            return 0
        }
        return version
    }()

    static var isAvailable: Bool { abiVersion >= 1 }

    /// The rights that change the file system, as far as this ABI version knows them. Reading and
    /// executing are not handled, so Landlock allows them everywhere.
    static var writeRights: Access {
        var rights: Access = [
            .writeFile, .removeDirectory, .removeFile, .makeCharacterDevice, .makeDirectory, .makeRegular,
            .makeSocket, .makeFIFO, .makeBlockDevice, .makeSymbolicLink,
        ]
        if abiVersion >= 2 { rights.insert(.refer) }
        if abiVersion >= 3 { rights.insert(.truncate) }
        return rights
    }

    /// The rights that a rule on a file that is not a folder may hold.
    private static var fileRights: Access { writeRights.intersection([.writeFile, .truncate]) }

    /// A ruleset that allows writing beneath everything but `root`, an absolute path without symbolic links
    /// (as `realpath` gives it).
    static func ruleset(sparing root: [UInt8]) throws(Errno) -> FileDescriptor {
        let ruleset = FileDescriptor(owning: try system_landlock_create_ruleset(handledAccess: writeRights.rawValue))
        var folder = try FileDescriptor("/", [.pathOnly, .directory])
        for component in root.split(separator: 0x2F) {
            guard let next = FileName(bytes: component), !next.isDotOrDotDot else { throw .invalidArgument }
            try allowWritingBeneathChildren(of: folder, except: next, in: ruleset)
            let child = try FileDescriptor(at: folder.rawValue, next, [.pathOnly, .directory, .noFollow])
            folder = child
        }
        return ruleset
    }

    /// `ruleset(sparing:)`, kept for the next run and built again only when a folder it lists (`/` and each
    /// ancestor of `root`) has changed since: another device, inode, mode or modification time. A folder
    /// modified in the second before `now` is not trusted to show a later change in its modification time
    /// (timestamps are coarse), so that ruleset is used once and not kept.
    static func sharedRuleset(sparing root: [UInt8], now: Timestamp = .now()) throws(Errno) -> Ruleset {
        try cache.withLock { cache throws(Errno) -> Ruleset in
            let stamps = try listedFolders(sparing: root)
            if let cached = cache[root], cached.stamps == stamps { return cached.ruleset }
            let ruleset = Ruleset(try ruleset(sparing: root))
            if cache.count >= 16 { cache.removeAll() }
            let settled = stamps.allSatisfy { now.seconds - $0.modified.seconds > 1 }
            cache[root] = settled ? Cached(stamps: stamps, ruleset: ruleset) : nil
            return ruleset
        }
    }

    /// Kept rulesets by the root they spare (a watcher has one; tests make many).
    private static let cache = Mutex<[[UInt8]: Cached]>([:])

    private struct Cached {
        let stamps: [FolderStamp]
        let ruleset: Ruleset
    }

    /// The stamps of `/` and each ancestor of `root`: the folders `ruleset(sparing:)` lists.
    private static func listedFolders(sparing root: [UInt8]) throws(Errno) -> [FolderStamp] {
        var stamps: [FolderStamp] = []
        var path: [UInt8] = [0x2F]
        let components = root.split(separator: 0x2F)
        for (index, component) in components.enumerated() {
            let status = try fileStatus(in: currentDirectory, path)
            stamps.append(FolderStamp(status))
            if index < components.count - 1 { path += (path.count > 1 ? [0x2F] : []) + component }
        }
        return stamps
    }

    /// Adds a rule for each child of `folder` but `spared`. Symbolic links get none: what they point to
    /// is judged by its own place. A folder that cannot be listed gives its children no write rights.
    private static func allowWritingBeneathChildren(
        of folder: borrowing FileDescriptor, except spared: FileName, in ruleset: borrowing FileDescriptor
    ) throws(Errno) {
        let names: [FileName]
        do {
            names = try folder.entries()
        } catch .permissionDenied {
            return
        }
        for name in names where name != spared {
            let child: FileDescriptor
            do {
                child = try FileDescriptor(at: folder.rawValue, name, [.pathOnly, .noFollow])
            } catch .noSuchFile {
                continue  // gone since the listing
            }
            let rights: Access
            switch try child.fileStatus().kind {
            case .symbolicLink: continue
            case .directory: rights = writeRights
            default: rights = fileRights
            }
            try system_landlock_add_rule(ruleset.rawValue, beneath: child.rawValue, access: rights.rawValue)
        }
    }

    /// Confines the calling thread, and every process it starts from now on, to `ruleset` and the seccomp
    /// filter. Never call it on a thread that goes on to do anything else.
    static func confineCurrentThread(to ruleset: CInt) throws(Errno) {
        try system_prctl_set_no_new_privs()
        try system_landlock_restrict_self(ruleset)
        try system_seccomp_deny_metadata_changes()
    }
}

extension Landlock {
    /// A ruleset that runs may share: closed once the last one lets it go.
    final class Ruleset: Sendable {
        let rawValue: CInt

        init(_ descriptor: consuming FileDescriptor) {
            rawValue = descriptor.release()
        }

        deinit {
            try? system_close(rawValue)
        }
    }

    /// Landlock's file-system access rights.
    struct Access: OptionSet {
        let rawValue: UInt64

        /// `LANDLOCK_ACCESS_FS_WRITE_FILE`
        static let writeFile = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_WRITE_FILE)
        /// `LANDLOCK_ACCESS_FS_REMOVE_DIR`
        static let removeDirectory = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_REMOVE_DIR)
        /// `LANDLOCK_ACCESS_FS_REMOVE_FILE`
        static let removeFile = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_REMOVE_FILE)
        /// `LANDLOCK_ACCESS_FS_MAKE_CHAR`
        static let makeCharacterDevice = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_MAKE_CHAR)
        /// `LANDLOCK_ACCESS_FS_MAKE_DIR`
        static let makeDirectory = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_MAKE_DIR)
        /// `LANDLOCK_ACCESS_FS_MAKE_REG`
        static let makeRegular = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_MAKE_REG)
        /// `LANDLOCK_ACCESS_FS_MAKE_SOCK`
        static let makeSocket = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_MAKE_SOCK)
        /// `LANDLOCK_ACCESS_FS_MAKE_FIFO`
        static let makeFIFO = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_MAKE_FIFO)
        /// `LANDLOCK_ACCESS_FS_MAKE_BLOCK`
        static let makeBlockDevice = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_MAKE_BLOCK)
        /// `LANDLOCK_ACCESS_FS_MAKE_SYM`
        static let makeSymbolicLink = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_MAKE_SYM)
        /// `LANDLOCK_ACCESS_FS_REFER` (ABI 2): link or rename into another folder.
        static let refer = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_REFER)
        /// `LANDLOCK_ACCESS_FS_TRUNCATE` (ABI 3)
        static let truncate = Access(rawValue: inbox_LANDLOCK_ACCESS_FS_TRUNCATE)
    }
}
