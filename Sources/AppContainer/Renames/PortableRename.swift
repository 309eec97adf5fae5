import Glibc
import Synchronization

/// A rename that never replaces (ARCHITECTURE.md, "Network and FUSE filesystems"): `renameat2` with
/// `RENAME_NOREPLACE`, or, on a filesystem that refuses rename flags (NFS, SMB, most FUSE filesystems answer
/// EINVAL), the same move made without them:
/// - a file (or symbolic link): `link` to the new name, then `unlink` of the old; EEXIST from `link` is success
///   when the new name holds the old one's inode (NFS can answer so to a LINK it retransmitted);
/// - a folder: `mkdir` of the new name (mode 0: a placeholder, told from a user's folder by
///   `removeFolderPlaceholder`), then a plain `rename` onto that empty folder, which fails rather than replace once
///   anything is in it. A placeholder something was put into meanwhile gets the folder's mode and stays, and the
///   move fails with ENOTEMPTY.
/// With `linkingFiles` false, neither is made: the call throws EINVAL, the device noted as refusing, for the caller to
/// move the item through a private name (`checkedRename`, ARCHITECTURE.md, "Moves without rename flags").
/// Throws EEXIST when the new name is taken, EOPNOTSUPP when the filesystem refuses `link` too (rclone), and every
/// other failure of the calls. The fallback is not atomic: a crash between `link` and `unlink` leaves both names on
/// one inode, and each caller's recovery finishes such a move. Which filesystems refuse the flags is remembered
/// per device, found out once.
package func renameNoReplace(
    _ fromDirectory: CInt, _ from: some CStringConvertible, _ toDirectory: CInt, _ to: some CStringConvertible,
    linkingFiles: Bool = true
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
    if !linkingFiles {
        RenameFlagSupport.remember(toDirectory)
        throw Errno.invalidArgument
    }
    try moveWithoutFlags(fromDirectory, from, toDirectory, to)
    if device == nil { RenameFlagSupport.remember(toDirectory) }
}

/// The prefix of the private name a file moved out of a folder where rename flags are refused holds between its
/// plain `rename` and its `link` to the target (ARCHITECTURE.md, "Moves without rename flags"): `.inbox-move.`, then
/// the mover's record's id. Hidden, so no watcher, sweep, count or backup takes it for an item.
package let privateMovePrefix = Array(".inbox-move.".utf8)

/// `.inbox-move.<id>`: the private name of the move whose durable record has the id `id` (letters, digits, `-`).
package func privateMoveName(_ id: String) -> FileName {
    FileName(bytes: privateMovePrefix + Array(id.utf8)).unsafelyUnwrapped
}

/// `checkedRename` where rename flags are refused, for a file (ARCHITECTURE.md, "Moves without rename flags"): a
/// plain `rename` of `name` to `privateName` in `folder` (a name no other mover uses, which the caller's durable record
/// names, so that recovery finds it), a fresh look that it holds the file `expected` (else a writer replaced the item
/// just before: what is there goes back to `name`, a clash name beside it if that is taken, and the call throws
/// ESTALE), then `link` to the first free name in `target` and `unlink` of the private name (`renameNoReplace`'s
/// fallback, so that EEXIST on the source's own inode is success); where the new name is the private name itself (a
/// copy's claim), the check ends the move. A `rename` that answers ENOENT is success when the
/// private name holds the item. Any other failure puts the private name back first.
func checkedMoveThroughPrivateName(
    _ name: FileName, in folder: CInt, into target: CInt, as newName: FileName?, naming: ClashNaming,
    expected: FileID, through privateName: FileName
) throws(Errno) -> (name: FileName, status: FileStatus) {
    do {
        try system_renameat2(folder, name, folder, privateName, [])
    } catch .noSuchFile {
        // Gone, or renamed all the same (NFS answers a retransmitted RENAME so).
        guard try fileStatusIfPresent(in: folder, privateName, fresh: true)?.fileID == expected else {
            throw Errno.noSuchFile
        }
    }
    let status: FileStatus
    do {
        status = try fileStatus(in: folder, privateName, fresh: true)
    } catch {
        try putBack(privateName, from: folder, into: folder, as: name)
        throw error
    }
    guard status.fileID == expected else {
        // A writer renamed another file over `name` just before: it goes back, to arrive itself.
        try putBack(privateName, from: folder, into: folder, as: name)
        throw Errno.staleFile
    }
    // A claim (a copy's, in the same folder) is the private name itself: nothing more to move.
    if (newName ?? name) == privateName, folder == target { return (privateName, status) }
    do {
        let moved = try naming.firstFree(for: newName ?? name) { candidate throws(Errno) in
            try renameNoReplace(folder, privateName, target, candidate)
        }
        return (moved, status)
    } catch {
        try putBack(privateName, from: folder, into: folder, as: name)
        throw error
    }
}

/// Finishes a move that `renameNoReplace`'s fallback left half done (ARCHITECTURE.md, "Network and FUSE
/// filesystems"): when `to` in `toDirectory` and `from` in `fromDirectory` are two names of one file (device and
/// inode), the crash came between the `link` and the `unlink`, and `from` is unlinked now. Returns whether it was;
/// false when either name is missing, is a folder, or holds another file. Only a caller whose own record (a journal
/// intent, a staging name, a log's rotation) says that `from` was being moved to `to` may ask: a foreign hard link
/// looks the same.
package func finishInterruptedMove(
    _ fromDirectory: CInt, _ from: some CStringConvertible, _ toDirectory: CInt, _ to: some CStringConvertible
) throws(Errno) -> Bool {
    // The link count is no test: a FUSE client may still hold the count of before the `link` for the old name.
    guard let source = try fileStatusIfPresent(in: fromDirectory, from), source.kind != .directory,
        let target = try fileStatusIfPresent(in: toDirectory, to), source.isSameFile(as: target)
    else { return false }
    if from.pathBytes == to.pathBytes {
        // One name, not two: nothing to finish.
        let fromFolder = FileStatus(try system_fstat(fromDirectory))
        if fromFolder.isSameFile(as: FileStatus(try system_fstat(toDirectory))) { return false }
    }
    try system_unlinkat(fromDirectory, from)
    try system_refreshAttributes(toDirectory, to)
    return true
}

/// Removes the placeholder that `renameNoReplace`'s fallback made as the new name `name` of a folder in `folder`,
/// where a crash cut off the `rename` onto it (ARCHITECTURE.md, "Network and FUSE filesystems"): an empty folder
/// of mode 0 owned by this user, which no `mkdir` of a user's makes. Returns whether it did; false when `name` is
/// missing, anything else, or no longer empty. Only a caller whose own record says that a folder was being moved
/// to `name` may ask.
package func removeFolderPlaceholder(in folder: CInt, _ name: some CStringConvertible) throws(Errno) -> Bool {
    guard let status = try fileStatusIfPresent(in: folder, name), isFolderPlaceholder(status) else { return false }
    return try removeIfEmpty(in: folder, name)
}

/// Removes the placeholders (`removeFolderPlaceholder`) a crash left where the folder item `name` was being moved
/// into `folder`: among the names `naming` gives it, in turn up to the first free one (the fallback made its
/// placeholder at the first name free then). Returns how many it removed.
package func removeFolderPlaceholders(for name: FileName, in folder: CInt, naming: ClashNaming) throws(Errno) -> Int {
    var removed = 0
    for attempt in ClashNaming.attempts() {
        let candidate = naming.candidate(for: name, attempt: attempt)
        guard let status = try fileStatusIfPresent(in: folder, candidate) else { break }
        if isFolderPlaceholder(status), try removeIfEmpty(in: folder, candidate) { removed += 1 }
    }
    return removed
}

private func isFolderPlaceholder(_ status: FileStatus) -> Bool {
    status.kind == .directory && status.mode == folderPlaceholderMode && status.owner == geteuid()
}

/// `rmdir`; false when the folder is no longer empty (the folder's `rename` came meanwhile), or gone.
private func removeIfEmpty(in folder: CInt, _ name: some CStringConvertible) throws(Errno) -> Bool {
    do {
        try system_unlinkat(folder, name, removeDirectory: true)
    } catch .notEmpty, .fileExists, .noSuchFile {
        return false
    }
    return true
}

/// The mode of the folder the fallback makes as a folder's new name: no bits, as no user's folder has.
private let folderPlaceholderMode: mode_t = 0

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
        guard source.kind == .directory else { throw refusedLink(toDirectory) }
        try system_mkdirat(toDirectory, to, mode: folderPlaceholderMode)
        do {
            try system_renameat2(fromDirectory, from, toDirectory, to, [])
        } catch {
            do {
                try system_unlinkat(toDirectory, to, removeDirectory: true)
            } catch .notEmpty, .fileExists {
                // A writer put something into the placeholder (root enters a folder of mode 0): it becomes a
                // folder of the item's mode, what was put there reachable; the item stays, and the move fails.
                try system_fchmodat(toDirectory, to, source.mode & 0o7777)
                throw Errno.notEmpty
            }
            // rclone refuses a rename onto a folder, even an empty one it just made.
            if error == .fileExists, RenameFlagSupport.isRclone(toDirectory) { throw refusedLink(toDirectory) }
            throw error == .notEmpty ? Errno.fileExists : error
        }
        return
    } catch .notImplemented {
        throw refusedLink(toDirectory)
    } catch .ioError where RenameFlagSupport.isRclone(toDirectory) {
        // rclone answers `link` (which it does not implement) with EIO.
        throw refusedLink(toDirectory)
    }
    do {
        try system_unlinkat(fromDirectory, from)
    } catch {
        try system_unlinkat(toDirectory, to)
        throw error
    }
    // The client (bindfs) may keep the new name's attributes from the `link` (two links) for its attribute timeout:
    // fetched afresh, no process here takes the file for one with another hard link (the Mover's copy path). Moved
    // all the same should that fail: only the cache stays as it was.
    try? system_refreshAttributes(toDirectory, to)
}

/// Notes that the filesystem of the folder `fd` refuses `link` too; returns the error of the move: EOPNOTSUPP.
private func refusedLink(_ fd: CInt) -> Errno {
    RenameFlagSupport.refusedLink(fd)
    return .notSupported
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

    /// The filesystem (`Filesystem.name`) where `link` was refused too, the last time it was in this process: no
    /// container can live there, and the error of the command says so (`ContainerError(_:doing:path:)`).
    package static var linkRefusedOn: String? { linkRefusal.withLock { $0 } }
    private static let linkRefusal = Mutex<String?>(nil)

    /// Notes that the filesystem of the folder `fd` refused `link` as well as rename flags.
    static func refusedLink(_ fd: CInt) {
        let name = (try? Filesystem(of: fd).name) ?? "this filesystem"
        linkRefusal.withLock { $0 = name }
    }

    /// Whether the folder `fd` is on an rclone mount, which answers `link` with EIO: asked only once a call failed.
    static func isRclone(_ fd: CInt) -> Bool { (try? Filesystem(of: fd))?.mountType == "fuse.rclone" }

    /// Whether a move into the folder `fd` may be made by the fallback: its filesystem is known to refuse rename
    /// flags, or is a network or FUSE filesystem (`Filesystem.pollReason`), as most of those do. Reads the mount
    /// table: asked once per folder opened, not per move.
    package static func mayRefuse(_ fd: CInt) -> Bool {
        if isKnownRefusing(fd) { return true }
        guard let filesystem = try? Filesystem(of: fd) else { return true }
        return filesystem.pollReason != nil
    }

    /// Whether the filesystem of the folder `fd` is known to refuse rename flags.
    package static func isKnownRefusing(_ fd: CInt) -> Bool { refusingDevice(of: fd) != nil }
}
