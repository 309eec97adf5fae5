import AppContainer
import Glibc

/// What became of one planned entry.
package struct CleanupOutcome: Sendable {
    /// What was done with the entry.
    package enum Result: Sendable {
        /// A dry run: nothing was done.
        case planned
        /// Deleted, with its `deleted` record in the log.
        case deleted
        /// Already gone when its turn came.
        case gone
        /// Its name holds another file than the one planned (device and inode differ): kept.
        case changed
        /// Not deleted, or logged `deleted` but not yet wholly removed (the next clean finishes it); the error says
        /// which.
        case failed(ContainerError)
    }

    /// The entry as planned.
    package let entry: CleanupEntry
    /// The absolute path, exact to the byte.
    package let path: [UInt8]
    /// What was done with it.
    package let result: Result

    /// Whether the entry was deleted (`result` is `.deleted`).
    package var deleted: Bool {
        if case .deleted = result { return true }
        return false
    }

    /// `      2815  /home/me/app/tmp/upload.part  (older than 3 days)`: the same in a dry run and a real run.
    package var line: [UInt8] {
        let size = String(entry.bytes)
        let padded = String(repeating: " ", count: max(0, 10 - size.count)) + size
        return Array("\(padded)  ".utf8) + path + Array("  (\(entry.reason))".utf8)
    }

    /// `{"path":"/home/me/app/tmp/upload.part","reason":"older than 3 days","deleted":true}` (ARCHITECTURE.md, "The
    /// command line").
    package var json: String {
        var buffer: [UInt8] = [UInt8(ascii: "{")]
        EventEncoding.appendPathMember("path", path, to: &buffer)
        EventEncoding.appendLiteral(",\"reason\":", to: &buffer)
        EventEncoding.appendString(entry.reason, to: &buffer)
        EventEncoding.appendLiteral(",\"deleted\":", to: &buffer)
        EventEncoding.appendLiteral(deleted ? "true}" : "false}", to: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}

/// The totals of a clean.
package struct CleanupSummary: Sendable {
    /// Entries planned, each counted once its batch is done (in a dry run, every entry).
    package var planned = 0
    /// Entries deleted.
    package var deleted = 0
    /// What the deleted entries freed, as their planned `bytes`.
    package var bytesFreed: Int64 = 0
    /// Entries that could not be deleted, and the first reason.
    package var failed = 0
    /// The first of those reasons.
    package var firstFailure: ContainerError?
    /// Entries or folders that could not be read, and so were kept with all they hold.
    package var unreadable = 0
    /// The first of those reasons.
    package var firstUnreadable: ContainerError?
}

extension CleanupPlan {
    /// Deletes each entry of the plan as the walk produces it (with `dryRun`, only reports it), in batches
    /// under `CleanupJournal`, and logs `deleted` with its path and reason. `each` hears of every entry, in
    /// order, once its batch is done. First it settles a batch that a crash left unfinished. One clean runs
    /// at a time per container: with `waitForLock` false, another clean under way fails with exit status 75;
    /// else `waiting` is called before this waits for it.
    package func execute(
        dryRun: Bool = false, log: EventLog, progress: @escaping (Int) -> Void = { _ in }, waitForLock: Bool = true,
        waiting: () -> Void = {}, shouldStop: @escaping () -> Bool = { false }, _ each: (CleanupOutcome) -> Void
    ) throws(ContainerError) -> CleanupSummary {
        let run = { (executor: inout CleanupExecutor) throws(ContainerError) in
            var unread = (count: 0, first: ContainerError?.none)
            let passedOver = { (error: ContainerError) in unread = (unread.count + 1, unread.first ?? error) }
            try forEachEntry(progress: progress, shouldStop: shouldStop, passedOver: passedOver) {
                entry throws(ContainerError) in
                try executor.run(entry).forEach(each)
            }
            (executor.summary.unreadable, executor.summary.firstUnreadable) = unread
            try executor.commit().forEach(each)
        }
        return try withExecutor(dryRun: dryRun, log: log, waitForLock: waitForLock, waiting: waiting, run)
    }

    /// Deletes `entries`, a plan made earlier (by `entries()`), each only while its name still holds the file
    /// planned; logs each deletion. `each` hears of every entry, in order, once its batch is done.
    package func execute(
        _ entries: some Sequence<CleanupEntry>, log: EventLog, _ each: (CleanupOutcome) -> Void = { _ in }
    ) throws(ContainerError) -> CleanupSummary {
        try withExecutor(dryRun: false, log: log, waitForLock: true) { executor throws(ContainerError) in
            for entry in entries { try executor.run(entry).forEach(each) }
            try executor.commit().forEach(each)
        }
    }

    private func withExecutor(
        dryRun: Bool, log: EventLog, waitForLock: Bool, waiting: () -> Void = {},
        _ body: (inout CleanupExecutor) throws(ContainerError) -> Void
    ) throws(ContainerError) -> CleanupSummary {
        guard !dryRun else {
            var executor = CleanupExecutor(plan: self, log: log, journal: nil)
            try body(&executor)
            return executor.summary
        }
        let journal = try CleanupJournal(container: container)
        var lock = try journal.lock(wait: false)
        if lock == nil, waitForLock {
            waiting()
            lock = try journal.lock(wait: true)
        }
        guard let lock else {
            throw ContainerError(.busy, "another clean of '\(container.root)' is under way: try again when it ends")
        }
        defer { withExtendedLifetime(lock) {} }
        try journal.recover(log: log)
        var executor = CleanupExecutor(plan: self, log: log, journal: journal)
        try body(&executor)
        return executor.summary
    }
}

/// Carries out planned entries a batch at a time (see `CleanupJournal`).
private struct CleanupExecutor {
    static let batchSize = 256

    let plan: CleanupPlan
    let log: EventLog
    /// Nil for a dry run.
    let journal: CleanupJournal?
    var summary = CleanupSummary()
    /// Entries waiting for their batch.
    var batch: [CleanupEntry] = []
    /// The folders of the batch, open: most entries share one.
    var folders: [[FileName]: SharedDescriptor] = [:]

    init(plan: CleanupPlan, log: EventLog, journal: CleanupJournal?) {
        self.plan = plan
        self.log = log
        self.journal = journal
    }

    /// Adds `entry`; returns the outcomes of a batch when this completes one (a dry run reports at once).
    mutating func run(_ entry: CleanupEntry) throws(ContainerError) -> [CleanupOutcome] {
        guard journal != nil else {
            summary.planned += 1
            return [outcome(entry, .planned)]
        }
        batch.append(entry)
        return batch.count >= Self.batchSize ? try commit() : []
    }

    /// Carries out the entries waiting: the intent, each set aside, the records, the removals (see
    /// `CleanupJournal`).
    mutating func commit() throws(ContainerError) -> [CleanupOutcome] {
        guard let journal, !batch.isEmpty else { return [] }
        defer {
            batch.removeAll(keepingCapacity: true)
            folders.removeAll()
        }
        let items = batch.map { item(for: $0) }
        try journal.write(items, after: try log.lastSeq())
        var results = items.map { setAside($0) }
        let aside = results.indices.filter { if case .deleted = results[$0] { true } else { false } }
        do {
            var records = EncodedEvents(reservingCapacity: aside.count)
            for index in aside {
                records.appendDeleted(path: items[index].path, reason: batch[index].reason, size: batch[index].bytes)
            }
            if !records.isEmpty { _ = try log.append(records, durable: true) }
        } catch {
            // The records may or may not have reached the log (a failed fsync): settle the batch now by what the
            // log holds, as the next clean would; if that fails too, the asides and the intent wait for it.
            try? journal.recover(log: log)
            throw error
        }
        var settled = true
        for index in aside {
            guard let failure = removeAside(items[index]) else { continue }
            // Logged as deleted, but it (or some of a folder) stays aside: the intent stays, and the next clean
            // finishes the deletion its record already states. The log says so meanwhile.
            results[index] = .failed(failure)
            settled = false
            try log.append(
                Event(
                    .error,
                    [
                        "during": .string("clean"), "path": .path(items[index].path),
                        "errno": .int(Int64(failure.cause?.rawValue ?? 0)),
                        "message": .string("not yet wholly deleted, the next clean finishes it: \(failure.message)"),
                    ]))
        }
        try syncFolders()
        if settled { try journal.remove() }
        return batch.indices.map { index in
            let result = results[index]
            summary.planned += 1
            switch result {
            case .deleted:
                summary.deleted += 1
                summary.bytesFreed += batch[index].bytes
            case .failed(let error):
                summary.failed += 1
                summary.firstFailure = summary.firstFailure ?? error
            case .planned, .gone, .changed:
                break
            }
            return outcome(batch[index], result)
        }
    }

    private func outcome(_ entry: CleanupEntry, _ result: CleanupOutcome.Result) -> CleanupOutcome {
        let path = plan.container.rootBytes + [0x2F] + entry.relativePath(appName: plan.container.appName)
        return CleanupOutcome(entry: entry, path: path, result: result)
    }

    private func item(for entry: CleanupEntry) -> CleanupJournal.Item {
        CleanupJournal.Item(
            components: plan.container.components(of: entry.place) + entry.components, reason: entry.reason,
            device: entry.device, inode: entry.inode)
    }

    /// The open folder at `components`, from the batch's cache.
    private mutating func folder(_ components: [FileName]) throws(ContainerError) -> CInt {
        if let open = folders[components] { return open.rawValue }
        let open = SharedDescriptor(try plan.container.openFolder(components))
        folders[components] = open
        return open.rawValue
    }

    /// Renames the entry aside if its name still holds the file planned: `.deleted` when it is aside.
    private mutating func setAside(_ item: CleanupJournal.Item) -> CleanupOutcome.Result {
        let folder: CInt
        do {
            folder = try self.folder(item.folder)
        } catch {
            return error.cause == .noSuchFile ? .gone : .failed(error)
        }
        switch item.setAside(in: folder) {
        case .success(true): return .deleted
        case .success(false): return .changed
        case .failure(.noSuchFile): return .gone
        case .failure(let error): return .failed(error.failure("delete", shownPath(item)))
        }
    }

    /// Removes the aside (a folder with everything in it); the error when something stays.
    private func removeAside(_ item: CleanupJournal.Item) -> ContainerError? {
        guard let folder = folders[item.folder]?.rawValue else { return nil }
        do {
            try item.remove(in: folder, shown: shownPath(item))
            return nil
        } catch {
            return error
        }
    }

    /// The item's absolute path, for messages.
    private func shownPath(_ item: CleanupJournal.Item) -> String {
        plan.container.root + "/" + String(decoding: item.path, as: UTF8.self)
    }

    /// Makes the batch's renames and removals durable.
    private func syncFolders() throws(ContainerError) {
        for (components, folder) in folders {
            do {
                try system_fsync(folder.rawValue)
            } catch {
                let shown = ([plan.container.root] + components.map(\.string)).joined(separator: "/")
                throw error.failure("sync", shown)
            }
        }
    }
}
