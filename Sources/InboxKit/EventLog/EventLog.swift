import AppContainer
import Glibc
import Synchronization

/// The event log of ARCHITECTURE.md, "The event log": JSON Lines in `<directory>/events.jsonl`.
///
/// Appends from any thread or process take an exclusive `flock` on `events.lock` (a file that rotation never
/// replaces), give each record the next `seq`, and write a whole batch with one `write(2)` in append mode.
/// When the log grows past `maxBytes` it is renamed to `events.<last seq, 20 digits>.jsonl`; the newest
/// `keepRotated` of those are kept.
public final class EventLog: Sendable {
    /// The folder that holds the log and its lock.
    public let directory: String
    /// The size past which `events.jsonl` is rotated, checked after each append.
    public let maxBytes: Int
    /// How many rotated files are kept; older ones are deleted.
    public let keepRotated: Int
    /// The log's folder, open for the `*at` calls; closed in `deinit`.
    let folder: CInt
    private let writer = Mutex(Writer())

    static let logName = "events.jsonl"
    static let lockName = "events.lock"

    /// Opens the log in `directory`, which must exist; the files are created on the first append.
    public init(directory: some CStringConvertible, maxBytes: Int = 16 << 20, keepRotated: Int = 20)
        throws(ContainerError)
    {
        let exact = directory.pathBytes
        self.directory = String(decoding: exact, as: UTF8.self)
        self.maxBytes = max(1, maxBytes)
        self.keepRotated = max(0, keepRotated)
        do {
            folder = try FileDescriptor(exact, [.directory]).release()
        } catch {
            throw error.failure("open the event log folder", exact)
        }
    }

    /// The log of a container, in its state folder.
    public convenience init(container: Container) throws(ContainerError) {
        try self.init(directory: container.stateDirectoryBytes)
    }

    deinit {
        try? system_close(folder)
    }

    var logPath: String { directory + "/" + Self.logName }
    var lockPath: String { directory + "/" + Self.lockName }

    /// Appends `events` as one write, in order, and returns the seq given to each.
    /// With `durable`, the log file is fsynced before this returns.
    @discardableResult
    public func append(_ events: [Event], durable: Bool = false) throws(ContainerError) -> [UInt64] {
        guard !events.isEmpty else { return [] }
        let first = try append(EncodedEvents(events), durable: durable)
        return (0..<UInt64(events.count)).map { first + $0 }
    }

    /// Appends one event and returns its seq.
    @discardableResult
    public func append(_ event: Event, durable: Bool = false) throws(ContainerError) -> UInt64 {
        try append(EncodedEvents([event]), durable: durable)
    }

    /// The seq of the last record appended so far by anyone (0 for an empty log): what a record appended next
    /// will follow.
    public func lastSeq() throws(ContainerError) -> UInt64 {
        try writer.withLock { writer throws(ContainerError) -> UInt64 in
            let lock = try openLock(&writer)
            do throws(Errno) {
                try system_flock(lock, LOCK_EX)
            } catch {
                throw error.failure("lock the event log", lockPath)
            }
            defer { try? system_flock(lock, LOCK_UN) }
            _ = try prepareLog(&writer)
            return writer.lastSeq
        }
    }

    /// Appends a non-empty batch of records, encoded but for `seq` and `time` before taking the locks;
    /// returns the first seq.
    /// With `durable`, the fsync comes after the locks are let go (`finishSync`): an append meanwhile, from this
    /// process or another, never waits for it.
    func append(_ records: EncodedEvents, durable: Bool) throws(ContainerError) -> UInt64 {
        precondition(!records.isEmpty, "an empty batch has no seq")
        let (first, pending) = try writer.withLock { writer throws(ContainerError) -> (UInt64, PendingSync?) in
            let lock = try takeFileLock(&writer)
            defer { try? system_flock(lock, LOCK_UN) }
            let first = try writeRecords(records.bytes, ends: records.ends, durable: false, &writer)
            return (first, durable ? writer.pendingSync : nil)
        }
        if let pending { try finishSync(pending) }
        return first
    }

    /// Holds the log's locks while `body` runs and while the records it returns are appended, so that no other
    /// append, from this process or another, comes between what `body` did and those records; if they cannot
    /// be appended, `undo` runs, still under the locks. Neither may append itself (it would wait for ever).
    @discardableResult
    func appendWhileLocked(_ body: () throws(ContainerError) -> [Event], undo: () -> Void) throws(ContainerError)
        -> [UInt64]
    {
        try writer.withLock { writer throws(ContainerError) -> [UInt64] in
            let lock = try takeFileLock(&writer)
            defer { try? system_flock(lock, LOCK_UN) }
            let events = try body()
            guard !events.isEmpty else { return [] }
            let records = EncodedEvents(events)
            do throws(ContainerError) {
                let first = try writeRecords(records.bytes, ends: records.ends, durable: false, &writer)
                return (0..<UInt64(events.count)).map { first + $0 }
            } catch {
                undo()
                throw error
            }
        }
    }

    /// Makes the next seq follow `floor` when the log's own last seq is lower (the log was truncated, replaced or
    /// set aside since `floor` was read from it), and logs an `error` record saying so: seq never goes back, so a
    /// watcher's checkpoint never hides records written after it.
    func continueSeq(after floor: UInt64, because reason: String) throws(ContainerError) {
        guard floor <= Self.maxSeq else { return }
        try writer.withLock { writer throws(ContainerError) in
            let lock = try takeFileLock(&writer)
            defer { try? system_flock(lock, LOCK_UN) }
            _ = try prepareLog(&writer)
            guard writer.lastSeq < floor else { return }
            let record = EncodedEvents([
                Event(
                    .error,
                    [
                        "during": .string("open the event log"),
                        "message": .string("\(reason): its last seq was \(writer.lastSeq), it goes on after \(floor)"),
                    ])
            ])
            writer.lastSeq = floor
            _ = try writeRecords(record.bytes, ends: record.ends, durable: true, &writer)
        }
    }

    /// Takes the exclusive `flock` on `events.lock`; returns the descriptor to unlock.
    private func takeFileLock(_ writer: inout Writer) throws(ContainerError) -> CInt {
        let lock = try openLock(&writer)
        do {
            try system_flock(lock, LOCK_EX)
        } catch {
            throw error.failure("lock the event log", lockPath)
        }
        return lock
    }

    /// Under the locks: gives the records their seqs and time and writes them in one `write(2)`.
    private func writeRecords(_ bodies: [UInt8], ends: [Int], durable: Bool, _ writer: inout Writer)
        throws(ContainerError) -> UInt64
    {
        let log = try prepareLog(&writer)
        var time: [UInt8] = []
        EventEncoding.appendTimestamp(.now(), to: &time)
        var buffer: [UInt8] = []
        buffer.reserveCapacity(bodies.count + ends.count * 64)
        var seq = writer.lastSeq
        if let notice = writer.notice {
            seq += 1
            EventEncoding.appendHead(seq: seq, time: time, to: &buffer)
            buffer.append(contentsOf: notice.bytes)
        }
        let first = seq + 1
        var start = 0
        for (index, end) in ends.enumerated() {
            EventEncoding.appendHead(seq: first + UInt64(index), time: time, to: &buffer)
            buffer.append(contentsOf: bodies[start..<end])
            start = end
        }
        do {
            try writeAll(log, buffer)
        } catch {
            // Part of the batch may be on disk: the next append repairs the tail before writing.
            writer.trusted = false
            throw error.failure("append to the event log", logPath)
        }
        writer.lastSeq = first + UInt64(ends.count) - 1
        writer.size += Int64(buffer.count)
        writer.notice = nil
        writer.written += 1
        if durable { try sync(log, &writer) }
        if writer.size > Int64(maxBytes) { rotate(&writer) }
        return first
    }

    /// Makes durable what this instance appended with `durable: false` (one fsync of the log file), if anything:
    /// the watcher's `moved` records wait for the next batch's fsync, or for this (ARCHITECTURE.md, "The hot
    /// path").
    package func sync() throws(ContainerError) {
        guard let pending = writer.withLock({ $0.pendingSync }) else { return }
        try finishSync(pending)
    }

    /// The fsync of what this instance wrote up to `pending.through`, outside the locks; an append or a rotation
    /// meanwhile is no matter: a rotation fsyncs the file before it lets go of it, and the descriptor stays open
    /// while `pending` holds it.
    private func finishSync(_ pending: PendingSync) throws(ContainerError) {
        try fsync(pending.file.rawValue, folderToo: pending.newFile)
        writer.withLock { writer in
            writer.synced = max(writer.synced, pending.through)
            if pending.newFile, writer.log === pending.file { writer.folderSynced = true }
        }
    }

    /// Whether this instance appended records that are not yet durable.
    var hasUnsynced: Bool { writer.withLock { $0.unsynced } }

    private func sync(_ log: CInt, _ writer: inout Writer) throws(ContainerError) {
        try fsync(log, folderToo: !writer.folderSynced)
        writer.folderSynced = true
        writer.synced = writer.written
    }

    /// fsyncs the log file `log` and, with `folderToo` (a file new to this instance: its name may not be on disk
    /// yet), the folder.
    private func fsync(_ log: CInt, folderToo: Bool) throws(ContainerError) {
        do {
            try system_fsync(log)
        } catch {
            throw error.failure("sync the event log", logPath)
        }
        guard folderToo else { return }
        do {
            try system_fsync(folder)
        } catch {
            throw error.failure("sync the event log folder", directory)
        }
    }

    private func openLock(_ writer: inout Writer) throws(ContainerError) -> CInt {
        if let lock = writer.lock?.rawValue { return lock }
        do {
            let lock = try FileDescriptor(at: folder, Self.lockName, [.readWrite, .create, .noFollow], mode: 0o644)
            let fd = lock.rawValue
            writer.lock = consume lock
            return fd
        } catch {
            throw error.failure("open the event log lock", lockPath)
        }
    }

    /// Under the lock: opens `events.jsonl` (created if missing, reopened after a rotation) and, when the file
    /// is new to this instance or changed since its last append, repairs a torn tail and finds the last seq.
    private func prepareLog(_ writer: inout Writer) throws(ContainerError) -> CInt {
        let named: FileStatus?
        do {
            named = try fileStatus(in: folder, Self.logName)
        } catch .noSuchFile {
            named = nil
        } catch {
            throw error.failure("open the event log", logPath)
        }
        let log: CInt
        let size: Int64
        if let open = writer.log?.rawValue, let named, named.inode == writer.inode {
            // The name still holds the file open: its status is that file's, size included.
            log = open
            size = named.size
        } else {
            // What this instance wrote to the file it lets go of is made durable first.
            if writer.unsynced, let open = writer.log?.rawValue { try sync(open, &writer) }
            writer.log = nil
            writer.trusted = false
            writer.folderSynced = false
            guard let file = try openLogFile(inode: &writer.inode) else {
                try setAside(&writer, because: "it is not a regular file")
                return try prepareLog(&writer)
            }
            log = file.rawValue
            writer.log = SharedDescriptor(file)
            do {
                size = try FileStatus(system_fstat(log)).size
            } catch {
                throw error.failure("read the event log", logPath)
            }
        }
        if !writer.trusted || size != writer.size {
            let tail = try readTail(log, size: size)
            if let last = tail.lastSeq, last > Self.maxSeq {
                try setAside(&writer, because: "its last record's seq \(last) is past any real count")
                return try prepareLog(&writer)
            }
            writer.size = tail.end
            // An empty log continues from the newest rotated file; seq never goes back within this instance.
            var last = tail.lastSeq
            if last == nil { last = try rotatedFiles().last(where: { $0.lastSeq <= Self.maxSeq })?.lastSeq }
            writer.lastSeq = max(writer.lastSeq, last ?? 0)
            writer.trusted = true
        }
        return log
    }

    /// Opens `events.jsonl` for appending, creating it if missing, and reports its inode; nil when the name
    /// holds something else (a symbolic link, a folder, a FIFO).
    private func openLogFile(inode: inout UInt64) throws(ContainerError) -> FileDescriptor? {
        do {
            let file = try FileDescriptor(
                at: folder, Self.logName, [.readWrite, .append, .create, .noFollow, .nonBlocking], mode: 0o644)
            let status = try file.fileStatus()
            guard status.kind == .regular else { return nil }
            inode = status.inode
            return file
        } catch .tooManySymbolicLinks, .isDirectory, .notDirectory {
            return nil
        } catch {
            throw error.failure("open the event log", logPath)
        }
    }

    /// The highest seq a log may hold: past it (2^53, the largest whole number every JSON reader keeps exact)
    /// a record can only be crafted or damaged, and counting on would overflow.
    static let maxSeq: UInt64 = 1 << 53

    /// Under the lock: renames a damaged `events.jsonl` aside (`events.jsonl.damaged-<time>`, which no reader
    /// reads) and notes the `error` record that opens the new one. The next start of a watcher makes its seq
    /// follow the checkpoint's again (`continueSeq`).
    private func setAside(_ writer: inout Writer, because reason: String) throws(ContainerError) {
        let stamp = FileName("\(Self.logName).damaged-\(Timestamp.now().seconds)").unsafelyUnwrapped
        let aside: FileName
        do {
            aside = try ClashNaming.inbox.firstFree(for: stamp) { candidate throws(Errno) in
                try system_renameat2(folder, Self.logName, folder, candidate, .noReplace)
            }
            try system_fsync(folder)
        } catch {
            throw error.failure("set aside the damaged event log", logPath)
        }
        writer.log = nil
        writer.trusted = false
        writer.size = 0
        writer.notice = EncodedEvents([
            Event(
                .error,
                [
                    "during": .string("open the event log"), "path": .string(aside.string),
                    "message": .string("the event log was set aside as '\(aside)': \(reason)"),
                ])
        ])
    }

    /// Cuts a last line that has no newline (a write torn by a crash) and finds the seq of the last
    /// complete record, reading backwards from the end in growing windows.
    private func readTail(_ log: CInt, size: Int64) throws(ContainerError) -> (end: Int64, lastSeq: UInt64?) {
        let newline = UInt8(ascii: "\n")
        var end = size
        var window: Int64 = 64 << 10
        var repaired = false
        while true {
            let start = max(0, end - window)
            var bytes: [UInt8]
            do {
                bytes = try readRange(log, from: start, count: Int(end - start))
            } catch {
                throw error.failure("read the event log", logPath)
            }
            if !repaired, let last = bytes.last, last != newline {
                if let cut = bytes.lastIndex(of: newline) {
                    bytes.removeSubrange((cut + 1)...)
                } else if start > 0 {
                    window *= 2
                    continue
                } else {
                    bytes = []
                }
                end = start + Int64(bytes.count)
                do {
                    try system_ftruncate(log, end)
                } catch {
                    throw error.failure("repair the torn last line of the event log", logPath)
                }
            }
            repaired = true
            // `bytes` is empty or ends in a newline. Walk its lines from the last; the first line of the
            // window is whole only when the window starts the file.
            var lineEnd = bytes.count - 1
            while lineEnd >= 0 {
                let lineStart: Int
                if let previous = bytes[..<lineEnd].lastIndex(of: newline) {
                    lineStart = previous + 1
                } else if start == 0 {
                    lineStart = 0
                } else {
                    break
                }
                if let seq = Self.seq(ofLine: bytes[lineStart..<lineEnd]) { return (end, seq) }
                lineEnd = lineStart - 1
            }
            if start == 0 { return (end, nil) }
            window *= 2
        }
    }

    /// Renames the full log to `events.<lastSeq>.jsonl` and deletes the oldest rotated files beyond
    /// `keepRotated`. The records are already written, so a failure here is not reported: the log stays
    /// as it is and the next append tries again.
    private func rotate(_ writer: inout Writer) {
        do {
            // Set aside durable: no later fsync of the log reaches the file under its new name.
            if writer.unsynced, let log = writer.log?.rawValue { try sync(log, &writer) }
            try system_renameat2(folder, Self.logName, folder, Self.rotatedName(writer.lastSeq), .noReplace)
        } catch {
            return
        }
        writer.log = nil
        writer.trusted = false
        guard let rotated = try? rotatedFiles() else { return }
        for old in rotated.dropLast(keepRotated) {
            try? system_unlinkat(folder, old.name)
        }
    }
}

/// What an instance knows of the log, guarded by its mutex.
private struct Writer: ~Copyable {
    var lock: FileDescriptor?
    /// Shared: a `PendingSync` keeps it open outside the locks.
    var log: SharedDescriptor?
    /// The inode of `log`, to notice a rotation by another instance.
    var inode: UInt64 = 0
    /// The size of `log` after this instance's last append.
    var size: Int64 = 0
    /// The last seq written, by anyone, as far as this instance knows.
    var lastSeq: UInt64 = 0
    /// Whether `size` and `lastSeq` were read under the lock and only this instance has written since.
    var trusted = false
    /// Whether the folder was fsynced since `log` was opened, so that its name is durable too.
    var folderSynced = false
    /// How many writes this instance made, and how many of them an fsync made durable since.
    var written: UInt64 = 0
    var synced: UInt64 = 0
    /// A record to write before the next ones: why the log before this one was set aside.
    var notice: EncodedEvents?

    /// Whether records this instance wrote to `log` wait for an fsync.
    var unsynced: Bool { written > synced }

    /// The fsync that makes every write so far durable, to do outside the locks; nil when none waits.
    var pendingSync: PendingSync? {
        guard unsynced, let log else { return nil }
        return PendingSync(file: log, through: written, newFile: !folderSynced)
    }
}

/// An fsync of the log file to do outside the locks: the file, the writes it makes durable, and whether the folder
/// is fsynced too (the file is new to this instance: its name may not be on disk yet).
private struct PendingSync: @unchecked Sendable {
    let file: SharedDescriptor
    let through: UInt64
    let newFile: Bool
}

// MARK: - Files

extension EventLog {
    /// `events.00000000000000000042.jsonl`
    static func rotatedName(_ lastSeq: UInt64) -> String {
        let digits = String(lastSeq)
        return "events." + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".jsonl"
    }

    /// The last seq in a rotated file's name, or nil for any other name.
    static func rotatedSeq(_ name: FileName) -> UInt64? {
        let bytes = name.bytes
        let prefix = Array("events.".utf8)
        let suffix = Array(".jsonl".utf8)
        guard bytes.count == prefix.count + 20 + suffix.count, bytes.starts(with: prefix),
            bytes.suffix(suffix.count).elementsEqual(suffix)
        else { return nil }
        let digits = bytes[prefix.count..<(prefix.count + 20)]
        guard digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return UInt64(String(decoding: digits, as: UTF8.self))
    }

    /// The rotated files, oldest first.
    func rotatedFiles() throws(ContainerError) -> [(lastSeq: UInt64, name: String)] {
        let names: [FileName]
        do {
            names = try FileDescriptor(at: folder, ".", [.directory]).entries()
        } catch {
            throw error.failure("list the event log folder", directory)
        }
        return names.compactMap { name in Self.rotatedSeq(name).map { ($0, name.string) } }.sorted { $0.0 < $1.0 }
    }

    /// The seq of a line: read from this log's own layout, else from the parsed JSON; nil for a broken line.
    static func seq(ofLine line: ArraySlice<UInt8>) -> UInt64? {
        EventEncoding.leadingSeq(line) ?? parseRecord(line)?.seq
    }
}

/// Reads `count` bytes at `offset`, fewer at the end of the file.
func readRange(_ fd: CInt, from offset: Int64, count: Int) throws(Errno) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    var filled = 0
    while filled < count {
        let read = try bytes.withUnsafeMutableBytes { buffer in
            Result(catching: { () throws(Errno) in
                try system_pread(
                    fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), at: offset + Int64(filled))
            })
        }.get()
        if read == 0 { break }
        filled += read
    }
    bytes.removeSubrange(filled...)
    return bytes
}

/// Writes all of `bytes`, continuing after a short write.
private func writeAll(_ fd: CInt, _ bytes: [UInt8]) throws(Errno) {
    try bytes.withUnsafeBytes { buffer in
        Result(catching: { () throws(Errno) in
            var offset = 0
            while offset < buffer.count {
                offset += try system_write(fd, UnsafeRawBufferPointer(rebasing: buffer[offset...]))
            }
        })
    }.get()
}
