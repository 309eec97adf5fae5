import AppContainer
import Glibc
import InboxKit

/// One message of a source: where its bytes lie in an open file, and its key (ARCHITECTURE.md, "Mail import").
struct SourceMessage {
    let file: SharedDescriptor
    let offset: Int64
    let length: Int64
    /// The message's key (`MessageKey`).
    let key: [UInt8]
    /// The source as given (absolute), or `-`, byte for byte.
    let sourcePath: [UInt8]

    /// `sourcePath` as text (U+FFFD for bytes that are not UTF-8), as a record's `source` holds it.
    var source: String { String(decoding: sourcePath, as: UTF8.self) }
}

/// Where messages come from: a message file, an mbox, a Maildir folder (read only), or standard input. A file
/// source is open from the start, so it is read once: a FIFO or pipe is copied into an unnamed file first.
enum MailSource {
    case message(SharedDescriptor, path: [UInt8])
    case mbox(SharedDescriptor, path: [UInt8])
    case maildir(SharedDescriptor, path: [UInt8])
    case standardInput

    /// What `argument` names: `-` is standard input, a folder with `cur` and `new` a Maildir, a file (or the
    /// copy of a FIFO) that starts with `From ` an mbox, any other file one message. A source that does not
    /// exist is exit status 66.
    static func named(_ argument: [UInt8]) throws(ContainerError) -> MailSource {
        guard argument != [UInt8(ascii: "-")] else { return .standardInput }
        let shown = Self.shown(argument)
        var path = argument
        if argument.first != UInt8(ascii: "/") {
            do {
                path = try system_getcwd() + [0x2F] + argument
            } catch {
                throw error.failure("read the working folder to find", shown)
            }
        }
        // Followed if a link: the source is the user's to name.
        let file = try open(shown: argument) { () throws(Errno) in try FileDescriptor(path, [.readOnly]) }
        let status: FileStatus
        do {
            status = try file.fileStatus()
        } catch {
            throw error.failure("read", shown)
        }
        switch status.kind {
        case .directory:
            let isMaildir = ["cur", "new"].allSatisfy {
                (try? fileStatus(in: file.rawValue, FileName($0).unsafelyUnwrapped))?.kind == .directory
            }
            guard isMaildir else {
                throw ContainerError(
                    .badData, "cannot import '\(shown)': a folder, but not a Maildir (no cur/ and new/)")
            }
            return .maildir(SharedDescriptor(file), path: path)
        case .regular:
            return try typed(SharedDescriptor(file), path: path, shown: shown)
        case .fifo:
            return try typed(try TemporaryCopy.of(file, shown: shown), path: path, shown: shown)
        default:
            throw ContainerError(.badData, "cannot import '\(shown)': not a file, an mbox, a Maildir or a pipe")
        }
    }

    /// An mbox when `file` starts with `From `, else one message.
    private static func typed(_ file: SharedDescriptor, path: [UInt8], shown: String) throws(ContainerError)
        -> MailSource
    {
        let mbox: Bool
        do throws(Errno) {
            mbox = try startsWithEnvelope(file.rawValue)
        } catch {
            throw error.failure("read", shown)
        }
        return mbox ? .mbox(file, path: path) : .message(file, path: path)
    }

    /// The source as records name it: its absolute path, or `-`.
    var path: [UInt8] {
        switch self {
        case .message(_, let path), .mbox(_, let path), .maildir(_, let path): path
        case .standardInput: Array("-".utf8)
        }
    }

    /// `path` as messages show it: control characters and bytes that are not UTF-8 escaped.
    static func shown(_ path: [UInt8]) -> String { String(decoding: TerminalText.escaped(path), as: UTF8.self) }

    /// Calls `body` with each message in order, one at a time, so memory stays flat however large the source;
    /// `skipped` with one line for each Maildir entry that is not a regular file, left unopened; `progress` after
    /// each message of an mbox or entry of a Maildir.
    func forEachMessage(
        skipped: (String) -> Void = { _ in }, progress: (ImportProgress) -> Void = { _ in },
        _ body: (SourceMessage) throws(ContainerError) -> Void
    ) throws(ContainerError) {
        let keys = MessageKey(digest: try SHA256Digest())
        let shown = Self.shown(path)
        switch self {
        case .message(let file, let path):
            try body(try Self.message(file, from: 0, to: nil, mboxEntry: false, path: path, keys: keys))
        case .mbox(let file, let path):
            let size: Int64
            do {
                size = try file.descriptor.fileStatus().size
            } catch {
                throw error.failure("read", shown)
            }
            try MboxReader(file: file.rawValue, shown: shown).forEachEntry { start, end throws(ContainerError) in
                try body(try Self.message(file, from: start, to: end, mboxEntry: true, path: path, keys: keys))
                progress(ImportProgress(done: end, of: size, unit: .bytes))
            }
        case .maildir(let maildir, let path):
            // Both folders listed first, so that progress knows the count.
            var folders: [(folder: SharedDescriptor, path: [UInt8], entries: [FileName])] = []
            for name in ["new", "cur"] {
                let folderPath = path + Array("/\(name)".utf8)
                let folder = SharedDescriptor(
                    try Self.open(shown: folderPath) { () throws(Errno) in
                        try FileDescriptor(folder: name, at: maildir.rawValue)
                    })
                do throws(Errno) {
                    folders.append(
                        (folder, folderPath, try folder.descriptor.entries().filter { !$0.isHidden }.sorted()))
                } catch {
                    throw error.failure("read", Self.shown(folderPath))
                }
            }
            let total = Int64(folders.reduce(0) { $0 + $1.entries.count })
            var done: Int64 = 0
            for (folder, folderPath, entries) in folders {
                for entry in entries {
                    done += 1
                    defer { progress(ImportProgress(done: done, of: total, unit: .entries)) }
                    let entryPath = folderPath + [0x2F] + entry.bytes
                    guard let file = try Self.openEntry(entry, in: folder.rawValue, path: entryPath, skipped: skipped)
                    else { continue }
                    try body(try Self.message(file, from: 0, to: nil, mboxEntry: false, path: path, keys: keys))
                }
            }
        case .standardInput:
            let (file, start) = try TemporaryCopy.standardInput()
            try body(try Self.message(file, from: start, to: nil, mboxEntry: false, path: path, keys: keys))
        }
    }

    /// The message in `file` from `start` to `end` (the end of the file when nil), with its key.
    static func message(
        _ file: SharedDescriptor, from start: Int64, to end: Int64?, mboxEntry: Bool, path: [UInt8], keys: MessageKey
    ) throws(ContainerError) -> SourceMessage {
        var stop: Int64 = end ?? 0
        do throws(Errno) {
            if end == nil { stop = try file.descriptor.fileStatus().size }
        } catch {
            throw error.failure("read", shown(path))
        }
        let key = try keys.key(of: file.rawValue, from: start, to: stop, mboxEntry: mboxEntry, shown: shown(path))
        return SourceMessage(file: file, offset: start, length: stop - start, key: key, sourcePath: path)
    }

    /// The Maildir entry `name` of `folder` open for reading, or nil when it is not a regular file (a FIFO, a
    /// socket, a device, a folder, any symbolic link) or is gone: then `skipped` is told, and it is not opened, or
    /// opened without following a link and without waiting for a writer, and closed.
    private static func openEntry(
        _ name: FileName, in folder: CInt, path: [UInt8], skipped: (String) -> Void
    ) throws(ContainerError) -> SharedDescriptor? {
        func skip(_ why: String) -> SharedDescriptor? {
            skipped("skipped '\(shown(path))': \(why)")
            return nil
        }
        do {
            guard let status = try fileStatusIfPresent(in: folder, name) else { return skip("gone before it was read") }
            guard status.kind == .regular else { return skip(Self.notAMessage(status.kind)) }
            let file = try FileDescriptor(at: folder, name, [.readOnly, .noFollow, .nonBlocking])
            let kind = try file.fileStatus().kind
            guard kind == .regular else { return skip(Self.notAMessage(kind)) }
            return SharedDescriptor(file)
        } catch .tooManySymbolicLinks {
            return skip(Self.notAMessage(.symbolicLink))
        } catch .noSuchFile {
            return skip("gone before it was read")
        } catch {
            throw error.failure("read", shown(path))
        }
    }

    /// What `opening` opens, its failure an error about `shown`.
    private static func open(shown: [UInt8], _ opening: () throws(Errno) -> FileDescriptor) throws(ContainerError)
        -> FileDescriptor
    {
        do {
            return try opening()
        } catch {
            throw error.failure("read", Self.shown(shown))
        }
    }

    private static func notAMessage(_ kind: FileKind) -> String {
        let what: String
        switch kind {
        case .directory: what = "a folder"
        case .symbolicLink: what = "a symbolic link"
        case .fifo: what = "a FIFO"
        case .socket: what = "a socket"
        case .characterDevice, .blockDevice: what = "a device"
        case .regular, .unknown: what = "not a regular file"
        }
        return what + ", not a message file"
    }
}
