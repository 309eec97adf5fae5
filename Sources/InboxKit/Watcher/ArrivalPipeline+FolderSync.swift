import AppContainer

/// Phase 2's end (ARCHITECTURE.md, "The folders fsynced beside"): Documents and the Inbox fsynced once a batch,
/// then the records of what moved appended, then the journal intents of copies ended; on this thread, or handed to
/// a `FolderSyncer` while this thread goes on with the next batch.
extension ArrivalPipeline {
    /// Ends phase 2 of a batch whose `arrivals` wait to be settled. With `syncLater` and no intent to end, the
    /// records are written but their fsync waits for a later batch's phase 1, or for `syncDue`: recovery logs again
    /// a move whose record a power loss took. With a `folderSyncer`, the batch is handed to it and this returns at
    /// once; its answer is taken at the next turn or commit (`finishFolderSync`).
    func commitApplied(_ applied: EncodedEvents, syncLater: Bool = false, settling arrivals: [Arrival] = [])
        throws(ContainerError)
    {
        guard !applied.isEmpty else {
            if !arrivals.isEmpty { unsettled.append((arrivals, lastSeq)) }
            // A phase 1 written without an fsync, and nothing moved whose fsync would make it durable.
            if unsyncedThrough > durableThrough { syncDue = syncDue ?? .now + Self.syncDelay }
            return
        }
        // Taken now: if the records fail, the intents are dropped unended (and unlocked), for recovery to settle.
        let intents = intentsToEnd
        intentsToEnd.removeAll()
        let durable = !syncLater || !intents.isEmpty
        if let folderSyncer {
            if handedToSyncer.count >= Self.maxHandedToSyncer { try takeAnswers(waiting: true, atMost: 1) }
            if !arrivals.isEmpty { unsettled.append((arrivals, nil)) }
            handedToSyncer.append((intents, !arrivals.isEmpty))
            let answers = syncerAnswers
            let queue = watcher.queue
            // This thread takes the answer at its next turn or commit, woken for it only where something waits on
            // it: records still to make durable (`syncDue`), intents to end, arrivals to settle for a reader, or a
            // failure. Else the wake (and the contention for the answers) would come once a batch for nothing.
            let wakes = !durable || !intents.isEmpty || (!arrivals.isEmpty && watcher.settlesArrivals)
            folderSyncer.submit(
                FolderSyncer.Batch(
                    owner: ObjectIdentifier(self), folders: [documents, inboxFolder], shown: container.path(.documents),
                    log: inbox.log, records: applied, durable: durable,
                    done: { answer in
                        answers.put(answer)
                        if case .failure = answer {
                            queue.poke()
                        } else if wakes {
                            queue.poke()
                        }
                    }))
            // Answered already when the batch was done on this thread (a test's fault plan).
            try finishFolderSync(waiting: false)
            return
        }
        do {
            try documents.sync()
            try inboxFolder.sync()
        } catch {
            throw error.failure("sync", container.path(.documents))
        }
        try commit(applied, durable: durable)
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
    func finishFolderSync(waiting: Bool) throws(ContainerError) {
        try takeAnswers(waiting: waiting, atMost: .max)
    }

    private func takeAnswers(waiting: Bool, atMost limit: Int) throws(ContainerError) {
        // Waited for: they linger no more.
        if waiting, !handedToSyncer.isEmpty { folderSyncer?.hurry(ObjectIdentifier(self)) }
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

    /// Waits for the answers still due and drops them, after a failure that ends the run (a move whose record is
    /// missing is logged by recovery at the next start); then stops the syncer when it is this run's own.
    func letGoOfFolderSyncer(stopping: Bool) {
        if !handedToSyncer.isEmpty { folderSyncer?.hurry(ObjectIdentifier(self)) }
        while !handedToSyncer.isEmpty {
            handedToSyncer.removeFirst()
            _ = syncerAnswers.take(waiting: true)
        }
        if stopping { folderSyncer?.stop() }
        folderSyncer = nil
    }

    /// The journal intents of copies whose `moved` records are durable: done with.
    private func endIntents(_ intents: [MoveJournal.Record]) {
        guard !intents.isEmpty else { return }
        let journal = MoveJournal(container: container)
        for intent in intents {
            do throws(Errno) {
                try journal.end(intent)
            } catch {
                // Settled already: an intent left behind only makes the next start look again.
                let path = journal.directory + "/" + intent.recordName.string
                watcher.report(
                    "\(error.failure("end the move journal's intent", path).message) (the next start looks again)")
            }
        }
    }
}
