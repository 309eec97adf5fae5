import AppContainer
import Glibc
import InboxKit

/// One message of a source: where its bytes lie in an open file, and its key (ARCHITECTURE.md, "Mail import").
struct SourceMessage {
    let file: SharedDescriptor
    let offset: Int64
    let length: Int64
    /// The SHA-256 of the message's bytes.
    let key: [UInt8]
    /// The source as given (absolute), or `-`.
    let source: String
}

/// Where messages come from: a message file, an mbox, a Maildir folder (read only), or standard input.
enum MailSource {
    case message(String)
    case mbox(String)
    case maildir(String)
    case standardInput

    /// What `argument` names: `-` is standard input, a folder with `cur` and `new` a Maildir, a file that starts
    /// with `From ` an mbox, any other file one message. A source that does not exist is exit status 66.
    static func named(_ argument: String) throws(ContainerError) -> MailSource {
        guard argument != "-" else { return .standardInput }
        let path = argument.hasPrefix("/") ? argument : currentWorkingDirectory() + "/" + argument
        // Followed if a link: the source is the user's to name.
        let file = try open(path, shown: argument)
        let status: FileStatus
        do {
            status = try file.fileStatus()
        } catch {
            throw error.failure("read", argument)
        }
        switch status.kind {
        case .directory:
            let isMaildir = ["cur", "new"].allSatisfy {
                (try? fileStatus(in: file.rawValue, FileName($0).unsafelyUnwrapped))?.kind == .directory
            }
            guard isMaildir else {
                throw ContainerError(
                    .badData, "cannot import '\(argument)': a folder, but not a Maildir (no cur/ and new/)")
            }
            return .maildir(path)
        case .regular:
            var start = [UInt8](repeating: 0, count: 5)
            let count: Int
            do throws(Errno) {
                count = try preadChunk(file.rawValue, into: &start, at: 0)
            } catch {
                throw error.failure("read", argument)
            }
            return count == 5 && start == Array("From ".utf8) ? .mbox(path) : .message(path)
        default:
            throw ContainerError(.badData, "cannot import '\(argument)': not a file, an mbox or a Maildir")
        }
    }

    /// The source as the `imported` record names it.
    var shown: String {
        switch self {
        case .message(let path), .mbox(let path), .maildir(let path): path
        case .standardInput: "-"
        }
    }

    /// Calls `body` with each message in order, one at a time, so memory stays flat however large the source.
    func forEachMessage(_ body: (SourceMessage) throws(ContainerError) -> Void) throws(ContainerError) {
        let digest = try SHA256Digest()
        switch self {
        case .message(let path):
            let file = SharedDescriptor(try Self.open(path, shown: path))
            try body(try Self.message(file, from: 0, to: nil, source: path, digest: digest))
        case .mbox(let path):
            let file = SharedDescriptor(try Self.open(path, shown: path))
            try MboxReader(file: file.rawValue, shown: path).forEachEntry { start, end throws(ContainerError) in
                try body(try Self.message(file, from: start, to: end, source: path, digest: digest))
            }
        case .maildir(let path):
            for folder in ["new", "cur"] {
                for name in try Self.maildirEntries(path + "/" + folder) {
                    let file = SharedDescriptor(try Self.open(path + "/" + folder + "/" + name.string, shown: path))
                    try body(try Self.message(file, from: 0, to: nil, source: path, digest: digest))
                }
            }
        case .standardInput:
            let (file, start) = try TemporaryCopy.standardInput()
            try body(try Self.message(file, from: start, to: nil, source: "-", digest: digest))
        }
    }

    /// The message in `file` from `start` to `end` (the end of the file when nil), with its key.
    private static func message(
        _ file: SharedDescriptor, from start: Int64, to end: Int64?, source: String, digest: SHA256Digest
    ) throws(ContainerError) -> SourceMessage {
        var stop: Int64 = end ?? 0
        do throws(Errno) {
            if end == nil { stop = try file.descriptor.fileStatus().size }
        } catch {
            throw error.failure("read", source)
        }
        let key = try digest.hash(file.rawValue, from: start, to: stop, shown: source)
        return SourceMessage(file: file, offset: start, length: stop - start, key: key, source: source)
    }

    /// The message files of a Maildir folder, sorted by name; hidden names are not messages.
    private static func maildirEntries(_ path: String) throws(ContainerError) -> [FileName] {
        do {
            let folder = try FileDescriptor(path, [.directory])
            return try folder.entries().filter { !$0.isHidden }.sorted()
        } catch {
            throw error.failure("read", path)
        }
    }

    private static func open(_ path: String, shown: String) throws(ContainerError) -> FileDescriptor {
        do {
            return try FileDescriptor(path, [.readOnly])
        } catch {
            throw error.failure("read", shown)
        }
    }

    private static func currentWorkingDirectory() -> String {
        guard let cwd = getcwd(nil, 0) else { return "." }
        defer { free(cwd) }
        return String(cString: cwd)
    }
}
