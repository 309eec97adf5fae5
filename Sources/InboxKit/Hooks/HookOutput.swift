import AppContainer
import Glibc

/// What a hook prints, kept in bounded memory: the first word of its stdout and the tail of its stderr; with
/// `stderrLines`, each line of its stderr is handed on as it comes too (`watch --verbose` prints them).
struct HookOutput {
    private var firstWord = FirstWord()
    private var tail = Tail()
    private var lines: LineSplitter?

    init(stderrLines: ((String) -> Void)? = nil) {
        lines = stderrLines.map { LineSplitter(emit: $0) }
    }

    /// Hands on the last line of stderr, one without a newline: once the reading is over.
    mutating func finishLines() {
        lines?.finish()
    }

    var disposition: Disposition? { firstWord.disposition }
    /// The first word of stdout when it is not a disposition (see `HookOutcome.unknownAnswer`).
    var unknownAnswer: [UInt8]? { firstWord.disposition == nil ? firstWord.shown : nil }
    var stderrTail: String { tail.text }

    /// How reading a hook's output ended.
    enum End {
        /// Both pipes closed and the hook exited.
        case finished
        /// The hook exited, and a pipe is still held (by a process the supervisor cannot see): its word is what
        /// it printed by then.
        case exitedLeavingOthers
        /// The deadline came first.
        case timedOut
    }

    /// How long the pipes are read once the hook itself has exited, for what it wrote just before.
    static let drainAfterExit: Duration = .milliseconds(100)

    /// Reads both pipes until they have closed and `exited` (the control socket, readable once the supervisor
    /// has reported the hook's exit, or has died) has polled readable, or until `deadline`. The hook's own exit
    /// decides: once it has exited, the pipes are read for `drainAfterExit` more, not until whatever it started
    /// lets go of them. Sleeps in poll, never spins.
    mutating func collect(stdout: CInt, stderr: CInt, exited: CInt, until deadline: ContinuousClock.Instant)
        throws(Errno) -> End
    {
        var fds = [stdout, stderr, exited].map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var end = deadline
        var hasExited = false
        while fds.contains(where: { $0.fd >= 0 }) {
            let remaining = ContinuousClock.now.duration(to: end)
            if remaining <= .zero { return hasExited ? .exitedLeavingOthers : .timedOut }
            // poll ignores negative descriptors: those are done.
            if try system_poll(&fds, timeout: Self.milliseconds(remaining)) == 0 { continue }
            for index in fds.indices where fds[index].fd >= 0 && fds[index].revents != 0 {
                let fd = fds[index].fd
                if fd == exited {
                    fds[index].fd = -1
                    hasExited = true
                    end = min(end, .now + Self.drainAfterExit)
                    continue
                }
                let count = try buffer.withUnsafeMutableBytes { raw in
                    Result(catching: { () throws(Errno) in try system_read(fd, into: raw) })
                }.get()
                if count == 0 {
                    fds[index].fd = -1
                    continue
                }
                buffer.withUnsafeBytes { raw in
                    let chunk = UnsafeRawBufferPointer(rebasing: raw[..<count])
                    if fd == stdout {
                        firstWord.feed(chunk)
                    } else {
                        tail.append(chunk)
                        lines?.feed(chunk)
                    }
                }
            }
        }
        return .finished
    }

    /// `duration` in whole milliseconds, rounded up so that poll never wakes just before the deadline.
    private static func milliseconds(_ duration: Duration) -> CInt {
        let (seconds, attoseconds) = duration.components
        guard seconds < Int64(CInt.max / 1000) else { return CInt.max }
        return CInt(seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}

/// The first whitespace-separated word of a stream, fed in chunks; of a longer word, its first `limit` bytes are
/// kept, to be shown.
private struct FirstWord {
    static let limit = 32
    private enum State { case leading, inWord, done }
    private var state = State.leading
    private var word: [UInt8] = []
    private var tooLong = false

    /// The word, lowercased, when it is `keep`, `move` or `delete`.
    var disposition: Disposition? {
        let lowercased = word.map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }  // ASCII only
        return tooLong ? nil : Disposition(rawValue: String(decoding: lowercased, as: UTF8.self))
    }

    /// The word as written, `…` after one cut at `limit` bytes; nil when there was none.
    var shown: [UInt8]? {
        state == .leading ? nil : word + (tooLong ? Array("…".utf8) : [])
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            let isSpace = byte == 0x20 || (0x09...0x0D).contains(byte)
            switch state {
            case .done: return
            case .leading where isSpace: continue
            case .inWord where isSpace:
                state = .done
                return
            case .leading, .inWord:
                state = .inWord
                if word.count == Self.limit {
                    tooLong = true
                } else {
                    word.append(byte)
                }
            }
        }
    }
}

/// The last `limit` bytes of a stream, fed in chunks, in at most twice that much memory.
private struct Tail {
    static let limit = 2048
    private var bytes: [UInt8] = []
    private var cut = false

    mutating func append(_ chunk: UnsafeRawBufferPointer) {
        if chunk.count > Self.limit { cut = true }
        bytes.append(contentsOf: chunk.suffix(Self.limit))
        if bytes.count > 2 * Self.limit {
            bytes.removeFirst(bytes.count - Self.limit)
            cut = true
        }
    }

    /// The tail as text; a character cut in half at its start is dropped rather than shown as U+FFFD.
    var text: String {
        var start = max(0, bytes.count - Self.limit)
        if cut || start > 0 {  // the text starts mid-stream
            let end = min(start + 3, bytes.count)
            while start < end && bytes[start] & 0xC0 == 0x80 { start += 1 }
        }
        return String(decoding: bytes[start...], as: UTF8.self)
    }
}

/// A stream cut into lines, each handed on without its newline as it completes; a line longer than `limit` bytes
/// goes in pieces of that size, so memory stays bounded whatever a hook writes.
private struct LineSplitter {
    static let limit = 4096
    let emit: (String) -> Void
    private var pending: [UInt8] = []

    init(emit: @escaping (String) -> Void) {
        self.emit = emit
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        for byte in bytes {
            if byte == 0x0A {
                flush()
            } else {
                pending.append(byte)
                if pending.count == Self.limit { flush() }
            }
        }
    }

    mutating func finish() {
        if !pending.isEmpty { flush() }
    }

    private mutating func flush() {
        emit(String(decoding: pending, as: UTF8.self))
        pending.removeAll(keepingCapacity: true)
    }
}
