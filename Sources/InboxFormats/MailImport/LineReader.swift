import AppContainer
import Glibc
import InboxKit

/// One line of a message as `LineReader` hands it over: its first bytes, without the `\n`.
struct ScannedLine {
    /// The line's bytes; one longer than `LineReader.headLimit` may be cut to its first `headLimit` bytes (it is
    /// when it is not in the buffer at once).
    let head: UnsafeRawBufferPointer
    /// Whether bytes were left off `head`.
    let truncated: Bool
    /// For a truncated line: whether the bytes left off are all spaces, tabs or `\r`.
    let restIsWhitespace: Bool
    /// The bytes the line takes in the file, its `\n` included.
    let length: Int
}

/// Reads a byte range of a file a line at a time through `pread`, in constant memory whatever the lengths of
/// its lines (ARCHITECTURE.md, "Mail import").
final class LineReader {
    /// The most bytes of one line handed over; the rest of a longer line is skipped.
    static let headLimit = 16 * 1024
    /// The most bytes read at once; a shorter range gets a buffer of its size (but room for two heads at least).
    private static let capacity = 256 * 1024

    private let fd: CInt
    private var offset: Int64
    private let end: Int64?
    private let buffer: UnsafeMutableRawBufferPointer
    /// Where a long line's head is copied, made for the first.
    private var longHead: UnsafeMutableRawBufferPointer?
    private var low = 0
    private var high = 0
    private var atEnd = false

    /// Lines of `fd` from `start` to `end` (nil: to the end of the file).
    init(fd: CInt, start: Int64, end: Int64?) {
        self.fd = fd
        offset = start
        self.end = end
        let size = end.map {
            Int(Swift.min(Int64(Self.capacity), Swift.max(Int64(2 * Self.headLimit), $0 - start + 1)))
        }
        buffer = .allocate(byteCount: size ?? Self.capacity, alignment: 16)
    }

    deinit {
        buffer.deallocate()
        longHead?.deallocate()
    }

    /// Calls `body` with each line in order; stops early when `body` returns false.
    func forEachLine(_ body: (ScannedLine) throws(MailError) -> Bool) throws(MailError) {
        while true {
            if let newline = findNewline() {
                let head = UnsafeRawBufferPointer(rebasing: buffer[low..<newline])
                let line = ScannedLine(head: head, truncated: false, restIsWhitespace: true, length: newline - low + 1)
                low = newline + 1
                guard try body(line) else { return }
                continue
            }
            if high - low >= Self.headLimit {
                guard try body(try longLine()) else { return }
                continue
            }
            if atEnd {
                if low < high {
                    let head = UnsafeRawBufferPointer(rebasing: buffer[low..<high])
                    let line = ScannedLine(head: head, truncated: false, restIsWhitespace: true, length: high - low)
                    low = high
                    _ = try body(line)
                }
                return
            }
            try fill()
        }
    }

    private func findNewline() -> Int? {
        guard low < high, let base = buffer.baseAddress else { return nil }
        guard let found = memchr(base + low, 0x0A, high - low) else { return nil }
        return base.distance(to: UnsafeMutableRawPointer(found))
    }

    /// A line longer than `headLimit`: its head is copied aside and the rest skipped up to its `\n`.
    private func longLine() throws(MailError) -> ScannedLine {
        let longHead = self.longHead ?? .allocate(byteCount: Self.headLimit, alignment: 16)
        self.longHead = longHead
        longHead.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[low..<(low + Self.headLimit)]))
        var length = Self.headLimit
        low += Self.headLimit
        var restIsWhitespace = true
        while true {
            let stop = findNewline() ?? high
            for index in low..<stop where !Self.isWhitespace(buffer[index]) {
                restIsWhitespace = false
                break
            }
            length += stop - low
            if stop < high {
                low = stop + 1
                length += 1
                break
            }
            low = high
            if atEnd { break }
            try fill()
        }
        return ScannedLine(
            head: UnsafeRawBufferPointer(longHead), truncated: true, restIsWhitespace: restIsWhitespace,
            length: length)
    }

    /// Moves what is left to the front of the buffer and reads more after it.
    private func fill() throws(MailError) {
        if low > 0 {
            let left = high - low
            if left > 0, let base = buffer.baseAddress { memmove(base, base + low, left) }
            high = left
            low = 0
        }
        var want = buffer.count - high
        if let end { want = Int(Swift.min(Int64(want), Swift.max(end - offset, 0))) }
        guard want > 0 else {
            atEnd = true
            return
        }
        let count: Int
        do {
            count = try system_pread(
                fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[high..<(high + want)]), at: offset)
        } catch {
            throw .io(error.failure("read", "the message"))
        }
        if count == 0 { atEnd = true }
        high += count
        offset += Int64(count)
    }

    static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D }
}
