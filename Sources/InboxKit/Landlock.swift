import AppContainer
import CLinux
import Glibc

/// The sandbox of an external handler (DESIGN §2): no write access to the container, read and execute
/// everywhere, writes elsewhere as usual.
///
/// Landlock cannot take a right away beneath a folder it grants it on, so the ruleset handles the write
/// rights and grants them beneath every child of `/` and of each of the container's ancestors, except the
/// child on the way to the container: the container gets none, nor do the ancestors' own entries (a hook
/// cannot create a file directly in an ancestor folder, such as `/tmp` for a container below it).
///
/// Landlock does not cover chmod, chown, utimes, extended attributes or inode flags, so a seccomp filter
/// makes those fail with EPERM, everywhere: it cannot tell a path inside the container from one outside.
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

    /// The rights that change the file system, as far as this ABI version knows them.
    static var writeRights: UInt64 {
        var rights =
            inbox_LANDLOCK_ACCESS_FS_WRITE_FILE | inbox_LANDLOCK_ACCESS_FS_REMOVE_DIR
            | inbox_LANDLOCK_ACCESS_FS_REMOVE_FILE | inbox_LANDLOCK_ACCESS_FS_MAKE_CHAR
            | inbox_LANDLOCK_ACCESS_FS_MAKE_DIR | inbox_LANDLOCK_ACCESS_FS_MAKE_REG
            | inbox_LANDLOCK_ACCESS_FS_MAKE_SOCK | inbox_LANDLOCK_ACCESS_FS_MAKE_FIFO
            | inbox_LANDLOCK_ACCESS_FS_MAKE_BLOCK | inbox_LANDLOCK_ACCESS_FS_MAKE_SYM
        if abiVersion >= 2 { rights |= inbox_LANDLOCK_ACCESS_FS_REFER }
        if abiVersion >= 3 { rights |= inbox_LANDLOCK_ACCESS_FS_TRUNCATE }
        return rights
    }

    /// The rights that a rule on a file that is not a folder may hold.
    private static var fileRights: UInt64 {
        writeRights & (inbox_LANDLOCK_ACCESS_FS_WRITE_FILE | inbox_LANDLOCK_ACCESS_FS_TRUNCATE)
    }

    /// A ruleset that allows writing beneath everything but `root`, an absolute path without symbolic links
    /// (as `realpath` gives it).
    static func ruleset(sparing root: [UInt8]) throws(Errno) -> FileDescriptor {
        let ruleset = FileDescriptor(owning: try system_landlock_create_ruleset(handledAccess: writeRights))
        var folder = try FileDescriptor("/", [.pathOnly, .directory])
        for component in root.split(separator: 0x2F) {
            guard let next = FileName(bytes: component), !next.isDotOrDotDot else { throw .invalidArgument }
            try allowWritingBeneathChildren(of: folder, except: next, in: ruleset)
            let child = try FileDescriptor(at: folder.rawValue, next, [.pathOnly, .directory, .noFollow])
            folder = child
        }
        return ruleset
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
            let rights: UInt64
            switch try child.fileStatus().kind {
            case .symbolicLink: continue
            case .directory: rights = writeRights
            default: rights = fileRights
            }
            try system_landlock_add_rule(ruleset.rawValue, beneath: child.rawValue, access: rights)
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
