import AppContainer
import Glibc
import Synchronization

/// The event log of ARCHITECTURE.md, "The event log": JSON Lines in `<directory>/events.jsonl`.
///
/// Appends from any thread or process take an exclusive `flock` on `events.lock` (a file that rotation never
/// replaces), give each record the next `seq`, and write a whole batch with one `write(2)` in append mode.
/// When the log grows past `maxBytes` it is renamed to `events.<last seq, 20 digits>.jsonl`; the newest
/// `keepRotated` of those are kept. Seq never goes back: which seqs count is `SeqChain`'s rule, and a log whose last
/// record's seq does not count is set aside, the next going on after its highest valid seq.
public final class EventLog: Sendable {
    /// The folder that holds the log and its lock.
    package let directory: String
    /// The size past which `events.jsonl` is rotated, checked after each append.
    package let maxBytes: Int
    /// How many rotated files are kept; older ones are deleted.
    package let keepRotated: Int
    /// How long an append waits for `events.lock` while another holds it: bounded for a delivery an MTA waits on
    /// (ARCHITECTURE.md, "Nothing blocks an MTA").
    package let lockWait: LockWait
    /// The log's folder, open for the `*at` calls; closed in `deinit`.
    let folder: CInt
    private let writer = Mutex(Writer())

    static let logName = "events.jsonl"
    static let lockName = "events.lock"
    /// The default of `maxBytes`, 16 MiB: the preferences' `logMaxBytes` (the man page states it).
    package static let defaultMaxBytes = Int(Preferences().logMaxBytes)
    /// The default of `keepRotated`: the preferences' `logKeepRotated`.
    package static let defaultKeepRotated = Int(Preferences().logKeepRotated)

    /// Opens the log in `directory`, which must exist; the files are created on the first append. Appends wait for
    /// `events.lock` as `lockWait` says.
    package init(
        directory: some CStringConvertible, maxBytes: Int = EventLog.defaultMaxBytes,
        keepRotated: Int = EventLog.defaultKeepRotated, lockWait: LockWait = .unbounded
    ) throws(ContainerError) {
        let exact = directory.pathBytes
        self.directory = String(decoding: exact, as: UTF8.self)
        self.maxBytes = max(1, maxBytes)
        // One rotated file at least: the next log's first seq follows the newest one's name.
        self.keepRotated = max(1, keepRotated)
        self.lockWait = lockWait
        do {
            folder = try FileDescriptor(exact, [.directory]).release()
        } catch {
            throw error.failure("open the event log folder", exact)
        }
    }

    /// The log of a container, in its state folder, rotated as its preferences say (`logMaxBytes`,
    /// `logKeepRotated`): every writer of a container's log opens it so. Fails with exit status 65 when the
    /// preferences are not valid.
    public convenience init(container: Container) throws(ContainerError) {
        try self.init(container: container, lockWait: .unbounded)
    }

    /// As `init(container:)`, its appends waiting for `events.lock` as `lockWait` says.
    package convenience init(container: Container, lockWait: LockWait) throws(ContainerError) {
        let preferences = try Preferences.load(container)
        try self.init(
            directory: container.stateDirectoryBytes, maxBytes: Int(preferences.logMaxBytes),
            keepRotated: Int(preferences.logKeepRotated), lockWait: lockWait)
    }

    /// The log of a container, for reading only: a reader never rotates it, so preferences that are not valid do
    /// not keep `inbox log` and `inbox status` from reading it.
    package convenience init(reading container: Container) throws(ContainerError) {
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
            let lock = try takeFileLock(&writer)
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
    /// watcher's checkpoint never hides records written after it. False, and nothing done, when `floor` is no seq
    /// this log could have reached (past `maxSeq`, or more than `SeqChain.maxGap` past its last seq: crafted).
    @discardableResult
    func continueSeq(after floor: UInt64, because reason: String) throws(ContainerError) -> Bool {
        guard floor < Self.maxSeq else { return false }
        return try writer.withLock { writer throws(ContainerError) -> Bool in
            let lock = try takeFileLock(&writer)
            defer { try? system_flock(lock, LOCK_UN) }
            _ = try prepareLog(&writer)
            guard writer.lastSeq < floor else { return true }
            guard floor - writer.lastSeq < SeqChain.maxGap else { return false }
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
            return true
        }
    }

    /// Takes the exclusive `flock` on `events.lock`, waiting as `lockWait` says; returns the descriptor to unlock.
    private func takeFileLock(_ writer: inout Writer) throws(ContainerError) -> CInt {
        let lock = try openLock(&writer)
        try lockWait.lockExclusive(lock, doing: "lock the event log", path: lockPath)
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
        guard seq + UInt64(ends.count) + (writer.notice == nil ? 0 : 1) <= Self.maxSeq else {
            throw ContainerError(.badData, "the event log's seq is at the end of its count (\(Self.maxSeq))")
        }
        if let notice = writer.notice {
            seq += 1
            EventEncoding.appendHead(seq: seq, time: time, to: &buffer)
            buffer.append(contentsOf: notice.bytes)
        }
        let first = seq + 1
        var start = 0
        var lastLine = 0
        for (index, end) in ends.enumerated() {
            lastLine = buffer.count
            EventEncoding.appendHead(seq: first + UInt64(index), time: time, to: &buffer)
            buffer.append(contentsOf: bodies[start..<end])
            start = end
        }
        do {
            try writeAll(buffer, to: log)
        } catch {
            // Part of the batch may be on disk: the next append repairs the tail before writing.
            writer.trusted = false
            throw error.failure("append to the event log", logPath)
        }
        writer.lastSeq = first + UInt64(ends.count) - 1
        let end = writer.size + Int64(buffer.count)
        if end - writer.markedAt > Self.markSpacing {
            leaveMark(&writer, lastLine: writer.size + Int64(lastLine), end: end)
            writer.markedAt = end
        }
        writer.size = end
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
        var named: FileStatus?
        do {
            // Fresh: a FUSE or NFS client may still give the log the one link it had before a rotation's `link`,
            // which a crash cut off from its `unlink` (ARCHITECTURE.md, "Network and FUSE filesystems").
            named = try fileStatus(in: folder, Self.logName, fresh: true)
        } catch .noSuchFile {
            named = nil
        } catch {
            throw error.failure("open the event log", logPath)
        }
        if let status = named, status.linkCount > 1, try finishInterruptedRotation() { named = nil }
        let log: CInt
        let size: Int64
        var reopened = false
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
            reopened = true
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
            // The walk starts where the chain of valid seqs is known: after what this instance read or wrote of the
            // file, else at the mark the last append left, else at the top.
            let start: (offset: Int64, after: UInt64)
            if !reopened && size >= writer.size {
                start = (writer.size, writer.lastSeq)
            } else if let mark = readMark(&writer, log: log, size: size) {
                start = mark
                writer.markedAt = mark.offset
            } else {
                start = (0, try rotatedChain().live)
                writer.markedAt = 0
            }
            var chain = SeqChain(after: start.after)
            let walk = try walk(log, from: start.offset, &chain)
            writer.lastSeq = max(writer.lastSeq, chain.last)
            if let crafted = walk.invalidLast {
                try setAside(&writer, because: "its last record's seq \(crafted) does not follow \(chain.last)")
                return try prepareLog(&writer)
            }
            writer.size = walk.end
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

    /// The highest seq a log may hold (2^53−1, the largest whole number every JSON reader keeps exact): past it a
    /// record can only be crafted or damaged.
    static let maxSeq: UInt64 = (1 << 53) - 1

    /// Under the lock: renames a damaged `events.jsonl` aside (`events.jsonl.damaged-<time>`, which no reader
    /// reads) and notes the `error` record that opens the new one, which goes on after `writer.lastSeq` (the highest
    /// valid seq the damaged log held, or any this instance knew past it).
    private func setAside(_ writer: inout Writer, because reason: String) throws(ContainerError) {
        let aside: FileName
        do throws(Errno) {
            aside = try AppContainer.setAside(
                FileName(Self.logName).unsafelyUnwrapped, in: folder, suffix: damagedSuffix())
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

    /// How far the log grows past the last mark before an append leaves a new one: what an instance new to the log
    /// reads at most (with the batches of the appends meanwhile).
    static let markSpacing: Int64 = 64 << 10

    /// Leaves in `events.lock` where the chain of valid seqs stands after an append: the log's inode, the start and
    /// end of its last line, and that line's seq. An instance new to the log reads on from there, not from the top.
    private func leaveMark(_ writer: inout Writer, lastLine: Int64, end: Int64) {
        guard let lock = writer.lock?.rawValue else { return }
        var bytes: [UInt8] = []
        for word in [writer.inode, UInt64(lastLine), UInt64(end), writer.lastSeq] {
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> shift)) }
        }
        do {
            _ = try system_pwrite(lock, bytes, at: 0)
        } catch {
            // Nothing is lost: the next instance new to the log reads it from further back.
        }
    }

    /// The mark `leaveMark` left, when it holds for `log` as it is (its file, its size, the line it names): where the
    /// walk starts and the seq it follows.
    private func readMark(_ writer: inout Writer, log: CInt, size: Int64) -> (offset: Int64, after: UInt64)? {
        guard let lock = writer.lock?.rawValue else { return nil }
        do {
            let bytes = try readRange(lock, from: 0, count: 32)
            guard bytes.count == 32 else { return nil }
            let word = { (index: Int) in
                bytes[(index * 8)..<(index * 8 + 8)].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            }
            let (inode, lastLine, end, seq) = (word(0), word(1), word(2), word(3))
            guard inode == writer.inode, lastLine < end, end <= UInt64(size), seq <= Self.maxSeq else { return nil }
            let head = try readRange(log, from: Int64(lastLine), count: Int(min(32, end - lastLine)))
            let newline = try readRange(log, from: Int64(end) - 1, count: 1)
            guard EventEncoding.leadingSeq(head) == seq, newline == [UInt8(ascii: "\n")] else { return nil }
            return (Int64(end), seq)
        } catch {
            return nil  // unreadable: the walk starts at the top
        }
    }

    /// Reads the log's lines from `offset` (the start of a line) to its end through `chain`, and cuts a last line
    /// that has no newline (a write torn by a crash); returns where the lines end, and the last record's seq when it
    /// is not valid.
    private func walk(_ log: CInt, from offset: Int64, _ chain: inout SeqChain) throws(ContainerError)
        -> (end: Int64, invalidLast: UInt64?)
    {
        var invalidLast: UInt64?
        let read = try readLines(log, from: offset, path: logPath) { line in
            if let seq = Self.seq(ofLine: line) { invalidLast = chain.accept(seq) ? nil : seq }
            return true
        }
        if read.size > read.offset {
            do {
                try system_ftruncate(log, read.offset)
            } catch {
                throw error.failure("repair the torn last line of the event log", logPath)
            }
        }
        return (read.offset, invalidLast)
    }

    /// Under the lock: a rotation made by `link` and `unlink` (ARCHITECTURE.md, "Network and FUSE filesystems") that a
    /// crash cut between the two left `events.jsonl` a second name of the newest rotated file; that name is unlinked,
    /// so that no record is written through both. True when it was.
    private func finishInterruptedRotation() throws(ContainerError) -> Bool {
        guard let newest = try rotatedFiles().last else { return false }
        do {
            guard try finishInterruptedMove(folder, Self.logName, folder, newest.name) else { return false }
            try system_fsync(folder)
        } catch {
            throw error.failure("finish the rotation of the event log", logPath)
        }
        return true
    }

    /// Renames the full log to `events.<lastSeq>.jsonl` and deletes the oldest rotated files beyond
    /// `keepRotated`. The records are already written, so a failure here is not reported: the log stays
    /// as it is and the next append tries again.
    private func rotate(_ writer: inout Writer) {
        do {
            // Set aside durable: no later fsync of the log reaches the file under its new name.
            if writer.unsynced, let log = writer.log?.rawValue { try sync(log, &writer) }
            try renameNoReplace(folder, Self.logName, folder, Self.rotatedName(writer.lastSeq))
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
    /// Where the last mark (`leaveMark`) this instance left or read stands in `log`.
    var markedAt: Int64 = 0
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

    /// The rotated files, oldest first, each with the seq its first record follows, and the seq the live file's
    /// first record follows: the names are a chain of seqs too (`SeqChain`), so a crafted name sets nothing.
    func rotatedChain() throws(ContainerError) -> (
        files: [(after: UInt64, lastSeq: UInt64, name: String)], live: UInt64
    ) {
        var chain = SeqChain(after: 0)
        let files = try rotatedFiles().map { file in
            let after = chain.last
            _ = chain.accept(file.lastSeq)
            return (after, file.lastSeq, file.name)
        }
        return (files, chain.last)
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
