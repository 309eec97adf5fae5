import AppContainer

/// What of a watcher's log is durable when (ARCHITECTURE.md, "Group commit across batches", "The folders fsynced
/// beside"), on the one thread that renames. A batch's `moved` and `deleted` records are written once its folders are
/// fsynced: here, or by a `FolderSyncer` beside this thread, whose answers are taken in the order handed in. Records
/// written without an fsync are made durable by a later append that fsyncs the log, or by `sync` once `syncDue` has
/// come; the arrivals of a batch are handed on (`takeSettled`), in order, only once its records are durable, and the
/// journal intents of its copies ended only then.
final class GroupCommit {
    /// How long a record written without an fsync may wait for a later one's, and a batch handed to the `syncer` for
    /// others to share its fsyncs: the group commit's window.
    static let syncDelay = Duration.milliseconds(5)
    /// How many batches may wait for the syncer before the next one's phase 2 waits for the first of them.
    static let maxHandedToSyncer = 8

    let log: EventLog
    /// Where a batch's folders are fsynced and its records appended, beside this thread; nil: on this thread.
    private(set) var syncer: FolderSyncer?
    /// The seq of the last record written, for the checkpoint.
    var lastSeq: UInt64 = 0
    /// The seq of the last record made durable, and of the last written without an fsync (`syncDue`).
    private(set) var durableThrough: UInt64 = 0
    private(set) var unsyncedThrough: UInt64 = 0
    /// When the records written without an fsync must be made durable, if a later append has not by then; nil when
    /// every record is durable.
    private(set) var syncDue: ContinuousClock.Instant?
    /// The batches handed to `syncer` whose answers are not taken yet, in order: each with its copies' intents to end
    /// once its records are durable, and whether arrivals wait for it in `unsettled`.
    private var handedToSyncer: [(intents: [MoveJournal.Record], settles: Bool)] = []
    /// The syncer's answers for those batches.
    private let syncerAnswers = FolderSyncer.Answers()
    /// The arrivals of the batches applied, in order, each with the seq its records are durable from (nil while its
    /// folders are fsynced): handed on once the log is durable that far (`takeSettled`).
    private var unsettled: [(arrivals: [Arrival], through: UInt64?)] = []
    /// Journal intents of copying moves, ended once the records of their batch (the next committed) are durable.
    private var intentsToEnd: [MoveJournal.Record] = []
    private let journal: MoveJournal
    /// Whether settled arrivals are read (`onSettled`, the `arrivals` stream): the syncer then wakes this thread.
    private let settlesArrivals: Bool
    /// Wakes this thread to take an answer the syncer has put (a poke of its queue).
    private let wake: @Sendable () -> Void
    private let report: (String) -> Void

    init(
        log: EventLog, journal: MoveJournal, syncer: FolderSyncer? = nil, settlesArrivals: Bool,
        wake: @escaping @Sendable () -> Void, report: @escaping (String) -> Void
    ) {
        self.log = log
        self.syncer = syncer
        self.journal = journal
        self.settlesArrivals = settlesArrivals
        self.wake = wake
        self.report = report
    }

    /// How many batches handed to the syncer wait for their answers to be taken.
    var waitingForSyncer: Int { handedToSyncer.count }

    /// Appends records (with `durable`, fsynced); the records of a batch whose folders are fsynced by now go first, to
    /// share this append's fsync.
    func append(_ records: EncodedEvents, durable: Bool) throws(ContainerError) {
        guard !records.isEmpty else { return }
        try finish(waiting: false)
        noteAppended(through: try log.append(records, durable: durable) + UInt64(records.count) - 1, durable: durable)
    }

    /// Records up to `seq` are appended (by this thread or another); with `durable`, fsynced too.
    func noteAppended(through seq: UInt64, durable: Bool) {
        if durable {
            loggedDurably(through: seq)
        } else {
            lastSeq = max(lastSeq, seq)
            unsyncedThrough = max(unsyncedThrough, seq)
        }
    }

    /// The journal intent of a copy just moved: ended once the records of the batch committed next are durable.
    func endWhenDurable(_ intent: MoveJournal.Record) {
        intentsToEnd.append(intent)
    }

    /// Ends phase 2 of a batch whose renames changed `documents` and `inbox`, and whose `arrivals` wait to be settled:
    /// the folders fsynced, then `applied` appended. With `syncLater` and no intent to end, the records are written but
    /// their fsync waits for a later append's, or for `syncDue`: recovery logs again a move whose record a power loss
    /// took. With a `syncer`, the batch is handed to it and this returns at once; its answer is taken at the next
    /// append or `finish`.
    func commitApplied(
        _ applied: EncodedEvents, documents: SharedDescriptor, inbox: SharedDescriptor,
        shown: @autoclosure () -> String, syncLater: Bool = false, settling arrivals: [Arrival] = []
    ) throws(ContainerError) {
        guard !applied.isEmpty else {
            if !arrivals.isEmpty { unsettled.append((arrivals, lastSeq)) }
            // Records written without an fsync, and nothing moved whose fsync would make them durable.
            if unsyncedThrough > durableThrough { syncDue = syncDue ?? .now + Self.syncDelay }
            return
        }
        // Taken now: if the records fail, the intents are dropped unended (and unlocked), for recovery to settle.
        let intents = intentsToEnd
        intentsToEnd.removeAll()
        let durable = !syncLater || !intents.isEmpty
        if let syncer {
            if handedToSyncer.count >= Self.maxHandedToSyncer { try takeAnswers(waiting: true, atMost: 1) }
            if !arrivals.isEmpty { unsettled.append((arrivals, nil)) }
            handedToSyncer.append((intents, !arrivals.isEmpty))
            let answers = syncerAnswers
            let wake = wake
            // This thread takes the answer at its next turn or commit, woken for it only where something waits on
            // it: records still to make durable (`syncDue`), intents to end, arrivals to settle for a reader, or a
            // failure. Else the wake (and the contention for the answers) would come once a batch for nothing.
            let wakes = !durable || !intents.isEmpty || (!arrivals.isEmpty && settlesArrivals)
            syncer.submit(
                FolderSyncer.Batch(
                    owner: ObjectIdentifier(self), folders: [documents, inbox], shown: shown(), log: log,
                    records: applied, durable: durable,
                    done: { answer in
                        answers.put(answer)
                        if case .failure = answer {
                            wake()
                        } else if wakes {
                            wake()
                        }
                    }))
            // Answered already when the batch was done on this thread (a test's fault plan).
            try finish(waiting: false)
            return
        }
        do {
            try documents.sync()
            try inbox.sync()
        } catch {
            throw error.failure("sync", shown())
        }
        try append(applied, durable: durable)
        if durable {
            endIntents(intents)
        } else {
            syncDue = syncDue ?? .now + Self.syncDelay
        }
        if !arrivals.isEmpty { unsettled.append((arrivals, lastSeq)) }
    }

    /// Takes the syncer's answers for the batches handed in: with `waiting`, every one, waiting for them; else those
    /// come already. Throws a failed fsync or append (the batch's records are then unwritten: recovery logs the moves
    /// at the next start).
    func finish(waiting: Bool) throws(ContainerError) {
        try takeAnswers(waiting: waiting, atMost: .max)
    }

    private func takeAnswers(waiting: Bool, atMost limit: Int) throws(ContainerError) {
        // Waited for: they linger no more.
        if waiting, !handedToSyncer.isEmpty { syncer?.hurry(ObjectIdentifier(self)) }
        var taken = 0
        while taken < limit, let handed = handedToSyncer.first, let answer = syncerAnswers.take(waiting: waiting) {
            handedToSyncer.removeFirst()
            taken += 1
            let appended = try answer.get()
            lastSeq = max(lastSeq, appended.lastSeq)
            if appended.durable {
                loggedDurably(through: appended.lastSeq)
                endIntents(handed.intents)
            } else if appended.lastSeq > durableThrough {
                // Not made durable since by a later fsync of the log.
                unsyncedThrough = max(unsyncedThrough, appended.lastSeq)
                syncDue = syncDue ?? .now + Self.syncDelay
            }
            if handed.settles, let index = unsettled.firstIndex(where: { $0.through == nil }) {
                unsettled[index].through = appended.lastSeq
            }
        }
    }

    /// Makes durable the records written without an fsync, if any, and those waiting for their folders' fsync.
    func sync() throws(ContainerError) {
        try finish(waiting: true)
        guard syncDue != nil else { return }
        try log.sync()
        loggedDurably(through: lastSeq)
    }

    /// Every record up to `seq` is durable: an fsync of the log after it was written.
    func loggedDurably(through seq: UInt64) {
        lastSeq = max(lastSeq, seq)
        durableThrough = max(durableThrough, seq)
        if unsyncedThrough <= durableThrough { syncDue = nil }
    }

    /// The arrivals whose records are durable, in the order they were applied; they are handed on once.
    func takeSettled() -> [Arrival] {
        var settled: [Arrival] = []
        while let first = unsettled.first, let through = first.through, through <= durableThrough {
            settled += first.arrivals
            unsettled.removeFirst()
        }
        return settled
    }

    /// Waits for the answers still due and drops them, after a failure that ends the run (a move whose record is
    /// missing is logged by recovery at the next start); then stops the syncer when `stopping` (it is this run's own).
    func letGoOfSyncer(stopping: Bool) {
        if !handedToSyncer.isEmpty { syncer?.hurry(ObjectIdentifier(self)) }
        while !handedToSyncer.isEmpty {
            handedToSyncer.removeFirst()
            _ = syncerAnswers.take(waiting: true)
        }
        if stopping { syncer?.stop() }
        syncer = nil
    }

    /// The journal intents of copies whose `moved` records are durable: done with.
    private func endIntents(_ intents: [MoveJournal.Record]) {
        guard !intents.isEmpty else { return }
        for intent in intents {
            do throws(Errno) {
                try journal.end(intent)
            } catch {
                // Settled already: an intent left behind only makes the next start look again.
                let path = journal.directory + "/" + intent.recordName.string
                report("\(error.failure("end the move journal's intent", path).message) (the next start looks again)")
            }
        }
    }
}
