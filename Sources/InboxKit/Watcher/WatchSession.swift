import AppContainer
import Dispatch
import Glibc
import Synchronization

/// One run of a watcher, in turns (ARCHITECTURE.md, "Many containers"): `open` checks and takes the container and
/// logs `watch-started`, each `turn` handles what is queued or due, `close` logs `watch-stopped`. `Watcher.runBlocking`
/// takes the turns on its own thread; a `WatchPool` takes those of many watchers on a few shared threads.
final class WatchSession {
    let watcher: Watcher
    private let pipeline: ArrivalPipeline
    private var lock: WatcherLock?
    private var setup: BackgroundSetup?
    private var events: InboxEvents?
    private var cleanup: BackgroundCleanup.Job?
    private let started = ContinuousClock.now
    private var nextRescan: ContinuousClock.Instant
    /// What the inotify hub said of a pooled session's folders: watched, or a failure.
    private let hub = HubNews()
    /// Whether `watch-started` is logged: at once for a session on a thread of its own, which returns from `open`
    /// once its folders are watched; at the first turn after the hub has watched them for a pooled one.
    private var announced = false
    private var released = false
    /// The scan asked for last gave way: the next runs to its end if items are kept in the Inbox (a scan starts over
    /// from the folder's first entry, and those are still there: giving way every time would never get past them).
    private var scanGaveWay = false
    /// Whether a batch's `moved` records wait for a later batch's fsync: only on a thread of the session's own
    /// (`.blocking`), which wakes for `syncDue` on time. A pooled session's turn may wait behind other
    /// containers' work, and its settling with it: its records are made durable by the syncer's append.
    private let groupsCommits: Bool
    /// The filesystem of the Inbox, and its poll where inotify does not see other hosts' writes there.
    private let filesystem: Filesystem
    private let poll: InboxPoll?
    /// Whether the session is the process's one watcher (`.blocking`), which tells systemd its state; a pooled one
    /// leaves that to its `WatcherFleet`.
    private let notifiesSystemd: Bool
    /// How many batches past the first a turn takes while they overlap, before it looks at retries and scans.
    static let overlappedBatches = 64

    /// How a session waits for its folders to be watched: `.blocking` returns from `open` once they are, `.pooled`
    /// returns at once, and the hub asks for the start-up scan when they are (a pool thread never waits for the hub).
    enum Start {
        case blocking, pooled
    }

    /// Takes the container for `watcher`: a broken seal fails with 65, another watcher holding it with 75. A pooled
    /// session hands its folders' fsyncs to the pool's `syncer`, if any.
    init(_ watcher: Watcher, start: Start, syncer: FolderSyncer? = nil) throws(ContainerError) {
        self.watcher = watcher
        groupsCommits = start == .blocking
        notifiesSystemd = start == .blocking
        let inbox = watcher.inbox
        let options = watcher.options
        // A broken seal: the app must not launch (exit status 65). A bundle never sealed passes.
        try AppBundle(container: inbox.container).checkSeal()
        filesystem = try Self.filesystem(of: inbox)
        try inbox.container.requireSingleHost(declared: options.singleHost)
        poll = filesystem.pollReason.map {
            InboxPoll(reason: $0, interval: options.pollInterval, settle: options.settle)
        }
        let lock = try WatcherLock(container: inbox.container)
        self.lock = lock
        watcher.lock.withLock { $0 = lock }
        Watcher.ignoreLeaseBreakSignal()
        nextRescan = .now + options.rescanInterval
        let threads = ArrivalPipeline.Threads.forWatcher(
            blocking: start == .blocking, options: options, handler: watcher.handler, poolSyncer: syncer,
            report: { watcher.report($0) })
        do {
            pipeline = try ArrivalPipeline(
                inbox: inbox, options: options, handler: watcher.handler, threads: threads,
                wake: { [queue = watcher.queue] in queue.poke() })
        } catch {
            threads.stop()
            watcher.lock.withLock { $0 = nil }
            throw error
        }
        do throws(ContainerError) {
            try recoverAtStart()
            // One-time setup runs beside the watcher; `--once` waits for it, a stop interrupts it.
            setup = BackgroundSetup.start(inbox, report: { [watcher] in watcher.report($0) })
            // `once` reads the folder and never inotify.
            if !options.once {
                let subscription = InboxEvents(
                    inboxPath: inbox.container.pathBytes(.inbox), queue: watcher.queue,
                    holdsLock: { [weak watcher] in watcher?.holdsLock == true },
                    watching: { [weak watcher] failure in if let watcher { Self.watching(failure, by: watcher) } })
                switch start {
                case .blocking:
                    try subscription.start()
                    watcher.queue.requestRescan("start-up")
                case .pooled:
                    subscription.start { [hub, queue = watcher.queue] failure in
                        hub.news.withLock {
                            $0.failure = failure
                            $0.watched = failure == nil
                        }
                        if failure == nil { queue.requestRescan("start-up") } else { queue.poke() }
                    }
                }
                events = subscription
            } else {
                watcher.queue.requestRescan("start-up")
            }
            if start == .blocking || options.once { try announce() }
        } catch {
            release()
            throw error
        }
    }

    /// What a crash or a failure left unfinished, settled before the start-up scan, in this order (ARCHITECTURE.md,
    /// "How an arrival flows"): an `inbox move` cut short (its journal), then an import's placing (its `delivered`
    /// record before the file's `arrived`), then the watcher's own last batch (the checkpoint and the log since).
    private func recoverAtStart() throws(ContainerError) {
        let inbox = watcher.inbox
        for unlogged in inbox.recoverInterruptedMoves(report: { [watcher] in watcher.report($0.message) }) {
            watcher.report(unlogged.message)
        }
        if let unlogged = inbox.repairInterruptedImportsLogging() { watcher.report(unlogged.message) }
        try pipeline.recoverInterruptedBatch()
    }

    /// Logs `watch-started` (once the Inbox is watched, before the start-up scan, so that nothing
    /// delivered after the record can be missed), tells systemd (a session of its own) and says so. A polled Inbox's
    /// record says `polling` (why: the filesystem) and the mount's `cache_options`.
    private func announce() throws(ContainerError) {
        let inbox = watcher.inbox
        let onArrival = watcher.options.onArrival.rawValue
        var record = Event(.watchStarted, ["pid": .int(Int64(getpid())), "on_arrival": .string(onArrival)])
        var polling = ""
        if let poll {
            let cache = filesystem.cacheOptions.joined(separator: ",")
            record.fields += [("polling", .string(poll.reason)), ("cache_options", .string(cache))]
            polling = "; polling every \(poll.interval): \(poll.reason)" + (cache.isEmpty ? "" : ", \(cache)")
        }
        try inbox.log.append(record, durable: true)
        announced = true
        if notifiesSystemd { SystemdNotify.send("READY=1") }
        watcher.report(
            "watching \(inbox.container.path(.inbox)) (pid \(getpid()), on arrival: \(onArrival)\(polling))")
    }

    /// The filesystem that holds the Inbox (ARCHITECTURE.md, "Network and FUSE filesystems").
    private static func filesystem(of inbox: Inbox) throws(ContainerError) -> Filesystem {
        let folder = try inbox.container.openFolder(.inbox)
        do {
            return try Filesystem(of: folder)
        } catch {
            throw error.failure("tell the filesystem of", inbox.container.path(.inbox))
        }
    }

    /// Polls the Inbox (ARCHITECTURE.md, "Network and FUSE filesystems"); returns the names that settled. A failure
    /// (the folder replaced, an I/O error) asks for a rescan, which reopens the folder and fails with the reason where
    /// it cannot read it.
    private func pollInbox(_ poll: InboxPoll) -> [FileName] {
        do {
            return try pipeline.poll(poll)
        } catch {
            watcher.queue.requestRescan("poll")
            if error != Errno(rawValue: ESTALE) { watcher.report("cannot poll the Inbox: \(error); rescanning it") }
            return []
        }
    }

    deinit {
        release()
    }

    /// Says, on the hub's thread, that the Inbox could not be watched again (reported and logged as an `error`
    /// record; the hub tries again each second, and meanwhile the Inbox is scanned when it changes), or, nil, that
    /// it is watched again.
    private static func watching(_ failure: ContainerError?, by watcher: Watcher) {
        guard let failure else {
            watcher.report("watching the Inbox again")
            return
        }
        watcher.report("\(failure.message); trying again every second, scanning the Inbox when it changes")
        let inbox = watcher.inbox
        do throws(ContainerError) {
            let path = Array(Place.inbox.relativePath(appName: inbox.container.appName).utf8)
            try inbox.log.append(
                Event(
                    .error,
                    [
                        "during": .string("watch the Inbox"), "path": .path(path),
                        "errno": .int(Int64(failure.cause?.rawValue ?? 0)), "message": .string(failure.message),
                    ]),
                durable: true)
        } catch {
            watcher.report("cannot log it in the container: \(error.message)")
        }
    }

    /// When the session wants a turn though nothing is queued: the next retry or periodic scan (`once`: within a
    /// second, to see whether what it waits for is written).
    var nextWake: ContinuousClock.Instant {
        let due = min(dueBesidesPoll, poll?.nextPoll ?? dueBesidesPoll)
        return watcher.options.once ? min(due, .now + .seconds(1)) : due
    }

    /// The next retry, periodic scan or fsync due.
    private var dueBesidesPoll: ContinuousClock.Instant {
        min(nextRescan, pipeline.nextRetry ?? nextRescan, pipeline.syncDue ?? nextRescan)
    }

    /// One turn: up to a batch of the names queued, the retries due, then a scan when one is asked for or due.
    /// A scan gives way between batches when `giveWay` says so, and is asked for again, to run to its end the next
    /// time. Returns whether the session goes on; false once it is stopped (or, with `once`, done).
    func turn(giveWay: () -> Bool = { false }) throws(ContainerError) -> Bool {
        do {
            return try takeTurn(giveWay: giveWay)
        } catch {
            // A failure ends the run: the batch still being prepared, if any, is let go (it arrives at the next start).
            pipeline.dropPrepared()
            throw error
        }
    }

    private func takeTurn(giveWay: () -> Bool) throws(ContainerError) -> Bool {
        var polled: [FileName] = []
        if let poll, ContinuousClock.now >= poll.nextPoll {
            polled = pollInbox(poll)
            // A polled Inbox unchanged and nothing else due or awaited (the syncer's answers, a stop): the turn costs
            // the poll alone (ARCHITECTURE.md, "Network and FUSE filesystems").
            if polled.isEmpty, announced, !watcher.options.once, !watcher.queue.hasWork, !watcher.queue.isStopped,
                pipeline.waitingForSyncer == 0, ContinuousClock.now < dueBesidesPoll
            {
                return true
            }
        }
        try checkLock()
        let news = hub.news.withLock { $0 }
        if let failure = news.failure { throw failure }
        if !announced, news.watched { try announce() }
        let queue = watcher.queue
        let options = watcher.options
        // The folders of the last batch's moves are fsynced by now: its records are appended.
        try pipeline.takeSyncerAnswers()
        // Nothing came in time to share the fsync of the `moved` records: they are made durable on their own.
        if let due = pipeline.syncDue, ContinuousClock.now >= due { try syncAndSettle() }
        var batch = queue.take(limit: options.maxBatch)
        batch.names += try pipeline.dueRetries()
        batch.names += polled
        let reason = try handleQueued(batch) ?? (ContinuousClock.now >= nextRescan ? "periodic" : nil)
        if let reason, !queue.isStopped {
            var gaveWay = false
            let mayGiveWay = !scanGaveWay || !pipeline.keepsArrivals
            try pipeline.scan(
                reason: reason,
                stop: {
                    if queue.isStopped { return true }
                    gaveWay = mayGiveWay && giveWay()
                    return gaveWay
                },
                handle: { names throws(ContainerError) in
                    // On a polled Inbox, a name arrives once the poll has seen it settle.
                    try handle(poll?.admitted(names) ?? names, more: true)
                },
                finish: finishPrepared)
            // A scan that stopped early leaves its last batch under preparation.
            try finishPrepared()
            scanGaveWay = gaveWay
            if gaveWay {
                queue.requestRescan(reason)
            } else {
                nextRescan = .now + options.rescanInterval
                // The cleanup policy starts once the start-up scan has handled the Inbox: it never deletes an
                // item that has not arrived, nor one whose move was just decided.
                if cleanup == nil, !queue.isStopped, let interval = options.cleanInterval {
                    let round = CleanupRound(
                        inbox: watcher.inbox, lockHeld: { [watcher] in watcher.holdsLock },
                        report: { [watcher] in watcher.report($0) })
                    cleanup = BackgroundCleanup.shared.add(
                        round, stoppingWith: queue, interval: interval, once: options.once)
                }
            }
        }
        settle()
        stopIfRefused()
        if queue.isStopped { return false }
        // `once`: done when the Inbox has been read, but for files still being written (a few seconds at most).
        if options.once && !queue.hasWork
            && (!pipeline.waitsForWriters && poll?.isSettling != true
                || ContinuousClock.now > started + Watcher.onceWaitForWriters)
        {
            return false
        }
        return true
    }

    /// With `once`, the first failure that left an item where it was, logged with it: the run's exit status
    /// (ARCHITECTURE.md, "No silent failure").
    var itemFailure: ContainerError? {
        watcher.options.once ? pipeline.firstFailure : nil
    }

    /// Ends the run: waits for setup and cleanup (`once`) or stops them, saves the checkpoint and logs
    /// `watch-stopped`; fails with the refusal that stopped it, if any.
    func close() throws(ContainerError) {
        // A lock lost (the container being removed, or another watcher may hold it): nothing more is written in it.
        if let lock, lock.state == .lost {
            watcher.lostLock.store(true, ordering: .relaxed)
            release()
            throw lock.lostError
        }
        let waiting = watcher.options.once && !watcher.queue.isStopped
        setup?.finish(waiting: waiting)
        cleanup?.finish(waiting: waiting)
        if notifiesSystemd { SystemdNotify.send("STOPPING=1") }
        try syncAndSettle()
        try pipeline.saveCheckpoint()
        // A pooled session stopped before its folders were watched never started.
        if announced {
            try watcher.inbox.log.append(Event(.watchStopped, ["pid": .int(Int64(getpid()))]), durable: true)
        }
        watcher.report("stopped")
        release()
        if let refusal = pipeline.refusal { throw refusal }
    }

    /// Lets go of the folders, the background work and the lock (also after a failure). Once only.
    func release() {
        guard !released else { return }
        released = true
        events?.stop()
        events = nil
        pipeline.stopThreads()
        watcher.finishArrivals()
        cleanup?.finish(waiting: false)
        setup?.finish(waiting: false)
        watcher.lock.withLock { $0 = nil }
        lock = nil
    }

    /// Handles a batch taken from the queue, `maxBatch` names at a time, and while batches overlap (a burst) those
    /// that keep coming, a bounded number a turn; returns the rescan asked for meanwhile.
    private func handleQueued(_ batch: WatchQueue.Batch) throws(ContainerError) -> String? {
        let queue = watcher.queue
        let maxBatch = watcher.options.maxBatch
        try logOverflows(batch.overflows)
        var rescan = batch.rescan
        var names = batch.names[...]
        var rounds = 0
        while !queue.isStopped {
            if names.isEmpty {
                guard pipeline.overlapsBatches, rounds < Self.overlappedBatches else { break }
                let next = queue.take(limit: maxBatch)
                try logOverflows(next.overflows)
                rescan = rescan ?? next.rescan
                guard !next.names.isEmpty else { break }
                names = next.names[...]
                rounds += 1
            }
            let chunk = Array(names.prefix(maxBatch))
            names = names.dropFirst(chunk.count)
            try handle(chunk, more: !names.isEmpty || queue.hasNames)
        }
        try finishPrepared()
        return rescan
    }

    /// Handles one batch of names (`more`: more are on their way, so that its preparation may overlap the batch
    /// before, ARCHITECTURE.md, "The hot path"), then hands on the arrivals whose records are durable by now.
    private func handle(_ names: [FileName], more: Bool) throws(ContainerError) {
        try checkLock()
        _ = try pipeline.process(names, more: more, syncLater: groupsCommits)
        settle()
        stopIfRefused()
    }

    /// Stops the run where no move can be made (ARCHITECTURE.md, "Network and FUSE filesystems"): retrying would fail
    /// forever. The item stays in the Inbox, its `error` record written; `close` then fails with the refusal (73).
    private func stopIfRefused() {
        if pipeline.refusal != nil { watcher.queue.stop() }
    }

    /// Fails, with exit status 75 and nothing logged, unless the name `watch.lock` still holds the file this session
    /// locked: checked before each batch, so that a watcher whose lock file was unlinked or replaced never handles
    /// one beside the watcher that took the name since (ARCHITECTURE.md, "One watcher per container").
    private func checkLock() throws(ContainerError) {
        guard let lock else { return }
        let state = lock.state
        // Stopped, only the batch in hand is finished, and `close` writes where the lock file still has a name:
        // a container renamed away is closed in place.
        if state == .held || (state == .moved && watcher.queue.isStopped) {
            // Where other hosts write, the lock is a lease: taken again before each batch.
            guard poll != nil, let failure = lock.relockFailure else { return }
            watcher.lostLock.store(true, ordering: .relaxed)
            throw failure
        }
        watcher.lostLock.store(true, ordering: .relaxed)
        throw lock.lostError
    }

    /// Applies the batch still being prepared, if any, and settles as `handle` does.
    private func finishPrepared() throws(ContainerError) {
        try checkLock()
        _ = try pipeline.finishPrepared(syncLater: groupsCommits)
        settle()
        stopIfRefused()
    }

    /// Logs the inotify queue's overflows taken with a batch.
    private func logOverflows(_ count: Int) throws(ContainerError) {
        guard count > 0 else { return }
        try watcher.inbox.log.append(Event(.overflow, ["count": .int(Int64(count))]))
        watcher.report("inotify queue overflowed; rescanning the Inbox")
    }

    /// Makes the records written without an fsync durable, and settles what waited for it.
    private func syncAndSettle() throws(ContainerError) {
        try pipeline.syncRecords()
        settle()
    }

    /// Hands the arrivals whose records are durable to `onSettled` and the `arrivals` stream.
    private func settle() {
        let arrivals = pipeline.takeSettled()
        guard !arrivals.isEmpty else { return }
        if let onSettled = watcher.options.onSettled, !onSettled(arrivals) { watcher.stop() }
        watcher.deliver(arrivals)
    }
}

/// What the inotify hub tells a pooled session, from its thread.
private final class HubNews: Sendable {
    let news = Mutex<(watched: Bool, failure: ContainerError?)>((false, nil))
}
