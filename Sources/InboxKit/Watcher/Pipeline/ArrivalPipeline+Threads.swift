import AppContainer

/// The threads a pipeline works with beside the watcher's, given whole at its init, and what its session asks of the
/// group commit through it (ARCHITECTURE.md, "The hot path", "The folders fsynced beside").
extension ArrivalPipeline {
    /// One thread that prepares the next batch while one is applied, one that fsyncs a batch's folders while the next
    /// goes on (stopped with the pipeline when `ownsSyncer`). None: all on the watcher's thread.
    struct Threads {
        var prepareAhead: SideThread<PreparedBatch>?
        var syncer: FolderSyncer?
        var ownsSyncer = false

        /// Those a watcher run on a thread of its own (`blocking`) starts: a preparing thread where moves or deletions
        /// on arrival have a phase 2 to overlap (never for a handler, whose answers come between batches), and a
        /// syncer wherever moves may come. A pooled run takes the pool's `poolSyncer` alone: a pool's threads serve
        /// other containers. A thread that cannot be started is said, and its work done on the watcher's thread.
        static func forWatcher(
            blocking: Bool, options: WatchOptions, handler: (any ArrivalHandler)?, poolSyncer: FolderSyncer?,
            report: (String) -> Void
        ) -> Threads {
            guard blocking else { return Threads(syncer: poolSyncer) }
            var threads = Threads()
            let decides = handler != nil || options.exec != nil
            if !decides, options.onArrival != .keep {
                do {
                    threads.prepareAhead = try SideThread(name: "inbox-prepare")
                } catch {
                    report("preparing every batch on the watcher's thread: no second thread (\(error))")
                }
            }
            if decides || options.onArrival != .keep {
                do {
                    threads.syncer = try FolderSyncer(name: "inbox-sync", linger: GroupCommit.syncDelay)
                    threads.ownsSyncer = true
                } catch {
                    report("fsyncing the folders on the watcher's thread: no other thread (\(error))")
                }
            }
            return threads
        }

        /// Stops the threads started for a pipeline that could not be built.
        func stop() {
            prepareAhead?.stop()
            if ownsSyncer { syncer?.stop() }
        }
    }

    /// Whether batches overlap: the next prepared on `prepareAhead` while one is applied.
    var overlapsBatches: Bool { prepareAhead != nil }

    /// When the records written without an fsync are to be made durable (`syncRecords`), if nothing has by then.
    var syncDue: ContinuousClock.Instant? { group.syncDue }

    /// How many batches wait for the syncer's answers.
    var waitingForSyncer: Int { group.waitingForSyncer }

    /// Takes the answers the syncer has given by now: the records of batches whose folders are fsynced, appended.
    func takeSyncerAnswers() throws(ContainerError) { try group.finish(waiting: false) }

    /// Makes every record written without an fsync durable, waiting for the syncer's answers.
    func syncRecords() throws(ContainerError) { try group.sync() }

    /// The arrivals whose records are durable, in order, each once.
    func takeSettled() -> [Arrival] { group.takeSettled() }
}
