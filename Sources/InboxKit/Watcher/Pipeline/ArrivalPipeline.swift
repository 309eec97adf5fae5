import AppContainer
import FoundationEssentials
import Glibc

/// The watcher's hot path, run on one thread: validate → seal → inspect → handle → apply, with one group
/// commit a batch. `arrived` is logged before any disposition is applied (durably before a deletion or a handler's
/// question: `syncsArrivals`), and `moved`/`deleted` after the folders are fsynced, so the log never claims what the
/// disk does not hold and a crash in between is finished at the next start (see `ArrivalPipeline+Recovery.swift`).
final class ArrivalPipeline {
    let inbox: Inbox
    var container: Container { inbox.container }
    let options: WatchOptions
    /// The library's handler, which decides every arrival; else `options.exec`, else `options.onArrival`.
    let handler: (any ArrivalHandler)?
    var inboxFolder: SharedDescriptor {
        didSet { heldFolders[0] = nil }
    }
    var documents: SharedDescriptor {
        didSet { heldFolders[1] = nil }
    }
    /// Which files `inboxFolder` and `documents` are, read once after each is opened: a batch's look for a
    /// replaced folder then reads only the paths.
    private var heldFolders: [FileID?] = [nil, nil]
    let hooks: HookRunner?
    /// Identities that have arrived and are still in the Inbox, so that none is handled twice.
    var arrived: Set<Identity> = []
    /// During a scan: the arrived identities it has seen in the Inbox, and those arriving meanwhile.
    var scanPresent: Set<Identity>?
    /// What of the log is durable when: the group commit of the batches, and where their folders are fsynced.
    let group: GroupCommit
    /// The seq of this pipeline's last record, for the checkpoint.
    var lastSeq: UInt64 {
        get { group.lastSeq }
        set { group.lastSeq = newValue }
    }
    /// The seq and body of the last checkpoint written (`saveCheckpoint`).
    var savedCheckpoint: (seq: UInt64, body: String)?
    /// Names of files some process still has open for writing (or an empty file just made): looked at again
    /// soon, in case their close came first.
    var busy = RetrySchedule<Void>(first: .milliseconds(10), limit: .seconds(1))
    /// Names whose arrival failed (they could not be opened, sealed or inspected): prepared again later.
    var failedToArrive = RetrySchedule<Void>(first: .seconds(1), limit: .seconds(300))
    /// Dispositions that failed after their `arrived` record: applied again later.
    var failed = RetrySchedule<Pending>(first: .seconds(1), limit: .seconds(300))
    /// The first failure that left an item where it was, for the exit status of `watch --once`.
    var firstFailure: ContainerError?
    /// A failure no retry mends: the filesystem refuses `link` as well as rename flags (rclone), so no move can be
    /// made in the container, and the run stops with 73 (ARCHITECTURE.md, "Network and FUSE filesystems").
    var refusal: ContainerError?
    /// The thread that prepares the next batch while this one's is applied, where that pays ("The hot path").
    private(set) var prepareAhead: SideThread<PreparedBatch>?
    /// Whether the group commit's syncer is this pipeline's own, stopped with it.
    private let ownsSyncer: Bool
    /// The items of the batch `overlap` applied last, let go (their files closed) on the `prepareAhead` thread.
    var spentItems: [Prepared] = []
    /// `Documents/Inbox/` and `Documents/`: how the log names a folder's items, the name to follow.
    let loggedInbox: [UInt8]
    let loggedDocuments: [UInt8]
    /// Whether a move may be made by `link` and `unlink` here (ARCHITECTURE.md, "Network and FUSE filesystems").
    let movesMayFallBack: Bool

    /// One file ready for its handlers: open read-only, sealed, inspected.
    final class Prepared {
        let name: FileName
        let file: SharedDescriptor
        let status: FileStatus
        let inspection: Inspection
        /// The bytes it holds: the file's size, or for a folder the sum of its files.
        let size: Int64
        let identity: Identity
        var disposition: Disposition = .keep

        init(name: FileName, file: SharedDescriptor, status: FileStatus, inspection: Inspection, size: Int64? = nil) {
            self.name = name
            self.file = file
            self.status = status
            self.inspection = inspection
            self.size = size ?? status.size
            identity = Identity(status)
        }

        var isFolder: Bool { status.kind == .directory }

        var decided: Decided { Decided(name: name, status: status, disposition: disposition, file: file) }
    }

    /// The pipeline of a watcher of `inbox`, built whole with its `threads`; `wake` wakes its thread for an answer
    /// from beside it (a poke of its queue).
    init(
        inbox: Inbox, options: WatchOptions, handler: (any ArrivalHandler)?, threads: Threads = Threads(),
        wake: @escaping @Sendable () -> Void
    ) throws(ContainerError) {
        prepareAhead = threads.prepareAhead
        ownsSyncer = threads.ownsSyncer
        self.inbox = inbox
        self.options = options
        self.handler = handler
        let container = inbox.container
        inboxFolder = SharedDescriptor(try container.openFolder(.inbox))
        // Arrivals are moved into Documents: checked once against its rules, not per file.
        try container.checkWritable(components: container.components(of: .documents))
        documents = SharedDescriptor(try container.openFolder(.documents))
        // As `Inbox.loggedPath`, without the name.
        let appName = container.appName
        loggedInbox = Array(Place.inbox.relativePath(appName: appName).utf8) + [0x2F]
        loggedDocuments = Array(Place.documents.relativePath(appName: appName).utf8) + [0x2F]
        movesMayFallBack = RenameFlagSupport.mayRefuse(documents.rawValue)
        let report = options.report
        var stderrLine: (@Sendable (FileName, String) -> Void)?
        if options.reportsHookStderr {
            stderrLine = { name, line in report?("hook for \(name.string): \(line)") }
        }
        group = GroupCommit(
            log: inbox.log, journal: MoveJournal(container: container), syncer: threads.syncer,
            settlesArrivals: options.settlesArrivals, wake: wake, report: { report?($0) })
        hooks = options.exec.map {
            HookRunner(
                command: $0, timeout: options.hookTimeout, containerRoot: container.rootBytes, stderrLine: stderrLine)
        }
    }

    /// Polls the Inbox with `poll` (a network or FUSE filesystem): the names that settled.
    func poll(_ poll: InboxPoll) throws(Errno) -> [FileName] {
        try poll.poll(inboxFolder.descriptor, arrived: arrived)
    }

    /// Whether items that arrived are kept in the Inbox.
    var keepsArrivals: Bool { !arrived.isEmpty }

    /// Whether a file some process still writes waits to be looked at again.
    var waitsForWriters: Bool { !busy.isEmpty }

    /// Lets go of the threads beside (after the answers still due from the syncer); the pipeline then works alone.
    func stopThreads() {
        prepareAhead?.stop()
        prepareAhead = nil
        group.letGoOfSyncer(stopping: ownsSyncer)
    }

    /// Says `line` where the watcher says what it is doing.
    func report(_ line: String) {
        options.report?(line)
    }

    /// Reads the whole Inbox (reopened: the folder may have been replaced) and handles it `maxBatch` names at
    /// a time as they are read, so memory stays flat however full it is; stops early when `stop` says so.
    /// `finish` is called once every name is handed in, for a batch still being prepared. A complete scan forgets
    /// identities no longer in the Inbox, logs `rescan` and saves the checkpoint.
    func scan(
        reason: String, stop: () -> Bool, handle: ([FileName]) throws(ContainerError) -> Void,
        finish: () throws(ContainerError) -> Void = {}
    ) throws(ContainerError) {
        inboxFolder = SharedDescriptor(try container.openFolder(.inbox))
        try reopenReplacedFolders()
        let folder = inboxFolder
        var chunk: [FileName] = []
        var found = 0
        var failure: ContainerError?
        var seenAll = true
        var stoppedEarly = false
        scanPresent = []
        defer { scanPresent = nil }
        do {
            try folder.descriptor.forEachEntry { name throws(Errno) in
                guard !name.isHidden else { return true }
                found += 1
                // Only kept arrivals need the look: with none (on-arrival move), a scan costs no extra stat.
                if !arrived.isEmpty {
                    do {
                        if let status = try fileStatusIfPresent(in: folder.rawValue, name),
                            arrived.contains(Identity(status))
                        {
                            scanPresent?.insert(Identity(status))
                        }
                    } catch {
                        // Unread, it may be an arrived item: this scan forgets nothing.
                        seenAll = false
                    }
                }
                chunk.append(name)
                guard chunk.count >= options.maxBatch else { return true }
                do throws(ContainerError) { try handle(chunk) } catch {
                    failure = error
                    return false
                }
                chunk.removeAll(keepingCapacity: true)
                stoppedEarly = stop()
                return !stoppedEarly
            }
        } catch {
            throw error.failure("scan", container.path(.inbox))
        }
        if let failure { throw failure }
        // Stopped between batches (not asked again: the answer may have changed), or before the last: not a whole
        // scan, which forgets nothing and logs no `rescan`.
        if stoppedEarly || stop() { return }
        if !chunk.isEmpty { try handle(chunk) }
        try finish()
        if seenAll, let present = scanPresent { arrived.formIntersection(present) }
        try commit([Event(.rescan, ["reason": .string(reason), "found": .int(Int64(found))])], durable: false)
        try saveCheckpoint()
    }

    /// Handles a batch of names; returns the arrivals for the watcher's stream (none where nothing reads them). With
    /// `syncLater`, the `moved` records wait for the next fsync of the log (`commitApplied`). With `more` (more names
    /// are on their way) and a `prepareAhead` thread, the batch is prepared there while this thread applies the one
    /// before, whose arrivals are returned (ARCHITECTURE.md, "The hot path"); `finishPrepared` applies the last.
    func process(_ names: [FileName], more: Bool = false, syncLater: Bool = false) throws(ContainerError)
        -> [Arrival]
    {
        if let prepareAhead, more || prepareAhead.isRunning {
            return try overlap(names, on: prepareAhead, syncLater: syncLater)
        }
        try reopenReplacedFolders()
        return try apply(prepareBatch(names, arrived: arrived, skipping: []), syncLater: syncLater)
    }

    /// A batch validated, sealed and inspected, waiting for its phase 1.
    struct PreparedBatch {
        var items: [Prepared] = []
        var rejections: [Event] = []
        /// Names that could not be arrived, with why: logged when the batch is applied.
        var failures: [(FileName, ContainerError)] = []
        /// Phase 1 done already, on the preparing thread: the seq of its last record, or why it failed.
        var logged: Result<UInt64, ContainerError>?
    }

    /// Prepares each name once (`prepare`), leaving alone the identities in `arrived` and the files in `skipping`.
    /// It writes no state of the pipeline's but `busy` and `failedToArrive`, which nothing else touches while a
    /// batch is prepared on the `prepareAhead` thread, and reads only what is changed between batches.
    func prepareBatch(_ names: [FileName], arrived: Set<Identity>, skipping: Set<FileID>) -> PreparedBatch {
        var batch = PreparedBatch()
        batch.items.reserveCapacity(names.count)
        var seen = Set<FileName>(minimumCapacity: names.count)
        for name in names where seen.insert(name).inserted {
            busy.remove(name)
            do {
                if let item = try prepare(name, arrived: arrived, skipping: skipping, rejections: &batch.rejections) {
                    batch.items.append(item)
                }
                failedToArrive.remove(name)
            } catch {
                batch.failures.append((name, error))
                failedToArrive.schedule(name, ())
            }
        }
        return batch
    }

    /// Decides, logs (phase 1) and applies (phase 2) a prepared batch; returns its arrivals, where something reads
    /// them (a handler, `onSettled` or the `arrivals` stream), else none.
    func apply(_ prepared: PreparedBatch, syncLater: Bool) throws(ContainerError) -> [Arrival] {
        let batch = prepared.items
        let read = handlerName != nil || options.settlesArrivals
        var arrivals: [Arrival] = []
        if read {
            arrivals = batch.map { prepared in
                Arrival(
                    item: InboxItem(inbox: inbox, name: prepared.name, status: prepared.status),
                    sha256: prepared.inspection.sha256, type: prepared.inspection.type)
            }
        }
        if let logged = prepared.logged {
            // Phase 1 was the preparing thread's (`logArrivals`).
            group.noteAppended(through: try logged.get(), durable: syncsArrivals)
        } else {
            var records = EncodedEvents(reservingCapacity: prepared.items.count)
            for (name, failure) in prepared.failures {
                fail(during: "arrive", name, failure, folder: loggedInbox, to: &records)
            }
            for rejection in prepared.rejections { records.append(rejection) }
            if let handlerName {
                try ask(handlerName, batch, arrivals: arrivals, records: &records)
            } else {
                appendArrivals(batch, to: &records)
                // Phase 1: the arrivals and their dispositions are written before anything moves.
                try commit(records, durable: syncsArrivals)
            }
        }
        // Phase 2: apply, fsync the folders once, then log what the disk now holds. Only what stays in the
        // Inbox is remembered, so memory stays flat however many pass through.
        var applied = EncodedEvents(reservingCapacity: batch.count)
        let reason = handlerName == nil ? "on-arrival" : "handler"
        for (index, prepared) in batch.enumerated() {
            let outcome = apply(prepared.decided, reason: reason, to: &applied)
            if outcome.left {
                if !arrived.isEmpty { arrived.remove(prepared.identity) }
            } else {
                arrived.insert(prepared.identity)
                scanPresent?.insert(prepared.identity)
            }
            if read { arrivals[index].settle(prepared.disposition, outcome) }
        }
        // Phase 1 written without an fsync: phase 2's makes it durable, not a later batch's.
        try commitApplied(applied, syncLater: syncLater && syncsArrivals, settling: arrivals)
        return arrivals
    }

    /// Whether phase 1 is fsynced before anything is applied: before a deletion, which would leave no trace of the
    /// file without its `arrived` record, and before a handler is asked ("Each answer once"). A move into Documents
    /// loses nothing: its `arrived` records are made durable by the fsync of its `moved` records, beside the thread
    /// that renames (ARCHITECTURE.md, "Group commit across batches"), unless it may be made by `link` and `unlink`:
    /// then the `arrived` record is what tells the next start that the Inbox name on a file in Documents is its own.
    var syncsArrivals: Bool { handlerName != nil || options.onArrival != .move || movesMayFallBack }

    /// `arrived` records, each with the disposition on arrival (no handler is asked).
    func appendArrivals(_ batch: [Prepared], to records: inout EncodedEvents) {
        for prepared in batch {
            prepared.disposition = options.onArrival
            appendArrived(prepared, to: &records)
        }
    }

    /// Retries what is due: names still being written or that failed to arrive (returned, to be processed),
    /// and failed dispositions (applied now).
    func dueRetries() throws(ContainerError) -> [FileName] {
        if !failed.isEmpty {
            try reopenReplacedFolders()
            try commitApplied(retryFailedDispositions())
        }
        return busy.due().map(\.name) + failedToArrive.due().map(\.name)
    }

    /// When the next retry is due, if any.
    var nextRetry: ContinuousClock.Instant? {
        [busy.nextDue, failed.nextDue, failedToArrive.nextDue].compactMap { $0 }.min()
    }

    /// Opens Documents and the Inbox again by path when either was replaced (deleted and made again, or
    /// renamed away), so that moves go, and the log names, the folders that are really there.
    func reopenReplacedFolders() throws(ContainerError) {
        for (index, place) in [Place.inbox, .documents].enumerated() {
            let held = place == .inbox ? inboxFolder : documents
            guard let now = try? fileStatus(in: currentDirectory, container.pathBytes(place)) else { continue }
            if heldFolders[index] == nil { heldFolders[index] = (try? held.descriptor.fileStatus())?.fileID }
            guard let then = heldFolders[index], now.fileID != then else { continue }
            let reopened = SharedDescriptor(try container.openFolder(place))
            if place == .inbox { inboxFolder = reopened } else { documents = reopened }
        }
    }

    /// `arrived` with size, sha256 (not for a folder), modified, type and identity; then the disposition when it
    /// is decided already and not keep, or the handler about to be asked.
    func appendArrived(_ prepared: Prepared, asking handler: String? = nil, to records: inout EncodedEvents) {
        records.begin(.arrived)
        records.field("path", folder: loggedInbox, prepared.name)
        records.field("size", prepared.size)
        if !prepared.isFolder { records.field("sha256", prepared.inspection.sha256) }
        records.field("modified", time: prepared.status.modified)
        records.field("type", prepared.inspection.type)
        records.field("id", identity: prepared.identity)
        if let handler {
            records.field("handler", handler)
        } else if prepared.disposition != .keep {
            records.field("disposition", prepared.disposition.rawValue)
        }
        records.end()
    }

    /// Appends records and remembers the last seq for the checkpoint.
    func commit(_ records: [Event], durable: Bool) throws(ContainerError) {
        try group.append(EncodedEvents(records), durable: durable)
    }

    func commit(_ records: EncodedEvents, durable: Bool) throws(ContainerError) {
        try group.append(records, durable: durable)
    }

    /// Ends phase 2 of a batch: its folders fsynced and `applied` appended, here or beside this thread
    /// (`GroupCommit.commitApplied`).
    func commitApplied(_ applied: EncodedEvents, syncLater: Bool = false, settling arrivals: [Arrival] = [])
        throws(ContainerError)
    {
        try group.commitApplied(
            applied, documents: documents, inbox: inboxFolder, shown: container.path(.documents),
            syncLater: syncLater, settling: arrivals)
    }
}
