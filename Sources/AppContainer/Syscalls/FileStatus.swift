import CLinux
import Glibc

/// What `statx` says of a file, without following a symbolic link.
package struct FileStatus: Sendable, Equatable {
    /// Regular file, folder, symbolic link and so on.
    package let kind: FileKind
    /// The size in bytes (`st_size`).
    package let size: Int64
    /// The last change of the content (`st_mtim`).
    package let modified: Timestamp
    /// The last access (`st_atim`), as the mount's `relatime` or `noatime` keeps it.
    package let accessed: Timestamp
    /// The last change of the inode (`st_ctim`): a write, a rename, a link, a `chmod`. Nobody can set it back,
    /// where the filesystem keeps it (not sshfs or rclone, which report the modification time).
    package let changed: Timestamp
    /// The permission bits (`st_mode & 07777`).
    package private(set) var mode: mode_t
    /// How many names the inode has (`st_nlink`).
    package let linkCount: Int
    /// The filesystem's device number (`st_dev`).
    package let device: UInt64
    /// The inode number (`st_ino`); with `device`, the file's identity.
    package let inode: UInt64
    /// When the inode was made (zero where the filesystem does not say): a reused inode is born again.
    package let born: Timestamp
    /// The owner's user id (`st_uid`).
    package let owner: UInt32
    /// The group id (`st_gid`).
    package let group: UInt32

    /// The status `fstat` or `lstat` gives, which has no birth time: `born` is zero.
    package init(_ status: stat) {
        kind = FileKind(mode: status.st_mode)
        size = Int64(status.st_size)
        modified = Timestamp(status.st_mtim)
        accessed = Timestamp(status.st_atim)
        changed = Timestamp(status.st_ctim)
        mode = status.st_mode & 0o7777
        linkCount = Int(status.st_nlink)
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
        born = Timestamp(seconds: 0, nanoseconds: 0)
        owner = UInt32(status.st_uid)
        group = UInt32(status.st_gid)
    }

    /// The status `statx` gives, with the birth time where the filesystem keeps it.
    package init(_ status: inbox_file_status) {
        kind = FileKind(mode: mode_t(status.mode))
        size = status.size
        modified = Timestamp(seconds: status.modified_seconds, nanoseconds: Int64(status.modified_nanoseconds))
        accessed = Timestamp(seconds: status.accessed_seconds, nanoseconds: Int64(status.accessed_nanoseconds))
        changed = Timestamp(seconds: status.changed_seconds, nanoseconds: Int64(status.changed_nanoseconds))
        mode = mode_t(status.mode) & 0o7777
        linkCount = Int(status.link_count)
        device = status.device
        inode = status.inode
        born =
            status.born_known != 0
            ? Timestamp(seconds: status.born_seconds, nanoseconds: Int64(status.born_nanoseconds))
            : Timestamp(seconds: 0, nanoseconds: 0)
        owner = status.owner
        group = status.group
    }

    /// The same status with other permission bits: what `fstat` says after a `fchmod` to `mode`.
    package func withMode(_ mode: mode_t) -> FileStatus {
        var status = self
        status.mode = mode & 0o7777
        return status
    }

    /// Whether both describe the same file: the one "same file" check, by `FileID` (device and inode).
    package func isSameFile(as other: FileStatus) -> Bool {
        fileID == other.fileID
    }
}

/// What of a folder's status a change of its list of names moves: the one stamp every poll and cache of a folder
/// compares. A name made, removed or renamed moves the modification and change times (and a size or link count);
/// a change of mode, the change time; a folder replaced is another inode, or the same inode born again.
package struct FolderStamp: Equatable, Sendable {
    package let folder: FileID
    package let born: Timestamp
    package let size: Int64
    package let linkCount: Int
    /// When a name in it last changed: how long it has held still.
    package let modified: Timestamp
    package let changed: Timestamp

    /// The stamp of the folder whose status is `status`.
    package init(_ status: FileStatus) {
        folder = status.fileID
        born = status.born
        size = status.size
        linkCount = status.linkCount
        modified = status.modified
        changed = status.changed
    }
}

extension FileDescriptor {
    /// The status of the open file, from `statx` (with the birth time, unlike `status()`).
    package func fileStatus() throws(Errno) -> FileStatus { FileStatus(try system_statx(rawValue, "")) }

    /// The status of the open file as the server has it, past a network or FUSE client's attribute cache
    /// (ARCHITECTURE.md, "Network and FUSE filesystems").
    package func freshFileStatus() throws(Errno) -> FileStatus {
        FileStatus(try system_statx(rawValue, "", fresh: true))
    }
}

/// The status of `name` in the folder `directory`, never following a symbolic link; `fresh`, as the server has it,
/// past a network or FUSE client's attribute cache (ARCHITECTURE.md, "Network and FUSE filesystems").
package func fileStatus(in directory: CInt, _ name: some CStringConvertible, fresh: Bool = false) throws(Errno)
    -> FileStatus
{
    FileStatus(try system_statx(directory, name, fresh: fresh))
}

/// The status of `name` in `directory` (`fileStatus`), or nil when there is no such file; any other failure is
/// thrown.
package func fileStatusIfPresent(in directory: CInt, _ name: some CStringConvertible, fresh: Bool = false)
    throws(Errno) -> FileStatus?
{
    do {
        return try fileStatus(in: directory, name, fresh: fresh)
    } catch .noSuchFile {
        return nil
    }
}
