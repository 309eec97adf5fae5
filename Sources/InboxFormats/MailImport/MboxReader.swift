import AppContainer
import FoundationEssentials
import Glibc
import InboxKit

/// Splits an mbox into its messages as Python's `mailbox.mbox` does: a message begins after each line that
/// starts with `From `, and ends before the next such line, without the blank line before it. Reads in chunks,
/// so memory stays flat however large the mailbox or its lines.
struct MboxReader {
    let file: CInt
    let shown: String

    /// Calls `body` with each message's start and end offsets, in order.
    func forEachEntry(_ body: (Int64, Int64) throws(ContainerError) -> Void) throws(ContainerError) {
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        var offset: Int64 = 0
        var line = Line()
        var bodyStart: Int64?
        var lastWasEmpty = false
        func take(_ line: Line, endingAt end: Int64) throws(ContainerError) {
            if line.startsWithFrom {
                if let start = bodyStart { try body(start, max(start, lastWasEmpty ? line.start - 1 : line.start)) }
                bodyStart = end
                lastWasEmpty = false
            } else {
                lastWasEmpty = line.isEmptyLine
            }
        }
        while true {
            let count: Int
            do throws(Errno) {
                count = try preadChunk(file, into: &buffer, at: offset)
            } catch {
                throw error.failure("read", shown)
            }
            if count == 0 { break }
            var index = 0
            while index < count {
                let newline = buffer[index..<count].firstIndex(of: 0x0A)
                line.extend(with: buffer[index..<(newline ?? count)])
                guard let newline else { break }
                line.length += 1
                let end = offset + Int64(newline) + 1
                try take(line, endingAt: end)
                line = Line(start: end)
                index = newline + 1
            }
            offset += Int64(count)
        }
        if line.length > 0 { try take(line, endingAt: offset) }
        if let start = bodyStart { try body(start, max(start, lastWasEmpty ? offset - 1 : offset)) }
    }

    /// What the reader keeps of one line: where it starts, its first five bytes, its length with its newline.
    private struct Line {
        var start: Int64 = 0
        var head: [UInt8] = []
        var length: Int64 = 0

        mutating func extend(with bytes: ArraySlice<UInt8>) {
            if head.count < 5 { head += bytes.prefix(5 - head.count) }
            length += Int64(bytes.count)
        }

        var startsWithFrom: Bool { head == Array("From ".utf8) }
        var isEmptyLine: Bool { length == 1 && head.isEmpty }
    }
}

/// A message copied to an unnamed temporary file (in `$TMPDIR`, else `/tmp`), so that standard input, a pipe or
/// bytes in memory can be hashed and parsed from a file like any other; and a winmail.dat, for libytnef to read.
enum TemporaryCopy {
    /// Standard input, and the offset where its message starts: a `From ` envelope line at its start is not
    /// part of the message.
    static func standardInput() throws(ContainerError) -> (SharedDescriptor, Int64) {
        let file = try make(shown: "standard input") { copy throws(Errno) in
            try copy.copyContents(from: FileDescriptor(owning: try system_dup(STDIN_FILENO)))
        }
        do {
            return (file, try envelopeLength(file.rawValue))
        } catch {
            throw error.failure("read", "standard input")
        }
    }

    /// What `file` (a FIFO or pipe) holds, read once to its end.
    static func of(_ file: borrowing FileDescriptor, shown: String) throws(ContainerError) -> SharedDescriptor {
        try make(shown: "'\(shown)'") { copy throws(Errno) in try copy.copyContents(from: file) }
    }

    /// `bytes`, in a file.
    static func of(_ bytes: UnsafeRawBufferPointer) throws(ContainerError) -> SharedDescriptor {
        try make(shown: "a message in memory") { copy throws(Errno) in try copy.writeAll(bytes) }
    }

    /// An empty file, unnamed, in `$TMPDIR` (a winmail.dat to expand, LMTP's data as it comes): gone once closed.
    static func empty(shown: String) throws(ContainerError) -> SharedDescriptor {
        try make(shown: shown) { _ throws(Errno) in }
    }

    private static func make(shown: String, _ write: (borrowing FileDescriptor) throws(Errno) -> Void)
        throws(ContainerError) -> SharedDescriptor
    {
        let folder = Container.environmentVariable("TMPDIR").flatMap { $0.isEmpty ? nil : $0 } ?? Array("/tmp".utf8)
        do throws(Errno) {
            let copy = try FileDescriptor(folder, [.readWrite, .temporaryFile], mode: 0o600)
            try write(copy)
            return SharedDescriptor(copy)
        } catch {
            throw error.failure("copy \(shown) into", folder)
        }
    }

    /// The length of the `From ` line at the start of `file` with its newline, or 0 when it has none.
    static func envelopeLength(_ file: CInt) throws(Errno) -> Int64 {
        // Most messages start otherwise: five bytes tell, not a buffer's worth of the message.
        guard try startsWithEnvelope(file) else { return 0 }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var offset: Int64 = 0
        while true {
            let count = try preadChunk(file, into: &buffer, at: offset)
            if count == 0 { return offset }
            if let newline = buffer[..<count].firstIndex(of: 0x0A) { return offset + Int64(newline) + 1 }
            offset += Int64(count)
        }
    }
}

/// Whether `file` starts with `From `: an mbox's envelope line.
func startsWithEnvelope(_ file: CInt) throws(Errno) -> Bool {
    var head = [UInt8](repeating: 0, count: 5)
    return try preadChunk(file, into: &head, at: 0) == 5 && head == Array("From ".utf8)
}

/// `pread` into the whole of `buffer`; the count read.
func preadChunk(_ file: CInt, into buffer: inout [UInt8], at offset: Int64) throws(Errno) -> Int {
    try buffer.withUnsafeMutableBytes { raw in
        Result(catching: { () throws(Errno) in try system_pread(file, into: raw, at: offset) })
    }.get()
}
