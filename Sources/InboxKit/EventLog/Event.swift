import AppContainer
import Glibc

/// The kinds of record in the event log (ARCHITECTURE.md, "The event log").
public enum EventKind: String, Sendable, CaseIterable {
    /// In order: a file handed over by a delivery; an arrival taken in by the watcher; something refused (a link,
    /// FIFO, socket or device removed unopened, a mail message refused whole); a handler's answer; a move into
    /// Documents; a deletion; inotify events lost (an overflow); a scan of the Inbox; a move a crash cut short, rolled
    /// back.
    case delivered, arrived, rejected, handled, moved, deleted, overflow, rescan, recovered
    /// A watcher started.
    case watchStarted = "watch-started"
    /// A watcher stopped.
    case watchStopped = "watch-stopped"
    /// In order: one-time setup done; a failure (`during`, `path`, `errno`, `message`); a mail message imported, or
    /// found imported before.
    case setup, error, imported
}

/// One field value of an event.
public enum EventValue: Sendable, Equatable {
    /// Text.
    case string(String)
    /// A path or name as raw bytes; when they are not valid UTF-8 the record also carries `<key>_b64`.
    case path([UInt8])
    /// A number.
    case int(Int64)
    /// `true` or `false`.
    case bool(Bool)
}

/// An event to append: its kind and its fields, written in the order given.
///
/// Field keys should not be `seq`, `time` or `event`, which every record already holds.
public struct Event: Sendable {
    /// The record's `event`.
    public var kind: EventKind
    /// The fields after `seq`, `time` and `event`, in order.
    public var fields: [(key: String, value: EventValue)]

    /// An event of `kind` with `fields`, written in the order given.
    public init(_ kind: EventKind, _ fields: KeyValuePairs<String, EventValue> = [:]) {
        self.kind = kind
        self.fields = fields.map { ($0.key, $0.value) }
    }
}

/// One record read back from the log.
public struct EventRecord: Sendable {
    /// The record's number in the log: one more than the record before, across rotated files.
    public let seq: UInt64
    /// RFC 3339, UTC, milliseconds.
    public let time: String
    /// The kind, as written (`watch-started`, …): a kind this version does not know too.
    public let event: String
    /// The kind, nil for one this version does not know (written by a later one).
    public let kind: EventKind?
    /// The raw JSON line, without its newline.
    public let line: String
    /// Every top-level value as text: strings as they are, numbers and booleans printed.
    public let fields: [String: String]

    /// A record of these parts, as the log's reader makes it.
    package init(seq: UInt64, time: String, event: String, line: String, fields: [String: String]) {
        self.seq = seq
        self.time = time
        self.event = event
        kind = EventKind(rawValue: event)
        self.line = line
        self.fields = fields
    }
}

/// Records for one append, encoded as they are made; the log adds `seq` and `time` under its lock. The
/// watcher's hot path writes its fields straight in, with no `Event` in between (ARCHITECTURE.md, "The hot path"):
/// `begin`, the fields in order, `end`.
struct EncodedEvents {
    /// The bodies (`,"event":…}\n`), one after another.
    private(set) var bytes: [UInt8] = []
    /// Where each body ends in `bytes`.
    private(set) var ends: [Int] = []

    init(reservingCapacity records: Int = 0) {
        bytes.reserveCapacity(records * 320)
        ends.reserveCapacity(records)
    }

    init(_ events: [Event]) {
        self.init(reservingCapacity: events.count)
        for event in events { append(event) }
    }

    var isEmpty: Bool { ends.isEmpty }
    var count: Int { ends.count }

    mutating func append(_ event: Event) {
        EventEncoding.appendBody(of: event, to: &bytes)
        ends.append(bytes.count)
    }

    /// Appends the records of `other` after these.
    mutating func append(contentsOf other: EncodedEvents) {
        let offset = bytes.count
        bytes += other.bytes
        ends += other.ends.map { $0 + offset }
    }

    mutating func begin(_ kind: EventKind) {
        EventEncoding.appendLiteral(",\"event\":", to: &bytes)
        EventEncoding.appendString(kind.rawValue, to: &bytes)
    }

    mutating func end() {
        EventEncoding.appendLiteral("}\n", to: &bytes)
        ends.append(bytes.count)
    }

    /// `,"key":` for a key that needs no escape.
    private mutating func key(_ key: StaticString) {
        EventEncoding.appendLiteral(",\"", to: &bytes)
        EventEncoding.appendLiteral(key, to: &bytes)
        EventEncoding.appendLiteral("\":", to: &bytes)
    }

    mutating func field(_ key: StaticString, _ text: String) {
        self.key(key)
        EventEncoding.appendString(text, to: &bytes)
    }

    mutating func field(_ key: StaticString, _ number: Int64) {
        self.key(key)
        EventEncoding.appendInteger(number, to: &bytes)
    }

    /// As `.string(time.rfc3339)`.
    mutating func field(_ key: StaticString, time: Timestamp) {
        self.key(key)
        EventEncoding.appendTimestamp(time, to: &bytes)
    }

    /// As `.string(identity.text)`.
    mutating func field(_ key: StaticString, identity: Identity) {
        self.key(key)
        bytes.append(UInt8(ascii: "\""))
        EventEncoding.appendInteger(identity.device, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        EventEncoding.appendInteger(identity.inode, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        EventEncoding.appendInteger(identity.size, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        EventEncoding.appendInteger(identity.modifiedSeconds, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        EventEncoding.appendInteger(identity.modifiedNanoseconds, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        EventEncoding.appendInteger(identity.born.seconds, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        EventEncoding.appendInteger(identity.born.nanoseconds, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// As `.path(path)`.
    mutating func field(_ key: StaticString, path: [UInt8]) {
        bytes.append(UInt8(ascii: ","))
        EventEncoding.appendPathMember(key.description, path, to: &bytes)
    }

    /// The one `deleted` record: the item's logged path, why, and its identity or size where known.
    mutating func appendDeleted(path: [UInt8], reason: String, identity: Identity? = nil, size: Int64? = nil) {
        begin(.deleted)
        field("path", path: path)
        field("reason", reason)
        if let identity { field("id", identity: identity) }
        if let size { field("size", size) }
        end()
    }

    /// As `.path(folder + name.bytes)`, where `folder` is valid UTF-8 that ends in `/`.
    mutating func field(_ key: StaticString, folder: [UInt8], _ name: FileName) {
        guard EventEncoding.isValidUTF8(name.bytes) else {
            bytes.append(UInt8(ascii: ","))
            EventEncoding.appendPathMember(key.description, folder + name.bytes, to: &bytes)
            return
        }
        self.key(key)
        bytes.append(UInt8(ascii: "\""))
        EventEncoding.appendUnquoted(folder, to: &bytes)
        EventEncoding.appendUnquoted(name.bytes, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }
}

// MARK: - Encoding

/// Hand-written JSON for log records: fast, and keys stay in the order given.
package enum EventEncoding {
    /// `,"event":"<kind>"` and the fields, then `}\n`: a record without its `seq` and `time`.
    static func appendBody(of event: Event, to buffer: inout [UInt8]) {
        appendLiteral(",\"event\":", to: &buffer)
        appendString(event.kind.rawValue, to: &buffer)
        for (key, value) in event.fields {
            buffer.append(UInt8(ascii: ","))
            switch value {
            case .string(let text):
                appendKey(key, to: &buffer)
                appendString(text, to: &buffer)
            case .int(let number):
                appendKey(key, to: &buffer)
                appendInteger(number, to: &buffer)
            case .bool(let flag):
                appendKey(key, to: &buffer)
                appendLiteral(flag ? "true" : "false", to: &buffer)
            case .path(let bytes):
                appendPathMember(key, bytes, to: &buffer)
            }
        }
        appendLiteral("}\n", to: &buffer)
    }

    /// `"key":`
    package static func appendKey(_ key: String, to buffer: inout [UInt8]) {
        appendString(key, to: &buffer)
        buffer.append(UInt8(ascii: ":"))
    }

    /// `"key":"<text>"` for a path, followed by `"key_b64":"<exact bytes>"` when the bytes are not valid UTF-8.
    package static func appendPathMember(_ key: String, _ bytes: [UInt8], to buffer: inout [UInt8]) {
        appendKey(key, to: &buffer)
        if isValidUTF8(bytes) {
            appendEscaped(bytes, to: &buffer)
            return
        }
        appendString(String(decoding: bytes, as: UTF8.self), to: &buffer)
        buffer.append(UInt8(ascii: ","))
        appendKey(key + "_b64", to: &buffer)
        buffer.append(UInt8(ascii: "\""))
        appendBase64(bytes, to: &buffer)
        buffer.append(UInt8(ascii: "\""))
    }

    /// `{"seq":<seq>,"time":<time>`: the start of a record; `time` is already a JSON string.
    static func appendHead(seq: UInt64, time: [UInt8], to buffer: inout [UInt8]) {
        appendLiteral("{\"seq\":", to: &buffer)
        appendInteger(seq, to: &buffer)
        appendLiteral(",\"time\":", to: &buffer)
        buffer.append(contentsOf: time)
    }

    package static func appendLiteral(_ text: StaticString, to buffer: inout [UInt8]) {
        text.withUTF8Buffer { buffer.append(contentsOf: $0) }
    }

    /// A JSON string, quoted and escaped.
    package static func appendString(_ text: String, to buffer: inout [UInt8]) {
        var text = text
        text.withUTF8 { appendEscaped($0, to: &buffer) }
    }

    /// Valid UTF-8 bytes as a quoted JSON string: `"` and `\` escaped, control characters as `\n`, `\u00XX`, ….
    static func appendEscaped(_ bytes: some Collection<UInt8>, to buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "\""))
        appendUnquoted(bytes, to: &buffer)
        buffer.append(UInt8(ascii: "\""))
    }

    /// As `appendEscaped`, without the quotes.
    static func appendUnquoted(_ bytes: some Collection<UInt8>, to buffer: inout [UInt8]) {
        let done: Void? = bytes.withContiguousStorageIfAvailable { appendUnquoted($0, to: &buffer) }
        if done == nil { Array(bytes).withUnsafeBufferPointer { appendUnquoted($0, to: &buffer) } }
    }

    /// Copies the runs that need no escape whole.
    private static func appendUnquoted(_ bytes: UnsafeBufferPointer<UInt8>, to buffer: inout [UInt8]) {
        var run = 0
        for (index, byte) in bytes.enumerated()
        where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<index]))
            run = index + 1
            switch byte {
            case UInt8(ascii: "\""): appendLiteral("\\\"", to: &buffer)
            case UInt8(ascii: "\\"): appendLiteral("\\\\", to: &buffer)
            case 0x0A: appendLiteral("\\n", to: &buffer)
            case 0x0D: appendLiteral("\\r", to: &buffer)
            case 0x09: appendLiteral("\\t", to: &buffer)
            case 0x08: appendLiteral("\\b", to: &buffer)
            case 0x0C: appendLiteral("\\f", to: &buffer)
            default:
                appendLiteral("\\u00", to: &buffer)
                buffer.append(hexDigits[Int(byte >> 4)])
                buffer.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        buffer.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
    }

    /// Whether `bytes` are valid UTF-8; plain ASCII is known without building a `String`.
    static func isValidUTF8(_ bytes: [UInt8]) -> Bool {
        bytes.allSatisfy { $0 < 0x80 } || String(validating: bytes, as: UTF8.self) != nil
    }

    static func appendInteger(_ value: Int64, to buffer: inout [UInt8]) {
        if value < 0 { buffer.append(UInt8(ascii: "-")) }
        appendInteger(value.magnitude, to: &buffer)
    }

    /// The decimal digits, written in place from the last.
    static func appendInteger(_ value: UInt64, to buffer: inout [UInt8]) {
        var length = 1
        var probe = value
        while probe >= 10 {
            probe /= 10
            length += 1
        }
        buffer.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: length))
        var rest = value
        var index = buffer.count - 1
        repeat {
            buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
            index -= 1
        } while rest > 0
    }

    /// A `Timestamp` as its `rfc3339` text, quoted, written without building a `String`.
    static func appendTimestamp(_ time: Timestamp, to buffer: inout [UInt8]) {
        var seconds = time_t(time.seconds)
        var parts = tm()
        let millis = time.nanoseconds / 1_000_000
        guard gmtime_r(&seconds, &parts) != nil, (0...9999).contains(parts.tm_year + 1900), (0..<1000).contains(millis)
        else {
            appendString(time.rfc3339, to: &buffer)
            return
        }
        func pad(_ value: Int, _ width: Int) {
            var divisor = 1
            for _ in 1..<width { divisor *= 10 }
            while divisor > 0 {
                buffer.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        buffer.append(UInt8(ascii: "\""))
        pad(Int(parts.tm_year) + 1900, 4)
        buffer.append(UInt8(ascii: "-"))
        pad(Int(parts.tm_mon) + 1, 2)
        buffer.append(UInt8(ascii: "-"))
        pad(Int(parts.tm_mday), 2)
        buffer.append(UInt8(ascii: "T"))
        pad(Int(parts.tm_hour), 2)
        buffer.append(UInt8(ascii: ":"))
        pad(Int(parts.tm_min), 2)
        buffer.append(UInt8(ascii: ":"))
        pad(Int(parts.tm_sec), 2)
        buffer.append(UInt8(ascii: "."))
        pad(Int(millis), 3)
        appendLiteral("Z\"", to: &buffer)
    }

    /// Standard base64 (RFC 4648) with `=` padding.
    static func appendBase64(_ bytes: [UInt8], to buffer: inout [UInt8]) {
        var index = 0
        while index + 3 <= bytes.count {
            let group = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { buffer.append(base64Digits[Int(group >> UInt32(shift) & 0x3F)]) }
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            let group = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            buffer.append(base64Digits[Int(group >> 18 & 0x3F)])
            buffer.append(base64Digits[Int(group >> 12 & 0x3F)])
            buffer.append(rest == 2 ? base64Digits[Int(group >> 6 & 0x3F)] : UInt8(ascii: "="))
            buffer.append(UInt8(ascii: "="))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)
    private static let base64Digits = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The `seq` at the start of a line this log wrote (`{"seq":123,`), or nil for any other line.
    static func leadingSeq(_ line: some Collection<UInt8>) -> UInt64? {
        let prefix = #"{"seq":"#.utf8
        guard line.starts(with: prefix) else { return nil }
        var value: UInt64 = 0
        var sawDigit = false
        for byte in line.dropFirst(prefix.count) {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else {
                return sawDigit && (byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}")) ? value : nil
            }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
            sawDigit = true
        }
        return nil
    }
}
