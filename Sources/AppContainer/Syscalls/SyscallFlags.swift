import CLinux
import Glibc

/// Flags asked of `openat`. `O_CLOEXEC` is always added: no descriptor leaks into a child.
package struct OpenFlags: OptionSet, Sendable {
    /// The `O_*` bits.
    package let rawValue: CInt
    /// The flags of these `O_*` bits.
    package init(rawValue: CInt) { self.rawValue = rawValue }

    /// `O_RDONLY`
    package static let readOnly: OpenFlags = []
    /// `O_WRONLY`
    package static let writeOnly = OpenFlags(rawValue: O_WRONLY)
    /// `O_RDWR`
    package static let readWrite = OpenFlags(rawValue: O_RDWR)
    /// `O_CREAT`
    package static let create = OpenFlags(rawValue: O_CREAT)
    /// `O_EXCL`
    package static let exclusive = OpenFlags(rawValue: O_EXCL)
    /// `O_APPEND`
    package static let append = OpenFlags(rawValue: O_APPEND)
    /// `O_TRUNC`
    package static let truncate = OpenFlags(rawValue: O_TRUNC)
    /// `O_NOFOLLOW`: fail with ELOOP rather than follow a symbolic link in the last component.
    package static let noFollow = OpenFlags(rawValue: O_NOFOLLOW)
    /// `O_DIRECTORY`
    package static let directory = OpenFlags(rawValue: O_DIRECTORY)
    /// `O_NONBLOCK`: never hang opening a FIFO.
    package static let nonBlocking = OpenFlags(rawValue: O_NONBLOCK)
    /// `O_PATH`: a handle for `*at` calls and `fstat`, never reading the file.
    package static let pathOnly = OpenFlags(rawValue: inbox_O_PATH)
    /// `O_TMPFILE`: an unnamed file in the given folder, named later with `linkat`.
    package static let temporaryFile = OpenFlags(rawValue: inbox_O_TMPFILE)
}

/// Flags for `renameat2`.
package struct RenameFlags: OptionSet, Sendable {
    /// The `RENAME_*` bits.
    package let rawValue: CUnsignedInt
    /// The flags of these `RENAME_*` bits.
    package init(rawValue: CUnsignedInt) { self.rawValue = rawValue }

    /// `RENAME_NOREPLACE`: fail with EEXIST rather than replace the target.
    package static let noReplace = RenameFlags(rawValue: inbox_RENAME_NOREPLACE)
    /// `RENAME_EXCHANGE`
    package static let exchange = RenameFlags(rawValue: inbox_RENAME_EXCHANGE)
}

/// The kind of a file, from `st_mode`.
package enum FileKind: Sendable, Equatable {
    /// `S_IFREG`, `S_IFDIR`, `S_IFLNK`, `S_IFIFO`, `S_IFSOCK`, `S_IFCHR`, `S_IFBLK`, and anything else.
    case regular, directory, symbolicLink, fifo, socket, characterDevice, blockDevice, unknown

    /// The kind of the file type bits of `mode` (`st_mode & S_IFMT`).
    package init(mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symbolicLink
        case S_IFIFO: self = .fifo
        case S_IFSOCK: self = .socket
        case S_IFCHR: self = .characterDevice
        case S_IFBLK: self = .blockDevice
        default: self = .unknown
        }
    }
}
