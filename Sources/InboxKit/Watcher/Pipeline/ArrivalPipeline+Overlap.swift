import AppContainer

/// Two batches at once (ARCHITECTURE.md, "The hot path"): while this thread logs and applies one batch, the
/// `prepareAhead` thread opens, leases, seals and hashes the next. What that thread reads is changed only between
/// batches, here (the folders reopened, `arrived` as it was); a file of the batch being applied is left alone there
/// (`skipping`), as a batch after it would find it gone or arrived.
extension ArrivalPipeline {
    /// Waits for the batch under preparation, starts preparing `names`, and applies the one waited for. After a
    /// failure, the caller lets the batch under preparation go (`dropPrepared`). The batch applied is let go by the
    /// next one's preparation (`spentItems`), or by `finishPrepared`.
    func overlap(_ names: [FileName], on ahead: SideThread<PreparedBatch>, syncLater: Bool)
        throws(ContainerError) -> [Arrival]
    {
        let previous = ahead.wait()
        try reopenReplacedFolders()
        let arrived = arrived
        let skipping = Set(previous?.items.map(\.status.fileID) ?? [])
        // The files of the batch applied last are closed there, before it opens the next batch's: never more than
        // two batches open at once, and the renaming thread does not pay for the closes.
        var spent = spentItems
        spentItems = []
        ahead.start { [self] in
            spent.removeAll()
            var batch = prepareBatch(names, arrived: arrived, skipping: skipping)
            logArrivals(of: &batch)
            return batch
        }
        guard let previous else { return [] }
        defer { spentItems = previous.items }
        return try apply(previous, syncLater: syncLater)
    }

    /// Phase 1 of a batch, on the preparing thread once it is prepared: its records appended (and fsynced where
    /// phase 1 is, `syncsArrivals`), so that the watcher's thread only renames. Not when a name failed to arrive (its
    /// failure is noted on that thread, at phase 1 there), nor for a handler (asked on that thread).
    func logArrivals(of batch: inout PreparedBatch) {
        guard handlerName == nil, batch.failures.isEmpty, !batch.items.isEmpty || !batch.rejections.isEmpty else {
            return
        }
        var records = EncodedEvents(reservingCapacity: batch.items.count)
        for rejection in batch.rejections { records.append(rejection) }
        appendArrivals(batch.items, to: &records)
        let log = inbox.log
        let durable = syncsArrivals
        batch.logged = Result { () throws(ContainerError) in
            try log.append(records, durable: durable) + UInt64(records.count) - 1
        }
    }

    /// Applies the batch under preparation, if any; returns its arrivals. The files of the batches applied are all
    /// closed by then: none stays open while the watcher waits for more.
    func finishPrepared(syncLater: Bool = false) throws(ContainerError) -> [Arrival] {
        spentItems = []
        guard let prepared = prepareAhead?.wait() else { return [] }
        return try apply(prepared, syncLater: syncLater)
    }

    /// Waits for the batch under preparation and lets it go unlogged (after a failure that ends the run): its files
    /// stay in the Inbox, sealed, and arrive at the next start.
    func dropPrepared() {
        spentItems = []
        _ = prepareAhead?.wait()
    }
}
