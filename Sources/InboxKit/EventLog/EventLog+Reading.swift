import AppContainer
import FoundationEssentials
import Glibc

extension EventLog {
    /// All records, oldest first, across rotated files: those with seq > `since`, and only kinds in `kinds`
    /// when it is not empty. Lines that are not valid records are skipped.
    public func records(since: UInt64 = 0, kinds: Set<EventKind> = []) throws(ContainerError) -> [EventRecord] {
        var reader = LogReader(log: self, cursor: since, kinds: kinds)
        var records: [EventRecord] = []
        _ = try reader.poll { record in
            records.append(record)
            return true
        }
        return records
    }

    /// Calls `body` for each existing matching record, oldest first, across rotated files, in constant memory, until
    /// it returns false.
    package func forEachRecord(since: UInt64 = 0, kinds: Set<EventKind> = [], _ body: (EventRecord) -> Bool)
        throws(ContainerError)
    {
        var reader = LogReader(log: self, cursor: since, kinds: kinds)
        _ = try reader.poll(body)
    }

    /// Calls `body` for each existing matching record, then for each new one as it is appended (polling the
    /// file every ~100 ms, following rotation without losing or repeating a record), until `body` returns
    /// false or `shouldStop()` is true.
    public func follow(
        since: UInt64 = 0, kinds: Set<EventKind> = [], shouldStop: () -> Bool = { false },
        _ body: (EventRecord) -> Bool
    ) throws(ContainerError) {
        var reader = LogReader(log: self, cursor: since, kinds: kinds)
        while !shouldStop() {
            switch try reader.poll(body) {
            case .stopped: return
            case .progressed: continue
            case .idle: Self.pause(milliseconds: 100)
            }
        }
    }

    private static func pause(milliseconds: Int) {
        var interval = timespec(tv_sec: 0, tv_nsec: milliseconds * 1_000_000)
        nanosleep(&interval, nil)
    }

    /// One decoder for every line read (it keeps no state between calls).
    static let jsonDecoder = JSONDecoder()

    /// A line as a record: a JSON object with a non-negative integer `seq`, and `time` and `event` strings.
    static func parseRecord(_ line: ArraySlice<UInt8>) -> EventRecord? {
        guard
            let object = JSONValue.flatObject(line)
                ?? (try? jsonDecoder.decode([String: JSONValue].self, from: Data(line)))
        else { return nil }
        guard case .string(let time) = object["time"], case .string(let event) = object["event"] else { return nil }
        let seq: UInt64
        switch object["seq"] {
        case .integer(let value) where value >= 0: seq = UInt64(value)
        case .unsigned(let value): seq = value
        default: return nil
        }
        return EventRecord(
            seq: seq, time: time, event: event, line: String(decoding: line, as: UTF8.self),
            fields: object.mapValues(\.text))
    }
}

/// Reads the log in seq order across rotations: rotated files past the cursor, then the live file from an
/// offset that only grows, until that file is rotated away.
private struct LogReader: ~Copyable {
    enum Outcome { case stopped, progressed, idle }

    let log: EventLog
    /// The seq of the last record read, matching or not: nothing at or below it is delivered again.
    var cursor: UInt64
    /// Which seqs of the file being read are valid (`SeqChain`); a record whose seq is not is skipped.
    var chain = SeqChain(after: 0)
    let kinds: Set<EventKind>
    /// The live `events.jsonl` being read, nil before the first poll and after it is rotated away.
    var current: FileDescriptor?
    var currentInode: UInt64 = 0
    /// Just past the last complete line read from `current`.
    var offset: Int64 = 0

    init(log: EventLog, cursor: UInt64, kinds: Set<EventKind>) {
        self.log = log
        self.cursor = cursor
        self.kinds = kinds
    }

    /// Reads what is new: catches up first when no live file is open, and notices a rotation when the
    /// live file has nothing new.
    mutating func poll(_ body: (EventRecord) -> Bool) throws(ContainerError) -> Outcome {
        if current?.rawValue == nil {
            guard try catchUp(body) else { return .stopped }
        }
        guard let fd = current?.rawValue else { return .idle }
        let before = offset
        guard try readCurrent(fd, body) else { return .stopped }
        if offset != before { return .progressed }
        guard try isRotatedAway() else { return .idle }
        // Rotation happens under the lock after the last write to this file, so reading it to its end now
        // gets all of it (even if it is pruned before the catch-up, which then skips it by name).
        guard try readCurrent(fd, body) else { return .stopped }
        current = nil
        return .progressed
    }

    /// Opens the live file, then reads every rotated file past the cursor. Opening the live file first
    /// means a rotation in between can only repeat records (skipped by seq), never hide any.
    private mutating func catchUp(_ body: (EventRecord) -> Bool) throws(ContainerError) -> Bool {
        offset = 0
        do {
            let file = try FileDescriptor(at: log.folder, EventLog.logName, [.readOnly, .noFollow])
            currentInode = try file.fileStatus().inode
            current = consume file
        } catch .noSuchFile {
            current = nil
        } catch {
            throw error.failure("read the event log", log.logPath)
        }
        let rotation = try log.rotatedChain()
        for rotated in rotation.files where rotated.lastSeq > cursor {
            let path = log.directory + "/" + rotated.name
            let file: FileDescriptor
            do {
                file = try FileDescriptor(at: log.folder, rotated.name, [.readOnly, .noFollow])
            } catch .noSuchFile {
                continue  // deleted as one of the oldest since the listing
            } catch {
                throw error.failure("read the event log", path)
            }
            chain = SeqChain(after: rotated.after)
            let read = try readLines(file.rawValue, from: 0, path: path) { line in deliver(line, body) }
            if read.stopped { return false }
        }
        chain = SeqChain(after: rotation.live)
        return true
    }

    /// Reads the live file's complete lines past `offset`; false when `body` asked to stop.
    private mutating func readCurrent(_ fd: CInt, _ body: (EventRecord) -> Bool) throws(ContainerError) -> Bool {
        let read = try readLines(fd, from: offset, path: log.logPath) { line in deliver(line, body) }
        offset = read.offset
        return !read.stopped
    }

    /// Whether `events.jsonl` no longer names the file being read.
    private func isRotatedAway() throws(ContainerError) -> Bool {
        do {
            return try fileStatus(in: log.folder, EventLog.logName).inode != currentInode
        } catch .noSuchFile {
            return true
        } catch {
            throw error.failure("read the event log", log.logPath)
        }
    }

    /// Passes a line's record to `body` when its seq is valid, past the cursor, and of a wanted kind; false to stop.
    private mutating func deliver(_ line: ArraySlice<UInt8>, _ body: (EventRecord) -> Bool) -> Bool {
        guard let seq = EventLog.seq(ofLine: line), chain.accept(seq), seq > cursor,
            let record = EventLog.parseRecord(line)
        else { return true }
        cursor = seq
        guard kinds.isEmpty || record.kind.map(kinds.contains) == true else { return true }
        return body(record)
    }
}

/// Calls `line` with each complete line of `fd` from `offset` to its end, without the newline; returns the
/// offset just past the last line passed, whether `line` asked to stop, and the file's size when it began.
func readLines(
    _ fd: CInt, from offset: Int64, path: String, _ line: (ArraySlice<UInt8>) -> Bool
) throws(ContainerError) -> (offset: Int64, stopped: Bool, size: Int64) {
    let newline = UInt8(ascii: "\n")
    var consumed = offset
    var position = offset
    var pending: [UInt8] = []
    let size: Int64
    do {
        size = try FileStatus(system_fstat(fd)).size
    } catch {
        throw error.failure("read the event log", path)
    }
    // What is appended after the `fstat` is read on the next call.
    while position < size {
        let chunk: [UInt8]
        do {
            chunk = try readRange(fd, from: position, count: Int(min(size - position, 1 << 20)))
        } catch {
            throw error.failure("read the event log", path)
        }
        if chunk.isEmpty { break }
        position += Int64(chunk.count)
        pending.append(contentsOf: chunk)
        var start = pending.startIndex
        while let end = pending[start...].firstIndex(of: newline) {
            let text = pending[start..<end]
            start = end + 1
            consumed += Int64(text.count + 1)
            if !text.isEmpty && !line(text) { return (consumed, true, size) }
        }
        pending.removeSubrange(..<start)
    }
    return (consumed, false, size)
}

extension EventRecord {
    /// The record's top-level keys in the order its line holds them (`fields` has no order).
    package var keysInOrder: [String] {
        let bytes = Array(line.utf8)
        var keys: [String] = []
        var depth = 0
        var expectingKey = false
        var index = 0
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                if depth == 1, expectingKey, index < bytes.count,
                    let key = Self.key(bytes[start...index])
                {
                    keys.append(key)
                    expectingKey = false
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                expectingKey = depth == 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
            case UInt8(ascii: ","):
                expectingKey = depth == 1
            default:
                break
            }
            index += 1
        }
        return keys
    }
    /// A quoted key as its text: the bytes between the quotes when nothing in them is escaped, else as JSON reads it.
    private static func key(_ quoted: ArraySlice<UInt8>) -> String? {
        let inner = quoted.dropFirst().dropLast()
        guard inner.contains(UInt8(ascii: "\\")) else { return String(decoding: inner, as: UTF8.self) }
        return try? EventLog.jsonDecoder.decode(String.self, from: Data(quoted))
    }

    /// A path field exact to the byte: from `<key>_b64` when the record has it, else the text of `key`.
    public func pathBytes(_ key: String) -> [UInt8]? {
        if let encoded = fields[key + "_b64"], let data = Data(base64Encoded: encoded) { return Array(data) }
        return fields[key].map { Array($0.utf8) }
    }
}
