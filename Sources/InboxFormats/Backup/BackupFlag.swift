import AppContainer
import FoundationEssentials
import Glibc
import InboxKit

/// The per-item exclusion flag of ARCHITECTURE.md, "Bundle, backup and setup": the extended attribute macOS writes for
/// `URLResourceValues.isExcludedFromBackup`. Any value counts as set; this package writes the one macOS writes.
enum BackupFlag {
    static let attribute = "user.com.apple.metadata:com_apple_backup_excludeItem"

    /// The bytes macOS writes: a binary property list of the string `com.apple.backupd` (61 bytes), as
    /// Foundation's `PropertyListSerialization` writes it (a test compares the two): the header, the string (ASCII,
    /// its length 17 as a one-byte integer), the offset table, and the trailer (one-byte offsets and references, one
    /// object, the top one 0, the table at offset 28).
    static let value: [UInt8] =
        Array("bplist00".utf8) + [0x5F, 0x10, 0x11] + Array("com.apple.backupd".utf8) + [0x08]
        + [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 28]

    /// Whether the open file or folder carries the flag. A filesystem without extended attributes has none.
    static func isSet(on fd: CInt) -> Bool {
        do {
            return try system_fgetxattr(fd, attribute, maxSize: 4096) != nil
        } catch {
            return error.rawValue == ERANGE  // set, to a value longer than asked for
        }
    }

    /// Whether the regular file `name` in `folder` carries the flag; it is opened without following a link.
    static func isSet(in folder: CInt, _ name: FileName) -> Bool {
        guard let file = try? FileDescriptor(at: folder, name, [.readOnly, .noFollow, .nonBlocking]) else {
            return false
        }
        return isSet(on: file.rawValue)
    }

    /// Sets the flag to `value`, or removes it when `value` is nil (already absent is fine).
    static func change(_ fd: CInt, _ value: [UInt8]?) throws(Errno) {
        if let value {
            try system_fsetxattr(fd, attribute, value)
        } else {
            do {
                try system_fremovexattr(fd, attribute)
            } catch .noData {
                return
            }
        }
    }

    /// `change`, with the owner's write bit added for the moment and then taken away again: Linux asks for
    /// write permission to change a `user.` attribute, even of the owner, and Inbox items are mode 0444.
    /// Fails with `permissionDenied` for an item of another owner, or one whose owner may already write.
    static func changeWithOwnerWrite(_ fd: CInt, _ value: [UInt8]?) throws(Errno) {
        let status = try system_fstat(fd)
        let mode = status.st_mode & 0o7777
        guard status.st_uid == geteuid(), mode & S_IWUSR == 0 else { throw Errno.permissionDenied }
        try system_fchmod(fd, mode | S_IWUSR)
        defer { try? system_fchmod(fd, mode) }
        try change(fd, value)
    }
}

extension Container {
    /// Whether the file or folder at `components` (names below the root) carries the backup exclusion flag
    /// itself. A flag on a folder excludes everything below it; `BackupPlan` tells what a backup holds.
    ///
    /// Use this rather than Foundation's `URLResourceValues.isExcludedFromBackup`, which on Linux silently
    /// stores nothing and always reads false.
    public func isExcludedFromBackup(at components: [FileName]) throws(ContainerError) -> Bool {
        let item = try openFlaggable(components, changing: false)
        return BackupFlag.isSet(on: item.rawValue)
    }

    /// Sets or clears the backup exclusion flag: the extended attribute
    /// `user.com.apple.metadata:com_apple_backup_excludeItem` that macOS uses, on a file or folder.
    ///
    /// Symbolic links (never followed), FIFOs, sockets, devices, the bundle and the root are refused (exit
    /// status 77); a missing item is exit status 66. An item its owner made read-only (an Inbox item, mode 0444)
    /// gets the owner's write bit for the moment of the change only; its contents are never opened for writing.
    /// Foundation's `URLResourceValues.isExcludedFromBackup` silently does nothing on Linux: use this.
    public func setExcludedFromBackup(_ excluded: Bool, at components: [FileName]) throws(ContainerError) {
        let item = try openFlaggable(components, changing: true)
        let shown = displayPath(components)
        let value: [UInt8]? = excluded ? BackupFlag.value : nil
        let doing = excluded ? "exclude from backup" : "clear the backup exclusion flag of"
        do {
            do {
                try BackupFlag.change(item.rawValue, value)
            } catch .permissionDenied {
                try BackupFlag.changeWithOwnerWrite(item.rawValue, value)
            }
        } catch .notSupported {
            throw ContainerError(.failure, "cannot \(doing) '\(shown)': its filesystem keeps no extended attributes")
        } catch {
            throw error.failure(doing, shown)
        }
    }

    /// `isExcludedFromBackup(at:)` for a path in the container (a `..` or a path outside is refused).
    public func isExcludedFromBackup(_ url: URL) throws(ContainerError) -> Bool {
        try isExcludedFromBackup(at: components(ofUserPath: Self.pathBytes(url)))
    }

    /// `setExcludedFromBackup(_:at:)` for a path in the container (a `..` or a path outside is refused).
    public func setExcludedFromBackup(_ excluded: Bool, for url: URL) throws(ContainerError) {
        try setExcludedFromBackup(excluded, at: components(ofUserPath: Self.pathBytes(url)))
    }

    private static func pathBytes(_ url: URL) -> [UInt8] {
        url.withUnsafeFileSystemRepresentation { path in
            guard let path else { return [] }
            return Array(UnsafeRawBufferPointer(start: path, count: strlen(path)))
        }
    }

    private func displayPath(_ components: [FileName]) -> String {
        root + "/" + String(decoding: BackupRules.joined(components), as: UTF8.self)
    }

    /// Opens a file or folder to read or change its flag, never following a symbolic link.
    private func openFlaggable(_ components: [FileName], changing: Bool) throws(ContainerError) -> FileDescriptor {
        let shown = displayPath(components)
        guard let name = components.last else {
            throw ContainerError(.refused, "the container root cannot be flagged: flag a file or folder inside it")
        }
        if changing, Place.containing(components, appName: appName) == .bundle {
            throw ContainerError(.refused, "'\(shown)' is in the app bundle, which is sealed and never written")
        }
        let folder = try openFolder(Array(components.dropLast()))
        let kind: FileKind
        do {
            kind = try fileStatus(in: folder.rawValue, name).kind
        } catch .noSuchFile {
            throw ContainerError(.noSuchItem, "no file or folder at '\(shown)'")
        } catch {
            throw error.failure("read", shown)
        }
        let link = ContainerError(.refused, "'\(shown)' is a symbolic link, which is never followed")
        let flags: OpenFlags
        switch kind {
        case .regular: flags = [.readOnly, .noFollow, .nonBlocking]
        case .directory: flags = [.directory, .noFollow]
        case .symbolicLink: throw link
        default: throw ContainerError(.refused, "'\(shown)' is not a file or folder: only those can be flagged")
        }
        do {
            return try FileDescriptor(at: folder.rawValue, name, flags)
        } catch .tooManySymbolicLinks, .notDirectory {
            throw link  // replaced by a link since it was read
        } catch {
            throw error.failure("open", shown)
        }
    }
}
