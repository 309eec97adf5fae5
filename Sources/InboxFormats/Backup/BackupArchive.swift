import AppContainer
import CArchive
import Glibc
import InboxKit

/// What `BackupArchive.write(from:)` put in the archive.
public struct BackupSummary: Sendable {
    /// The archive's absolute path, as text for messages.
    public var path: String { String(decoding: pathBytes, as: UTF8.self) }
    /// The archive's absolute path, exact to the byte.
    public let pathBytes: [UInt8]
    /// Regular files archived.
    public let files: Int
    /// Folders archived, with those that only lead to an included entry.
    public let folders: Int
    /// Symbolic links archived.
    public let links: Int
    /// The bytes of the files' contents.
    public let bytes: Int64
}

/// A tar archive of a container's backup (ARCHITECTURE.md, "Bundle, backup and setup", "Dependencies"): POSIX pax,
/// which GNU tar reads, written and read with libarchive. Paths in it are relative to the container root; names are
/// stored as their exact bytes.
public struct BackupArchive: Sendable {
    /// The archive's path, exact to the byte (ARCHITECTURE.md, "Paths are bytes").
    public let pathBytes: [UInt8]
    /// The archive's path as text, for messages.
    public var path: String { String(decoding: pathBytes, as: UTF8.self) }

    /// The archive at `path`: nothing is read or written until asked.
    public init(path: some CStringConvertible) {
        pathBytes = path.pathBytes
    }

    /// Writes exactly the plan's included entries (`BackupPlan`) and the folders that lead to them, with their
    /// modes, owners and modification times. Each file is read through a descriptor opened with O_NOFOLLOW, up
    /// to the size it had when opened; one gone or replaced by then is left out. The archive is written under a
    /// temporary name beside `path`, synced, then renamed over `path`.
    ///
    /// `path` may not lie in a place that is backed up, nor in the bundle (exit status 77): the archive would
    /// hold itself. `Library/Caches`, `tmp` and anywhere outside the container are fine.
    public func write(from container: Container) throws(ContainerError) -> BackupSummary {
        try withUTF8Names { () throws(ContainerError) in try writeArchive(from: container) }
    }

    private func writeArchive(from container: Container) throws(ContainerError) -> BackupSummary {
        let (folderPath, name, exactPath) = try destination(container)
        let shown = String(decoding: exactPath, as: UTF8.self)
        let folder = try open(shown, "open the folder of") { () throws(Errno) in
            try FileDescriptor(folderPath, [.directory])
        }
        let folderFD = folder.rawValue
        try refuseUnlessReplaceable(name, in: folderFD, shown: shown)
        Self.removePartialsOfDeadBackups(in: folderFD)
        let temporary = FileName(".inbox-backup-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).partial") ?? name
        let file = try open(shown, "create the backup") { () throws(Errno) in
            try FileDescriptor(at: folderFD, temporary, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o600)
        }
        var finished = false
        defer { if !finished { try? system_unlinkat(folderFD, temporary) } }

        // The import index as one consistent snapshot: its files copied while an import commits could be torn.
        let index = try ImportIndex.snapshot(
            of: container, in: folderPath,
            as: FileName(".inbox-backup-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).partial") ?? temporary)
        let writer = try ArchiveWriter(fd: file.rawValue, shown: shown)
        var counts = (files: 0, folders: 0, links: 0, bytes: Int64(0))
        var written: Set<[UInt8]> = []
        try BackupWalk(container: container).run { entry, parent, entryName, above throws(ContainerError) in
            guard entry.isIncluded else { return }
            for folder in above where !written.contains(folder.path) {
                try writer.header(folder.path + [0x2F], type: S_IFDIR, folder.status, folder.owner)
                written.insert(folder.path)
                counts.folders += 1
            }
            switch entry.status.kind {
            case .directory:
                try writer.header(entry.path + [0x2F], type: S_IFDIR, entry.status, entry.owner)
                written.insert(entry.path)
                counts.folders += 1
            case .symbolicLink:
                try writer.header(entry.path, type: S_IFLNK, entry.status, entry.owner, link: entry.linkTarget)
                counts.links += 1
            case .regular:
                let size =
                    if let index, BackupRules.isImportIndex(entry.path) {
                        try writer.file(entry, from: index.rawValue, shown: ImportIndex.path(container))
                    } else {
                        try writer.file(entry, in: parent, entryName, container: container)
                    }
                if let size {
                    counts.files += 1
                    counts.bytes += size
                }
            default:
                return
            }
        }
        try writer.close()
        do {
            try file.sync()
        } catch {
            throw error.failure("finish the backup", shown)
        }
        // A new name, or over a regular file only: never over a device node, a FIFO, a link or a folder.
        do {
            try renameNoReplace(folderFD, temporary, folderFD, name)
        } catch .fileExists {
            try refuseUnlessReplaceable(name, in: folderFD, shown: shown)
            do {
                try system_renameat2(folderFD, temporary, folderFD, name, [])
            } catch {
                throw error.failure("finish the backup", shown)
            }
        } catch {
            throw error.failure("finish the backup", shown)
        }
        finished = true
        do {
            try folder.sync()
        } catch {
            throw error.failure("finish the backup", shown)
        }
        return BackupSummary(
            pathBytes: exactPath, files: counts.files, folders: counts.folders, links: counts.links, bytes: counts.bytes
        )
    }

    /// Removes the `.inbox-backup-<pid>-<n>.partial` files that backups killed before their end left in
    /// `folder`: those whose process is gone. A failure leaves a partial file for the next backup to try.
    static func removePartialsOfDeadBackups(in folder: CInt) {
        guard let names = try? FileDescriptor(at: folder, ".", [.directory]).entries() else { return }
        for name in names {
            let text = name.string
            guard text.hasPrefix(".inbox-backup-"), text.hasSuffix(".partial"),
                let pid = pid_t(text.dropFirst(".inbox-backup-".count).prefix(while: \.isNumber)), pid > 0,
                kill(pid, 0) == -1, errno == ESRCH,
                (try? fileStatus(in: folder, name))?.kind == .regular
            else { continue }
            try? system_unlinkat(folder, name)
        }
    }

    /// Refuses (exit status 77) a name that holds anything but a regular file: a backup writes a new file or
    /// replaces a regular one.
    private func refuseUnlessReplaceable(_ name: FileName, in folder: CInt, shown: String) throws(ContainerError) {
        let existing: FileStatus?
        do {
            existing = try fileStatusIfPresent(in: folder, name)
        } catch {
            throw error.failure("look at", shown)
        }
        guard let existing, existing.kind != .regular else { return }
        throw ContainerError(.refused, "'\(shown)' is not a regular file: a backup replaces only a regular file")
    }

    private func open(_ shown: String, _ doing: String, _ body: () throws(Errno) -> FileDescriptor)
        throws(ContainerError) -> FileDescriptor
    {
        do {
            return try body()
        } catch {
            throw error.failure(doing, shown)
        }
    }

    /// The folder the archive goes in (resolved), its name, and its absolute path; refuses a place of the
    /// container that a backup holds.
    private func destination(_ container: Container) throws(ContainerError) -> ([UInt8], FileName, [UInt8]) {
        let bytes = pathBytes
        let slash = bytes.lastIndex(of: 0x2F)
        let folderBytes = slash.map { $0 == 0 ? [0x2F] : Array(bytes[..<$0]) } ?? [0x2E]
        guard let name = FileName(bytes: slash.map { bytes[($0 + 1)...] } ?? bytes[...]), !name.isDotOrDotDot else {
            throw ContainerError(.usage, "'\(path)' names no file to write the backup to")
        }
        let folder: [UInt8]
        do {
            folder = try system_realpath(folderBytes)
        } catch {
            throw error.failure("find the folder of", path)
        }
        let exact = (folder == [0x2F] ? [] : folder) + [0x2F] + name.bytes
        let root = container.rootBytes
        guard folder == root || folder.starts(with: root + [0x2F]) else { return (folder, name, exact) }
        let components = folder.dropFirst(root.count).split(separator: 0x2F).compactMap { FileName(bytes: $0) } + [name]
        let place = Place.containing(components, appName: container.appName)
        if let place, place != .bundle, !place.rules.isBackedUp { return (folder, name, exact) }
        let shown = String(decoding: exact, as: UTF8.self)
        throw ContainerError(
            .refused,
            "'\(shown)' is in the container where a backup would hold itself: write it outside the container or in tmp"
        )
    }
}

/// Runs `body` with this thread's character set UTF-8 (`uselocale`, for this thread alone): libarchive then
/// writes a UTF-8 name as text in the pax header, which GNU tar reads as it is, and reads one back exactly. Any
/// other name is kept as raw bytes (`hdrcharset=BINARY`, which GNU tar reads with a warning).
func withUTF8Names<R>(_ body: () throws(ContainerError) -> R) throws(ContainerError) -> R {
    guard let utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", nil) else { return try body() }
    let previous = uselocale(utf8)
    defer {
        uselocale(previous)
        freelocale(utf8)
    }
    return try body()
}

/// libarchive's pax writer on an open descriptor.
final class ArchiveWriter {
    private let lib: ArchiveFunctions
    private let archive: OpaquePointer
    private let shown: String
    private var buffer = [UInt8](repeating: 0, count: 256 * 1024)
    /// The path archived first for each file with more than one name, by (device, inode): its other names
    /// are archived as hard links to it, not as copies.
    private var firstNames: [FileID: [UInt8]] = [:]

    init(fd: CInt, shown: String) throws(ContainerError) {
        let lib = try ArchiveFunctions.loaded.get()
        self.lib = lib
        guard let archive = lib.writeNew() else {
            throw ContainerError(.failure, "cannot write the backup '\(shown)': libarchive made no writer")
        }
        self.archive = archive
        self.shown = shown
        guard lib.writeSetFormatPax(archive) == ARCHIVE_OK,
            lib.writeOpenFd(archive, fd) == ARCHIVE_OK
        else { throw failure() }
    }

    deinit {
        _ = lib.writeFree(archive)
    }

    /// One entry's header; a regular file's contents follow with `write`. `link` is a symbolic link's
    /// target, `hardlink` the path archived earlier that this one is another name of.
    func header(
        _ path: [UInt8], type: mode_t, _ status: FileStatus, _ owner: (uid: UInt32, gid: UInt32), size: Int64 = 0,
        link: [UInt8]? = nil, hardlink: [UInt8]? = nil
    ) throws(ContainerError) {
        guard let entry = lib.entryNew() else { throw failure() }
        defer { lib.entryFree(entry) }
        path.withCPath { lib.entryCopyPathname(entry, $0) }
        _ = lib.entrySetFiletype(entry, UInt32(type))
        _ = lib.entrySetPerm(entry, type == S_IFLNK ? 0o777 : status.mode & 0o7777)
        _ = lib.entrySetUid(entry, la_int64_t(owner.uid))
        _ = lib.entrySetGid(entry, la_int64_t(owner.gid))
        _ = lib.entrySetMtime(entry, time_t(status.modified.seconds), Int(status.modified.nanoseconds))
        _ = lib.entrySetSize(entry, size)
        if let link { link.withCPath { lib.entryCopySymlink(entry, $0) } }
        if let hardlink { hardlink.withCPath { lib.entryCopyHardlink(entry, $0) } }
        guard lib.writeHeader(archive, entry) >= ARCHIVE_WARN else { throw failure() }
    }

    /// A regular file: opened with O_NOFOLLOW in its folder, its header, then its contents up to the size it
    /// had when opened. Returns that size (0 for another name of a file archived before: a hard link), or nil
    /// when the file is gone or is no longer a regular file.
    func file(_ entry: BackupPlan.Entry, in folder: CInt, _ name: FileName, container: Container)
        throws(ContainerError) -> Int64?
    {
        let shownFile = container.root + "/" + String(decoding: entry.path, as: UTF8.self)
        guard let source = try openRegular(in: folder, name, shownFile) else { return nil }
        return try file(entry, from: source.rawValue, shown: shownFile)
    }

    /// Archives the regular file open at `source` as `entry`, from its start, up to the size it has now; returns
    /// that size (0 for a hard link to a file archived before), or nil when it is not a regular file.
    func file(_ entry: BackupPlan.Entry, from source: CInt, shown shownFile: String) throws(ContainerError) -> Int64? {
        let status: FileStatus
        do {
            status = FileStatus(try system_statx(source, ""))
        } catch {
            throw error.failure("read", shownFile)
        }
        guard status.kind == .regular else { return nil }
        if status.linkCount > 1 {
            let id = status.fileID
            if let first = firstNames[id] {
                try header(entry.archivedPath, type: S_IFREG, status, entry.owner, hardlink: first)
                return 0
            }
            firstNames[id] = entry.archivedPath
        }
        try header(entry.archivedPath, type: S_IFREG, status, entry.owner, size: status.size)
        var remaining = status.size
        while remaining > 0 {
            let count: Int
            do {
                count = try buffer.withUnsafeMutableBytes { raw in
                    Result(catching: { () throws(Errno) in
                        try system_pread(
                            source,
                            into: UnsafeMutableRawBufferPointer(
                                rebasing: raw[..<Int(min(remaining, Int64(raw.count)))]),
                            at: status.size - remaining)
                    })
                }.get()
            } catch {
                throw error.failure("read", shownFile)
            }
            if count == 0 { break }  // shrank since it was opened: libarchive pads the entry with zeros
            let wrote = buffer.withUnsafeBytes { lib.writeData(archive, $0.baseAddress, count) }
            guard wrote >= 0 else { throw failure() }
            remaining -= Int64(count)
        }
        return status.size
    }

    /// Opens a file to read, never following a link; nil when it is gone or was replaced by a link.
    private func openRegular(in folder: CInt, _ name: FileName, _ shown: String) throws(ContainerError)
        -> FileDescriptor?
    {
        do {
            return try FileDescriptor(at: folder, name, [.readOnly, .noFollow, .nonBlocking])
        } catch .noSuchFile, .tooManySymbolicLinks {
            return nil
        } catch {
            throw error.failure("read", shown)
        }
    }

    /// Writes the end of the archive and flushes it to the descriptor.
    func close() throws(ContainerError) {
        guard lib.writeClose(archive) == ARCHIVE_OK else { throw failure() }
    }

    /// libarchive's error, with the exit status of its errno where it has one.
    private func failure() -> ContainerError {
        let message = lib.errorString(archive).map { String(cString: $0) } ?? "libarchive failed"
        let errno = lib.errno(archive)
        let code = errno > 0 ? Errno(rawValue: errno).failure("", "").code : ContainerError.Code.ioError
        return ContainerError(
            code, "cannot write the backup '\(shown)': \(message)", cause: errno > 0 ? Errno(rawValue: errno) : nil)
    }
}
