import Glibc

/// How a clashing name gets a new one (ARCHITECTURE.md, "Names").
package enum ClashNaming: Sendable {
    /// `report.pdf`, `report-1.pdf`, `report-2.pdf`
    case inbox
    /// `report.pdf`, `report 2.pdf`, `report 3.pdf`
    case documents

    /// The name to try at `attempt` (0 is the name itself), never longer than 255 bytes.
    package func candidate(for name: FileName, attempt: Int) -> FileName {
        guard attempt > 0 else { return name }
        let (stem, ext) = name.stemAndExtension
        let suffix: [UInt8] =
            switch self {
            case .inbox: Array("-\(attempt)".utf8)
            case .documents: Array(" \(attempt + 1)".utf8)
            }
        let room = FileName.maxLength - suffix.count - ext.count
        let keptExt = room > 0 ? ext : []
        let keptStem = FileName.truncated(stem, toAtMost: FileName.maxLength - suffix.count - keptExt.count)
        return FileName(bytes: keptStem + suffix + keptExt) ?? name
    }

    /// The first attempts `firstFree` makes, in order: 0 to 99 one by one, then doubling (100, 200, 400, … up
    /// to 6,553,600), so that a folder holding thousands of clashes in a row costs a few dozen tries.
    package static func attempts() -> [Int] { firstAttempts }

    /// `attempts()`, made once: every rename walks it.
    private static let firstAttempts = Array(0..<100) + (0...16).map { 100 << $0 }

    /// Calls `place` with successive candidates until one does not clash (EEXIST); returns the name used.
    /// After `attempts()` (whose doubling numbers fill up when every clash takes the next, as 10,000 mails that
    /// each carry an `attachment-1.bin` do), it tries random numbers below a billion, then every number in turn:
    /// it never gives up while a free name exists.
    package func firstFree(for name: FileName, _ place: (FileName) throws(Errno) -> Void) throws(Errno) -> FileName {
        func placed(_ attempt: Int) throws(Errno) -> FileName? {
            let candidate = candidate(for: name, attempt: attempt)
            do {
                try place(candidate)
                return candidate
            } catch .fileExists {
                return nil
            }
        }
        for attempt in Self.firstAttempts {
            if let name = try placed(attempt) { return name }
        }
        for _ in 0..<64 {
            if let name = try placed(Int.random(in: 100..<1_000_000_000)) { return name }
        }
        for attempt in 100..<Int.max {
            if let name = try placed(attempt) { return name }
        }
        throw Errno.fileExists
    }
}

/// A file's place on its filesystem: device and inode.
package struct FileID: Hashable, Sendable {
    /// The device that holds the file (`st_dev`).
    package let device: UInt64
    /// The file's inode number on that device.
    package let inode: UInt64

    /// The file `inode` on `device`.
    package init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

extension FileStatus {
    /// The file's place, to tell whether a name still holds the same file.
    package var fileID: FileID { FileID(device: device, inode: inode) }
}

/// The one checked rename and the one put-back (ARCHITECTURE.md, "Only the file decided on").
///
/// Between a look at a file and its rename, another process may rename a different file over its name. A
/// rename by name would then take that file. So the file is renamed first, the name it went to is checked to
/// hold the file decided on (device and inode), and anything else is put back where it came from.
///
/// Renames `name` in `folder` into `target` under the first free name `naming` gives (`newName`, or `name`
/// itself, first), then checks that it holds the file `expected`. Returns the name it took, or nil when another
/// file held `name` (that file is put back into `folder`, under a free name). Throws ENOENT when nothing was
/// there, and any other failure of the rename (EXDEV, ENOSPC, EPERM…); when the check itself fails, what was
/// renamed goes back first.
package func checkedRename(
    _ name: FileName, in folder: CInt, into target: CInt, as newName: FileName? = nil, naming: ClashNaming,
    expected: FileID, through privateName: FileName? = nil
) throws(Errno) -> FileName? {
    try checkedRenameWithStatus(
        name, in: folder, into: target, as: newName, naming: naming, expected: expected, through: privateName)?.name
}

/// `checkedRename`, returning with the name the status the check read there (the file decided on, just after its
/// rename), so that a caller need not read it again.
///
/// With `privateName`, a file is never moved by `link` and `unlink` of `name` where rename flags are refused (a
/// writer's file renamed over `name` between the two would be unlinked): it goes through that private name instead,
/// checked before it is linked into `target` (`checkedMoveThroughPrivateName`, ARCHITECTURE.md, "Moves without rename
/// flags"), and another file found there throws ESTALE. A local filesystem's `RENAME_NOREPLACE` is used as ever.
package func checkedRenameWithStatus(
    _ name: FileName, in folder: CInt, into target: CInt, as newName: FileName? = nil, naming: ClashNaming,
    expected: FileID, through privateName: FileName? = nil
) throws(Errno) -> (name: FileName, status: FileStatus)? {
    if let privateName, RenameFlagSupport.isKnownRefusing(target) {
        return try checkedMoveThroughPrivateName(
            name, in: folder, into: target, as: newName, naming: naming, expected: expected, through: privateName)
    }
    let moved: FileName
    do {
        moved = try naming.firstFree(for: newName ?? name) { candidate throws(Errno) in
            try renameNoReplace(folder, name, target, candidate, linkingFiles: privateName == nil)
        }
    } catch .invalidArgument where privateName != nil && RenameFlagSupport.isKnownRefusing(target) {
        return try checkedMoveThroughPrivateName(
            name, in: folder, into: target, as: newName, naming: naming, expected: expected,
            through: privateName.unsafelyUnwrapped)
    }
    let status: FileStatus
    do {
        status = try fileStatus(in: target, moved)
    } catch {
        try putBack(moved, from: target, into: folder, as: name)
        throw error
    }
    guard status.fileID == expected else {
        try putBack(moved, from: target, into: folder, as: name)
        return nil
    }
    return (moved, status)
}

/// Renames `current` in `source` back into `folder` as `name`, or the first free Inbox-style name beside it
/// (`name-1`, …); returns the name it took. `current` must have been moved there from `name`: where a move by `link`
/// and `unlink` was cut between the two, `current` is a second name of the file still at `name`, and is unlinked
/// (`finishInterruptedMove`, ARCHITECTURE.md, "Network and FUSE filesystems"), never put back beside it.
///
/// Where rename flags and `link` are both refused (rclone: no container lives there, ARCHITECTURE.md, "Moves without
/// rename flags"), a file taken to a private name goes back by a plain `rename` onto a name found free just before.
@discardableResult
package func putBack(_ current: FileName, from source: CInt, into folder: CInt, as name: FileName) throws(Errno)
    -> FileName
{
    if try finishInterruptedMove(source, current, folder, name) { return name }
    var linkRefused = false
    return try ClashNaming.inbox.firstFree(for: name) { candidate throws(Errno) in
        if linkRefused {
            guard try fileStatusIfPresent(in: folder, candidate) == nil else { throw Errno.fileExists }
            return try system_renameat2(source, current, folder, candidate, [])
        }
        do throws(Errno) {
            try renameNoReplace(source, current, folder, candidate)
        } catch .notSupported where RenameFlagSupport.linkRefusedOn != nil {
            linkRefused = true
            guard try fileStatusIfPresent(in: folder, candidate) == nil else { throw Errno.fileExists }
            try system_renameat2(source, current, folder, candidate, [])
        }
    }
}
