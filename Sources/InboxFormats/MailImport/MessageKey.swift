import AppContainer
import Glibc
import InboxKit

/// A message's key in the import index (ARCHITECTURE.md, "Mail import"): the SHA-256 of its bytes without what
/// transport and filters add, so a redelivery is a duplicate. Left out: every top-level header field that
/// `KeyFilter` names a trace field, with its folded lines; one `>` of an mbox entry's quoted `From ` lines
/// (mboxrd); the `\r` of each `\r\n`. The range handed over starts after any `From ` envelope line.
///
/// Reads through `pread` a buffer at a time, so memory stays flat whatever the lengths of the lines: a line
/// longer than the buffer is read twice, once to decide and once to hash. Not thread-safe, like its digest.
final class MessageKey {
    private static let capacity = 256 * 1024
    /// The bytes of a long line kept to decide on it: more than the longest trace name.
    private static let headLength = 64

    private let digest: SHA256Digest
    private let buffer: UnsafeMutableRawBufferPointer
    private let reread: UnsafeMutableRawBufferPointer

    // The message being read: the file, the file offset of `buffer[high]`, where the message ends, the bytes of
    // the buffer not yet taken (`low..<high`), and those taken to be hashed but not hashed yet (`spanStart..<spanEnd`).
    private var fd: CInt = -1
    private var offset: Int64 = 0
    private var end: Int64 = 0
    private var low = 0
    private var high = 0
    private var spanStart = 0
    private var spanEnd = 0
    private var shown = ""

    /// Keys made with `digest`, which must not be in use meanwhile.
    init(digest: SHA256Digest) {
        self.digest = digest
        buffer = .allocate(byteCount: Self.capacity, alignment: 16)
        reread = .allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit {
        buffer.deallocate()
        reread.deallocate()
    }

    /// The key of the message in `fd` from `start` to `end`. `mboxEntry`: a `>From ` line loses one `>`.
    /// `shown` names the source in messages.
    func key(of fd: CInt, from start: Int64, to end: Int64, mboxEntry: Bool, shown: String) throws(ContainerError)
        -> [UInt8]
    {
        self.fd = fd
        self.end = end
        self.shown = shown
        offset = start
        (low, high, spanStart, spanEnd) = (0, 0, 0, 0)
        var filter = KeyFilter(unquoting: mboxEntry)
        try digest.begin()
        while true {
            if let newline = find(0x0A, in: low..<high) {
                try takeLine(low..<newline, newline: true, &filter)
                low = newline + 1
            } else if offset >= self.end {
                if low < high { try takeLine(low..<high, newline: false, &filter) }
                low = high
                break
            } else if low == 0 && high == Self.capacity {
                try takeLongLine(&filter)
            } else {
                try fill()
            }
        }
        try flush()
        return try digest.finish()
    }

    /// A line that lies whole in the buffer (`range`, without its `\n`).
    private func takeLine(_ range: Range<Int>, newline: Bool, _ filter: inout KeyFilter) throws(ContainerError) {
        var content = range
        if newline, let last = content.last, buffer[last] == 0x0D { content = content.dropLast() }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[content])
        let colon = filter.inHeader ? find(UInt8(ascii: ":"), in: content).map { $0 - content.lowerBound } : nil
        var quoted = QuotedFrom()
        if filter.unquoting { quoted.feed(bytes) }
        guard filter.counts(head: bytes, colon: colon, isEmpty: content.isEmpty) else { return }
        try emit((content.lowerBound + (quoted.isQuoted ? 1 : 0))..<content.upperBound)
        if newline { try emit(range.upperBound..<(range.upperBound + 1)) }
    }

    /// A line longer than the buffer, which starts at `buffer[0]`: read to its end to decide on it, then hashed
    /// from the file if it counts.
    private func takeLongLine(_ filter: inout KeyFilter) throws(ContainerError) {
        try flush()
        let lineStart = offset - Int64(high)
        let head = [UInt8](UnsafeRawBufferPointer(rebasing: buffer[..<Self.headLength]))
        var colon: Int?
        var quoted = QuotedFrom()
        var length = 0
        var lastByte: UInt8 = 0
        var newline = false
        while true {
            let stop = find(0x0A, in: 0..<high)
            let chunk = 0..<(stop ?? high)
            if colon == nil, let found = find(UInt8(ascii: ":"), in: chunk) { colon = length + found }
            if filter.unquoting { quoted.feed(UnsafeRawBufferPointer(rebasing: buffer[chunk])) }
            if let last = chunk.last { lastByte = buffer[last] }
            length += chunk.count
            low = chunk.upperBound
            if let stop {
                low = stop + 1
                newline = true
                break
            }
            try fill()
            if high == 0 { break }
        }
        let counts = head.withUnsafeBytes { filter.counts(head: $0, colon: colon, isEmpty: false) }
        guard counts else { return }
        let contentEnd = lineStart + Int64(length - (newline && lastByte == 0x0D ? 1 : 0))
        try hashFromFile(from: lineStart + (quoted.isQuoted ? 1 : 0), to: contentEnd)
        if newline {
            reread[0] = 0x0A
            try update(UnsafeRawBufferPointer(rebasing: reread[..<1]))
        }
    }

    private func hashFromFile(from start: Int64, to stop: Int64) throws(ContainerError) {
        var position = start
        while position < stop {
            let wanted = Int(min(Int64(reread.count), stop - position))
            let count: Int
            do {
                count = try system_pread(
                    fd, into: UnsafeMutableRawBufferPointer(rebasing: reread[..<wanted]), at: position)
            } catch {
                throw error.failure("read", shown)
            }
            guard count > 0 else { throw ContainerError(.ioError, "cannot read '\(shown)': it got shorter") }
            try update(UnsafeRawBufferPointer(rebasing: reread[..<count]))
            position += Int64(count)
        }
    }

    /// Takes `range` of the buffer to be hashed, joined to the bytes taken before when it follows them.
    private func emit(_ range: Range<Int>) throws(ContainerError) {
        guard !range.isEmpty else { return }
        if spanStart == spanEnd {
            (spanStart, spanEnd) = (range.lowerBound, range.upperBound)
        } else if range.lowerBound == spanEnd {
            spanEnd = range.upperBound
        } else {
            try flush()
            (spanStart, spanEnd) = (range.lowerBound, range.upperBound)
        }
    }

    private func flush() throws(ContainerError) {
        if spanEnd > spanStart { try update(UnsafeRawBufferPointer(rebasing: buffer[spanStart..<spanEnd])) }
        (spanStart, spanEnd) = (0, 0)
    }

    private func update(_ bytes: UnsafeRawBufferPointer) throws(ContainerError) {
        try digest.update(bytes)
    }

    /// Moves the bytes not taken to the front of the buffer and reads more after them, up to the message's end.
    private func fill() throws(ContainerError) {
        try flush()
        if low > 0, let base = buffer.baseAddress {
            if high > low { memmove(base, base + low, high - low) }
            high -= low
            low = 0
        }
        let wanted = Int(min(Int64(Self.capacity - high), max(end - offset, 0)))
        guard wanted > 0 else { return }
        let count: Int
        do {
            count = try system_pread(
                fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[high..<(high + wanted)]), at: offset)
        } catch {
            throw error.failure("read", shown)
        }
        if count == 0 { end = offset }
        high += count
        offset += Int64(count)
    }

    private func find(_ byte: UInt8, in range: Range<Int>) -> Int? {
        guard !range.isEmpty, let base = buffer.baseAddress,
            let found = memchr(base + range.lowerBound, CInt(byte), range.count)
        else { return nil }
        return base.distance(to: UnsafeMutableRawPointer(found))
    }
}

/// Which lines of a message count toward its key: not the top-level header's trace fields (named as in
/// `traceNames`, or starting with one of `tracePrefixes`, case-insensitively) nor their folded lines. A field's
/// name is the text before its line's first `:`; a line starting with a space or tab continues the field before
/// it; the header ends at the first empty line.
struct KeyFilter {
    /// Lowercased.
    static let traceNames: [[UInt8]] = [
        "return-path", "received", "delivered-to", "x-original-to", "envelope-to", "x-envelope-from",
        "x-envelope-to", "received-spf", "authentication-results", "arc-seal", "arc-message-signature",
        "arc-authentication-results", "x-received", "x-google-smtp-source", "x-tuid", "x-offlineimap",
    ].map { Array($0.utf8) }
    /// Lowercased.
    static let tracePrefixes: [[UInt8]] = ["x-spam-", "x-virus-", "x-rspamd-", "x-amavis-"].map { Array($0.utf8) }

    /// Whether `>From ` lines lose one `>` (an mbox entry).
    let unquoting: Bool
    private(set) var inHeader = true
    private var dropping = false

    init(unquoting: Bool) {
        self.unquoting = unquoting
    }

    /// Whether the next line counts. `head`: its first bytes without the line end (all of them, or at least 64);
    /// `colon`: the offset of its first `:`; `isEmpty`: nothing but the line end.
    mutating func counts(head: UnsafeRawBufferPointer, colon: Int?, isEmpty: Bool) -> Bool {
        guard inHeader else { return true }
        if isEmpty {
            inHeader = false
            return true
        }
        if let first = head.first, first == 0x20 || first == 0x09 { return !dropping }
        dropping = colon.map { Self.isTraceName(head, length: $0) } ?? false
        return !dropping
    }

    /// Whether the name of `length` bytes that `head` starts with is a trace field's.
    static func isTraceName(_ head: UnsafeRawBufferPointer, length: Int) -> Bool {
        func starts(with name: [UInt8]) -> Bool {
            head.count >= name.count && zip(head, name).allSatisfy { MimeParameters.lowercased($0) == $1 }
        }
        return tracePrefixes.contains { length >= $0.count && starts(with: $0) }
            || traceNames.contains { length == $0.count && starts(with: $0) }
    }
}

/// Whether a line is a `From ` line quoted with one or more `>` (mboxrd), fed its bytes in order.
struct QuotedFrom {
    private static let from = Array("From ".utf8)
    private var quotes = 0
    private var matched = 0
    private var decided: Bool?

    var isQuoted: Bool { decided == true }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            guard decided == nil else { return }
            if matched == 0 && byte == UInt8(ascii: ">") {
                quotes += 1
            } else if quotes > 0 && byte == Self.from[matched] {
                matched += 1
                if matched == Self.from.count { decided = true }
            } else {
                decided = false
            }
        }
    }
}
