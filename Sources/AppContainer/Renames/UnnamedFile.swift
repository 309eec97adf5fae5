import Glibc

/// A new file written whole before it has its name (ARCHITECTURE.md, "Network and FUSE filesystems"): unnamed
/// (`O_TMPFILE`), or where the filesystem refuses that (FUSE: EOPNOTSUPP) under a staging name in the same folder,
/// `.inbox-unnamed.<pid>.<random>`, which its writer holds locked (`flock`) until the file is closed. `name(_:)`
/// then gives it its name without replacing anything. A staging name a crash left is removed by `removeIfAbandoned`:
/// its file is a copy whose original is still where it was, or a second name of the file named.
package struct UnnamedFile: ~Copyable {
    package let descriptor: FileDescriptor
    private let folder: CInt
    /// Where the file is written when the filesystem has no unnamed files; nil when it is unnamed.
    package let stagingName: FileName?

    /// Opens a new file in `folder` for `access` (`.writeOnly` or `.readWrite`), with permissions `mode`. The
    /// staging name, where one is needed, is `staging` (one `stagingName(_:)` made) or a fresh one.
    package init(in folder: CInt, _ access: OpenFlags, mode: mode_t, staging: FileName? = nil) throws(Errno) {
        self.folder = folder
        do {
            descriptor = try FileDescriptor(at: folder, ".", access.union(.temporaryFile), mode: mode)
            stagingName = nil
            return
        } catch .notSupported, .isDirectory, .invalidArgument {}
        let name = staging ?? Self.stagingName("\(getpid()).\(UInt64.random(in: 0...UInt64.max))")
        let file = try FileDescriptor(at: folder, name, access.union([.create, .exclusive, .noFollow]), mode: mode)
        try system_flock(file.rawValue, LOCK_EX)
        // A sweep may have taken the name before the lock was held: then the file is no longer there.
        guard try fileStatusIfPresent(in: folder, name)?.isSameFile(as: file.fileStatus()) == true else {
            throw .noSuchFile
        }
        descriptor = file
        stagingName = name
    }

    /// Gives the file `name` in its folder; EEXIST when that is taken, and nothing replaced. The unnamed file is
    /// linked (`linkat`); the staged one renamed with `renameNoReplace`, or, where the caller made `name` unique
    /// (`unique`), with a plain `rename`, which is atomic where rename flags are refused and gives the open file no
    /// second name (a FUSE client would keep the staging name as `.fuse_hidden…` while it is open).
    package func name(_ name: FileName, unique: Bool = false) throws(Errno) {
        guard let stagingName else { return try system_linkOpenFile(descriptor.rawValue, folder, name) }
        if unique {
            guard try fileStatusIfPresent(in: folder, name) == nil else { throw .fileExists }
            try system_renameat2(folder, stagingName, folder, name, [])
        } else {
            try renameNoReplace(folder, stagingName, folder, name)
        }
    }

    /// Removes the staging name of a file never named (after a failure); nothing for an unnamed one.
    package func discard() throws(Errno) {
        guard let stagingName else { return }
        do {
            try system_unlinkat(folder, stagingName)
        } catch .noSuchFile {}
    }

    /// The open file, for the caller to keep once it is named.
    package consuming func take() -> FileDescriptor {
        descriptor
    }

    private static let prefix = Array(".inbox-unnamed.".utf8)

    /// `.inbox-unnamed.<tag>`: a staging name, for a caller that must find its own after a crash (`tag` from a
    /// name it keeps, such as a claim).
    package static func stagingName(_ tag: some StringProtocol) -> FileName {
        FileName(bytes: prefix + FileName.truncated(Array(tag.utf8), toAtMost: FileName.maxLength - prefix.count))
            ?? FileName(bytes: prefix.dropLast()).unsafelyUnwrapped
    }

    /// Whether `name` is a staging name of an unnamed file.
    package static func isStagingName(_ name: FileName) -> Bool {
        name.bytes.starts(with: prefix)
    }

    /// The one sweep rule: removes the staging name `name` from `folder` when its writer is gone (its lock can be
    /// taken). True when removed; false when it is held, gone, or not a staging name of a regular file.
    @discardableResult
    package static func removeIfAbandoned(_ name: FileName, in folder: CInt) throws(Errno) -> Bool {
        guard isStagingName(name) else { return false }
        let file: FileDescriptor
        do {
            file = try FileDescriptor(at: folder, name, [.noFollow, .nonBlocking])
        } catch .noSuchFile, .tooManySymbolicLinks {
            return false  // gone, or a link: none of ours
        }
        do {
            try system_flock(file.rawValue, LOCK_EX | LOCK_NB)
        } catch .wouldBlock {
            return false
        }
        let status = try file.fileStatus()
        guard status.kind == .regular, try fileStatusIfPresent(in: folder, name)?.isSameFile(as: status) == true
        else { return false }
        do {
            try system_unlinkat(folder, name)
        } catch .noSuchFile {
            return false
        }
        return true
    }

    /// Removes every abandoned staging name among `names` (a listing of `folder`); returns those removed.
    package static func sweep(_ names: [FileName], in folder: CInt) throws(Errno) -> [FileName] {
        var removed: [FileName] = []
        for name in names where isStagingName(name) {
            if try removeIfAbandoned(name, in: folder) { removed.append(name) }
        }
        return removed
    }
}
