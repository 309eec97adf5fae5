import AppContainer
import Glibc

/// A file written and fsynced under a staging name in the Inbox, and the name it is to have.
package struct StagedDelivery {
    package let staging: FileName
    let name: FileName
    package let status: FileStatus
    /// The source as an error names it.
    let shown: String
}

/// What `Inbox.place` did with staged files.
package struct Placement {
    /// The files now in the Inbox: the index of each in the staged list, and its item.
    package var placed: [(index: Int, item: InboxItem)] = []
    /// The staged files still under their staging names (never placed, or taken back out), by index.
    package var notPlaced: [Int] = []
    /// Whether the records were written (with the files placed, or none).
    package var recorded = false
    package var error: ContainerError?

    var items: [InboxItem] { placed.map(\.item) }
}

/// Staged files written but not yet synced (ARCHITECTURE.md, "Delivery"). Each file's writeback starts when it is
/// handed over; `syncAll` makes them durable together before they are placed: an fsync each for a few, one
/// `syncfs` of their filesystem for `syncfsFrom` or more (it writes the inode tables and flushes the disk's cache
/// once for all, and reports any writeback error on the filesystem since the first file was opened). At most
/// `openLimit` stay open: past it they are synced on the way. Once a sync fails, every later `syncAll` throws that
/// failure: no file of the batch is trusted.
package final class StagedWrites {
    static let openLimit = 256
    static let syncfsFrom = 8

    private var open: [CInt] = []
    private var failure: Errno?

    package init() {}

    deinit {
        // Files never synced are never placed: their staging names are removed or swept.
        for fd in open { _ = try? system_close(fd) }
    }

    /// Takes `file` over and starts its writeback.
    func add(_ file: consuming FileDescriptor) throws(Errno) {
        let fd = file.release()
        open.append(fd)
        try system_startWriteback(fd)
        if open.count >= Self.openLimit { syncOpen() }
    }

    /// Takes over every file `other` holds, and its failure: synced with this batch's, `other` left empty.
    package func take(_ other: StagedWrites) {
        open += other.open
        other.open.removeAll()
        failure = failure ?? other.failure
        other.failure = nil
        if open.count >= Self.openLimit { syncOpen() }
    }

    /// Makes every file handed over so far durable and closes it, now: a failure is kept for `syncAll` to throw.
    package func syncAhead() {
        syncOpen()
    }

    /// Makes every file handed over durable and closes it; throws the first failure since the batch began.
    func syncAll() throws(Errno) {
        syncOpen()
        if let failure { throw failure }
    }

    private func syncOpen() {
        func note(_ body: () throws(Errno) -> Void) {
            do throws(Errno) { try body() } catch { failure = failure ?? error }
        }
        if open.count >= Self.syncfsFrom {
            note { () throws(Errno) in try system_syncfs(open[0]) }
        } else {
            for fd in open { note { () throws(Errno) in try system_fsync(fd) } }
        }
        // A failed close can mean a lost write on some filesystems.
        for fd in open { note { () throws(Errno) in try system_close(fd) } }
        open.removeAll(keepingCapacity: true)
    }
}

extension Inbox {
    /// Makes a file in the Inbox folder, lets `write` fill it, names it `staging`, and hands it to `writes`, which
    /// fsyncs and closes it before it is placed; removes it when anything fails, and rethrows. The file is unnamed
    /// while it is made and written (`UnnamedFile`): the folder's lock is not held while the filesystem finds it an
    /// inode, so concurrent importers of one Inbox do not wait for each other there.
    package func stage(
        _ staging: FileName, named name: FileName, shown: String, in folder: CInt, writes: StagedWrites,
        write: (borrowing FileDescriptor) throws -> Void
    ) throws -> StagedDelivery {
        var named = false
        do {
            let file = try UnnamedFile(in: folder, .writeOnly, mode: 0o444)
            do {
                try write(file.descriptor)
                try file.name(staging, unique: true)
            } catch {
                // A staging name of an unnamed file the removal misses is swept later (`sweepAbandonedStaging`).
                _ = try? file.discard()
                throw error
            }
            named = true
            let descriptor = file.take()
            let status = try descriptor.fileStatus()
            try writes.add(descriptor)
            return StagedDelivery(staging: staging, name: name, status: status, shown: shown)
        } catch {
            // A hidden staging file the unlink misses is swept later (`sweepAbandonedStaging`).
            if named { _ = try? system_unlinkat(folder, staging) }
            throw error
        }
    }

    /// Under the event log's lock (ARCHITECTURE.md, "Delivery"): once `writes` has synced every staged file, renames
    /// them into the Inbox (stopping at the first that fails), fsyncs the folder, and logs what `records` makes of
    /// the `delivered` record of each file placed (by default, those records). If the folder or the records fail,
    /// the files go back to their staging names. Staging files are left for the caller to remove.
    package func place(
        _ staged: [StagedDelivery], writes: StagedWrites, in folder: CInt,
        records: ([(index: Int, record: Event)]) -> [Event] = { $0.map(\.record) }
    ) -> Placement {
        do throws(Errno) {
            try writes.syncAll()
        } catch {
            return Placement(
                placed: [], notPlaced: Array(staged.indices), error: error.failure("sync", container.path(.inbox)))
        }
        var placed: [(index: Int, name: FileName)] = []
        // Placed files that could not be taken back out after a failure: still delivered, and reported so.
        var stuck: Set<Int> = []
        var failure: ContainerError?
        var recorded = false
        do throws(ContainerError) {
            try log.appendWhileLocked(
                { () throws(ContainerError) -> [Event] in
                    for (index, file) in staged.enumerated() {
                        do throws(Errno) {
                            let final = try ClashNaming.inbox.firstFree(for: file.name) { candidate throws(Errno) in
                                try renameNoReplace(folder, file.staging, folder, candidate)
                            }
                            placed.append((index, final))
                        } catch {
                            failure = error.failure("deliver", file.shown)
                            break
                        }
                    }
                    guard !placed.isEmpty else { return records([]) }
                    do throws(Errno) {
                        try system_fsync(folder)
                    } catch {
                        stuck = takeBack(placed, of: staged, in: folder)
                        throw error.failure("sync", container.path(.inbox))
                    }
                    return records(
                        placed.map { index, name in
                            let record = Event(
                                .delivered,
                                [
                                    "path": .path(loggedPath(.inbox, name)), "size": .int(staged[index].status.size),
                                    "id": .string(Identity(staged[index].status).text),
                                ])
                            return (index, record)
                        })
                }, undo: { stuck = takeBack(placed, of: staged, in: folder) })
            recorded = true
        } catch {
            placed.removeAll { !stuck.contains($0.index) }
            failure = error
        }
        let kept = Set(placed.map(\.index))
        return Placement(
            placed: placed.map { ($0.index, InboxItem(inbox: self, name: $0.name, status: staged[$0.index].status)) },
            notPlaced: staged.indices.filter { !kept.contains($0) }, recorded: recorded, error: failure)
    }

    /// Takes files whose `delivered` record could not be written back out of the Inbox, each to its own staging
    /// name (which the watcher ignores). Returns the indexes of those that could not be renamed: they stay in the
    /// Inbox, delivered after all, for the watcher to arrive.
    private func takeBack(_ placed: [(index: Int, name: FileName)], of staged: [StagedDelivery], in folder: CInt)
        -> Set<Int>
    {
        var stuck: Set<Int> = []
        for (index, name) in placed {
            do throws(Errno) {
                try renameNoReplace(folder, name, folder, staged[index].staging)
            } catch {
                stuck.insert(index)
            }
        }
        // Unsynced, a crash may bring a file back under its name: then it arrives, and nothing is lost.
        _ = try? system_fsync(folder)
        return stuck
    }
}

extension Inbox {
    /// Under the event log's lock, which a placement holds across its renames: a delivery's staging name among
    /// `names` that shares its file (device and inode) with a visible name is a rename by `link` and `unlink`
    /// (ARCHITECTURE.md, "Network and FUSE filesystems") that a crash cut between the two. Its staging name is
    /// unlinked, whatever its age: the file stays, delivered. Returns the staging names unlinked so.
    func finishInterruptedPlacements(_ names: [FileName], in folder: CInt) throws(ContainerError) -> Set<FileName> {
        let staging = names.filter(Self.isStagingName)
        guard !staging.isEmpty else { return [] }
        var finished: Set<FileName> = []
        var failure: Errno?
        try log.appendWhileLocked(
            { () throws(ContainerError) -> [Event] in
                do throws(Errno) {
                    var placed: [FileID: FileName] = [:]
                    for name in names where !name.isHidden {
                        if let status = try fileStatusIfPresent(in: folder, name) { placed[status.fileID] = name }
                    }
                    for name in staging {
                        guard let status = try fileStatusIfPresent(in: folder, name),
                            let visible = placed[status.fileID],
                            try finishInterruptedMove(folder, name, folder, visible)
                        else { continue }
                        finished.insert(name)
                    }
                } catch {
                    failure = error
                }
                return []
            }, undo: {})
        if let failure { throw failure.failure("finish the deliveries cut short in", container.path(.inbox)) }
        return finished
    }
}
