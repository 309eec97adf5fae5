import Glibc
import Synchronization

/// A rename that never replaces (ARCHITECTURE.md, "Network and FUSE filesystems"): `renameat2` with
/// `RENAME_NOREPLACE`, or, on a filesystem that refuses rename flags (NFS, SMB, most FUSE filesystems answer
/// EINVAL), the same move made without them:
/// - a file (or symbolic link): `link` to the new name, then `unlink` of the old; EEXIST from `link` is success
///   when the new name holds the old one's inode (NFS can answer so to a LINK it retransmitted);
/// - a folder: `mkdir` of the new name, then a plain `rename` onto that empty folder, which fails rather than
///   replace once anything is in it.
/// Throws EEXIST when the new name is taken, EOPNOTSUPP when the filesystem refuses `link` too (rclone), and every
/// other failure of the calls. The fallback is not atomic: a crash between `link` and `unlink` leaves both names on
/// one inode, and each caller's recovery finishes such a move. Which filesystems refuse the flags is remembered
/// per device, found out once.
package func renameNoReplace(
    _ fromDirectory: CInt, _ from: some CStringConvertible, _ toDirectory: CInt, _ to: some CStringConvertible
) throws(Errno) {
    let device = RenameFlagSupport.refusingDevice(of: toDirectory)
    if device == nil {
        do {
            try system_renameat2(fromDirectory, from, toDirectory, to, .noReplace)
            return
        } catch .invalidArgument {
            // Refused flags, or a move the rename itself forbids (a folder into itself): the fallback tells.
        }
    }
    try moveWithoutFlags(fromDirectory, from, toDirectory, to)
    if device == nil { RenameFlagSupport.remember(toDirectory) }
}

/// The fallback of `renameNoReplace`.
private func moveWithoutFlags(
    _ fromDirectory: CInt, _ from: some CStringConvertible, _ toDirectory: CInt, _ to: some CStringConvertible
) throws(Errno) {
    do {
        try system_linkat(fromDirectory, from, toDirectory, to)
    } catch .fileExists {
        let source = try system_lstatat(fromDirectory, from)
        let target = try system_lstatat(toDirectory, to)
        guard source.st_dev == target.st_dev, source.st_ino == target.st_ino else { throw Errno.fileExists }
    } catch .notPermitted, .isDirectory {
        let source = FileStatus(try system_lstatat(fromDirectory, from))
        guard source.kind == .directory else { throw Errno.notSupported }
        try system_mkdirat(toDirectory, to, mode: 0o700)
        do {
            try system_renameat2(fromDirectory, from, toDirectory, to, [])
        } catch {
            try system_unlinkat(toDirectory, to, removeDirectory: true)
            throw error == .notEmpty ? Errno.fileExists : error
        }
        return
    } catch .notImplemented {
        throw Errno.notSupported
    }
    do {
        try system_unlinkat(fromDirectory, from)
    } catch {
        try system_unlinkat(toDirectory, to)
        throw error
    }
}

/// The devices whose filesystem refuses rename flags, as found by `renameNoReplace` in this process.
package enum RenameFlagSupport {
    private static let refusing = Mutex<Set<UInt64>>([])
    /// Set once any device is known to refuse: until then a rename asks for no device number at all.
    private static let anyRefusing = Atomic<Bool>(false)

    /// The device of the folder `fd` when its filesystem is known to refuse rename flags; nil otherwise (or when
    /// the folder cannot be read: the rename tells).
    static func refusingDevice(of fd: CInt) -> UInt64? {
        guard anyRefusing.load(ordering: .acquiring), let status = try? system_fstat(fd) else { return nil }
        let device = UInt64(status.st_dev)
        return refusing.withLock { $0.contains(device) } ? device : nil
    }

    /// Notes that the filesystem of the folder `fd` refused rename flags, where the fallback then worked.
    static func remember(_ fd: CInt) {
        guard let status = try? system_fstat(fd) else { return }
        refusing.withLock { _ = $0.insert(UInt64(status.st_dev)) }
        anyRefusing.store(true, ordering: .releasing)
    }

    /// Whether the filesystem of the folder `fd` is known to refuse rename flags.
    package static func isKnownRefusing(_ fd: CInt) -> Bool { refusingDevice(of: fd) != nil }
}
