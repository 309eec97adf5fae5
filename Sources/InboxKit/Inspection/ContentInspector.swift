import AppContainer
import CMagic
import Glibc

/// What a file holds: its SHA-256 and its content type.
package struct Inspection: Sendable, Equatable {
    /// The SHA-256 of the whole file: 64 lowercase hex digits.
    package let sha256: String
    /// A short, stable name: `pdf`, `png`, `jpeg`, `gif`, `zip`, `office`, `calendar`, `vcard`, `eml`, `csv`,
    /// `text`, `empty` or `other`.
    package let type: String
    /// The MIME type, such as `application/pdf`: from `ContentSniffer`'s rules, else libmagic's.
    package let mime: String

    /// An inspection of these parts.
    package init(sha256: String, type: String, mime: String) {
        self.sha256 = sha256
        self.type = type
        self.mime = mime
    }
}

/// Hashes files with SHA-256 and names their content type, reusing one libmagic handle, one SHA-256
/// context and one read buffer for every file (ARCHITECTURE.md, "The hot path"). `ContentSniffer` names the common
/// types; libmagic, slow on text, names the rest. Its database (8 MB, read whole into memory) is loaded the first
/// time a file's first bytes do not name the type, not before (ARCHITECTURE.md, "Start-up and memory").
///
/// Not thread-safe: every call shares those. Make one inspector per thread and keep it.
package final class ContentInspector {
    /// Bytes asked of each `pread`. The type is named from the first chunk only.
    package static let chunkSize = 256 * 1024

    /// libmagic's functions, typed by their prototypes (`shim.h`), resolved when a file's first bytes do not name
    /// its type: a watcher whose files the sniffer names never keeps libmagic mapped.
    private struct Magic {
        let open: inbox_magic_open
        let load: inbox_magic_load
        let close: inbox_magic_close
        let error: inbox_magic_error
        let buffer: inbox_magic_buffer
    }

    /// libmagic's soname: its ABI has been 1 since file 4.
    private static let magicLibrary = "libmagic.so.1"

    private static let magicFunctions = Result { () throws(ContainerError) in
        let library = try LazyLibrary(magicLibrary)
        return Magic(
            open: try library.function("magic_open", as: inbox_magic_open.self),
            load: try library.function("magic_load", as: inbox_magic_load.self),
            close: try library.function("magic_close", as: inbox_magic_close.self),
            error: try library.function("magic_error", as: inbox_magic_error.self),
            buffer: try library.function("magic_buffer", as: inbox_magic_buffer.self))
    }

    /// MIME type only; never look inside compressed data (libmagic would decompress, or fork a decompressor).
    private static let magicFlags = MAGIC_MIME_TYPE | MAGIC_NO_CHECK_COMPRESS

    private let database: String?
    /// The libmagic handle (`magic_t`) with its database loaded; nil until a file needs it.
    private var magic: OpaquePointer?
    private let digest: SHA256Digest
    private let buffer: UnsafeMutableRawBufferPointer

    /// Makes a SHA-256 context, and checks that libmagic's database can be read; it is loaded when first needed.
    /// - Parameter database: a libmagic database file; nil for libmagic's default (`$MAGIC`, else the system's).
    package init(database: String? = nil) throws(ContainerError) {
        try Self.checkReadable(database)
        self.database = database
        digest = try SHA256Digest()
        buffer = .allocate(byteCount: Self.chunkSize, alignment: 4096)
    }

    deinit {
        buffer.deallocate()
        if let magic, let functions = try? Self.magicFunctions.get() { functions.close(magic) }
    }

    /// Whether libmagic's database has been loaded: only once a file's first bytes did not name its type.
    package var hasLoadedMagic: Bool { magic != nil }

    /// Fails as loading would when no file of the database's search path (`magic_getpath`, with libmagic's `.mgc`
    /// suffix or without) can be read, so that a missing database is found at once rather than at the first file
    /// that needs it. libmagic (with liblzma, libbz2 and libz, 0.35 MiB resident) is let go after the check.
    private static func checkReadable(_ database: String?) throws(ContainerError) {
        let library = try LazyLibrary(magicLibrary)
        defer { library.close() }
        let getpath = try library.function("magic_getpath", as: inbox_magic_getpath.self)
        let paths = getpath(database, 0).map { String(cString: $0) } ?? ""
        let readable = paths.split(separator: ":").contains { path in
            access(String(path) + ".mgc", R_OK) == 0 || access(String(path), R_OK) == 0
        }
        guard !readable else { return }
        throw loadFailure(database, reason: "no readable file at '\(paths)'")
    }

    private static func loadFailure(_ database: String?, reason: String) -> ContainerError {
        let hint = database == nil ? " (is the libmagic-mgc package installed?)" : ""
        let name = database.map { " '\($0)'" } ?? ""
        return ContainerError(.failure, "cannot load the libmagic database\(name): \(reason)\(hint)")
    }

    /// The libmagic handle, opened and its database loaded on the first call.
    private func loadedMagic() throws(ContainerError) -> OpaquePointer {
        if let magic { return magic }
        let functions = try Self.magicFunctions.get()
        guard let opened = functions.open(Self.magicFlags) else {
            throw ContainerError(.failure, "cannot start libmagic: \(Errno(rawValue: errno))")
        }
        guard functions.load(opened, database) == 0 else {
            let reason = functions.error(opened).map { String(cString: $0) } ?? "unknown error"
            functions.close(opened)
            throw Self.loadFailure(database, reason: reason)
        }
        magic = opened
        return opened
    }

    /// Reads the file open at `fd` from offset 0 to its end, hashing as it goes, and names its type from
    /// the first chunk. The descriptor's own offset is neither used nor moved.
    /// - Parameter size: the size `fstat` gave, if known: a short read that ends there is taken as the end
    ///   of the file, without a last read of 0 bytes. A file that has grown is still read to its end.
    package func inspect(_ fd: CInt, size: Int64? = nil) throws(ContainerError) -> Inspection {
        try digest.begin()
        var count = try fill(fd, at: 0, size: size)
        let (type, mime) = try sniff(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        var offset = Int64(count)
        while true {
            try digest.update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            if count < buffer.count { break }
            count = try fill(fd, at: offset, size: size)
            offset += Int64(count)
        }
        let hex = try digest.finish().withUnsafeBytes(SHA256Digest.hex)
        return Inspection(sha256: hex, type: type, mime: mime)
    }

    /// Reads from `offset` until the buffer is full or the file ends; returns the bytes read.
    private func fill(_ fd: CInt, at offset: Int64, size: Int64?) throws(ContainerError) -> Int {
        var count = 0
        while count < buffer.count {
            let rest = UnsafeMutableRawBufferPointer(rebasing: buffer[count...])
            let read: Int
            do {
                read = try system_pread(fd, into: rest, at: offset + Int64(count))
            } catch {
                throw ContainerError(error, doing: "read file descriptor", path: String(fd))
            }
            if read == 0 { break }
            count += read
            // Short of a full buffer and at the known size: the end of the file.
            if count < buffer.count, offset + Int64(count) == size { break }
        }
        return count
    }

    /// The type `ContentSniffer` names for the first chunk, else the MIME type libmagic gives it and the short
    /// name for that.
    private func sniff(_ head: UnsafeRawBufferPointer) throws(ContainerError) -> (type: String, mime: String) {
        if let sniffed = ContentSniffer.sniff(head) { return (sniffed.type, sniffed.mime) }
        let magic = try loadedMagic()
        let functions = try Self.magicFunctions.get()
        guard let result = functions.buffer(magic, head.baseAddress, head.count) else {
            let reason = functions.error(magic).map { String(cString: $0) } ?? "unknown error"
            throw ContainerError(.failure, "libmagic cannot name the content type: \(reason)")
        }
        let mime = String(cString: result)
        return (Self.typeName(mime: mime, head: head), mime)
    }

}

// MARK: - Type names

extension ContentInspector {
    /// The short type name for what libmagic said of a chunk the sniffer left to it, looking at the first bytes
    /// where the MIME type is too vague: text whose first line names a calendar, a vCard or a mail header.
    private static func typeName(mime: String, head: UnsafeRawBufferPointer) -> String {
        switch mime {
        case "application/pdf": return "pdf"
        case "image/png": return "png"
        case "image/jpeg": return "jpeg"
        case "image/gif": return "gif"
        case "application/zip": return "zip"
        case "text/calendar": return "calendar"
        case "text/vcard", "text/x-vcard": return "vcard"
        case "message/rfc822": return "eml"
        case "text/csv": return "csv"
        default: break
        }
        if mime.hasPrefix("application/vnd.openxmlformats-") || mime.hasPrefix("application/vnd.oasis.opendocument.") {
            return "office"
        }
        guard mime.hasPrefix("text/") else { return "other" }
        let text = UnsafeRawBufferPointer(rebasing: head[ContentSniffer.startOfText(head)...])
        if ContentSniffer.startsIgnoringCase(text, "begin:vcalendar") { return "calendar" }
        if ContentSniffer.startsIgnoringCase(text, "begin:vcard") { return "vcard" }
        if ContentSniffer.looksLikeMail(text) { return "eml" }
        return "text"
    }
}
