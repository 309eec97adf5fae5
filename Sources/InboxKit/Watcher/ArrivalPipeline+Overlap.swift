import AppContainer

/// Two batches at once (ARCHITECTURE.md, "The hot path"): while this thread logs and applies one batch, the
/// `prepareAhead` thread opens, leases, seals and hashes the next. What that thread reads is changed only between
/// batches, here (the folders reopened, `arrived` as it was); a file of the batch being applied is left alone there
/// (`skipping`), as a batch after it would find it gone or arrived.
extension ArrivalPipeline {
    /// Waits for the batch under preparation, starts preparing `names`, and applies the one waited for. After a
    /// failure, the caller lets the batch under preparation go (`dropPrepared`).
    func overlap(_ names: [FileName], on ahead: SideThread<PreparedBatch>, syncLater: Bool)
        throws(ContainerError) -> [Arrival]
    {
        let previous = ahead.wait()
        try reopenReplacedFolders()
        let arrived = arrived
        let skipping = Set(previous?.items.map(\.status.fileID) ?? [])
        ahead.start { [self] in prepareBatch(names, arrived: arrived, skipping: skipping) }
        guard let previous else { return [] }
        return try apply(previous, syncLater: syncLater)
    }

    /// Applies the batch under preparation, if any; returns its arrivals.
    func finishPrepared(syncLater: Bool = false) throws(ContainerError) -> [Arrival] {
        guard let prepared = prepareAhead?.wait() else { return [] }
        return try apply(prepared, syncLater: syncLater)
    }

    /// Waits for the batch under preparation and lets it go unlogged (after a failure that ends the run): its files
    /// stay in the Inbox, sealed, and arrive at the next start.
    func dropPrepared() {
        _ = prepareAhead?.wait()
    }
}
