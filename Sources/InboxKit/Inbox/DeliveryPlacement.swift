import AppContainer
import Glibc

/// A file written and fsynced under a staging name in the Inbox, and the name it is to have.
struct StagedDelivery {
    let staging: FileName
    let name: FileName
    let status: FileStatus
    /// The source as an error names it.
    let shown: String
}

/// What `Inbox.place` did with staged files.
struct Placement {
    /// The files now in the Inbox: the index of each in the staged list, and its item.
    var placed: [(index: Int, item: InboxItem)] = []
    /// The staged files still under their staging names (never placed, or taken back out), by index.
    var notPlaced: [Int] = []
    var error: ContainerError?

    var items: [InboxItem] { placed.map(\.item) }
}

extension Inbox {
    /// Creates `staging` in the Inbox folder, lets `write` fill it, fsyncs and closes it; removes it when anything
    /// fails, and rethrows.
    func stage(
        _ staging: FileName, named name: FileName, shown: String, in folder: CInt,
        write: (borrowing FileDescriptor) throws -> Void
    ) throws -> StagedDelivery {
        var created = false
        do {
            let file = try FileDescriptor(
                at: folder, staging, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o444)
            created = true
            try write(file)
            try file.sync()
            let status = try file.fileStatus()
            // Closed before the rename: a watcher finds no writer on the file it sees arrive.
            try file.close()
            return StagedDelivery(staging: staging, name: name, status: status, shown: shown)
        } catch {
            // A hidden staging file the unlink misses is swept later (`sweepAbandonedStaging`).
            if created { _ = try? system_unlinkat(folder, staging) }
            throw error
        }
    }

    /// Under the event log's lock (ARCHITECTURE.md, "Delivery"): renames the staged files into the Inbox
    /// (stopping at the first that fails), fsyncs the folder, and logs `delivered` for each (with `fields`
    /// added), then the records `then` makes from the number placed. If the folder or the records fail, the
    /// files go back to their staging names. Staging files are left for the caller to remove.
    func place(
        _ staged: [StagedDelivery], in folder: CInt, fields: [(key: String, value: EventValue)] = [],
        then trailing: (Int) -> [Event] = { _ in [] }
    ) -> Placement {
        var placed: [(index: Int, name: FileName)] = []
        // Placed files that could not be taken back out after a failure: still delivered, and reported so.
        var stuck: Set<Int> = []
        var failure: ContainerError?
        do throws(ContainerError) {
            try log.appendWhileLocked(
                { () throws(ContainerError) -> [Event] in
                    for (index, file) in staged.enumerated() {
                        do throws(Errno) {
                            let final = try ClashNaming.inbox.firstFree(for: file.name) { candidate throws(Errno) in
                                try system_renameat2(folder, file.staging, folder, candidate, .noReplace)
                            }
                            placed.append((index, final))
                        } catch {
                            failure = error.failure("deliver", file.shown)
                            break
                        }
                    }
                    guard !placed.isEmpty else { return trailing(0) }
                    do throws(Errno) {
                        try system_fsync(folder)
                    } catch {
                        stuck = takeBack(placed, of: staged, in: folder)
                        throw error.failure("sync", container.path(.inbox))
                    }
                    return placed.map { index, name in
                        var event = Event(
                            .delivered,
                            ["path": .path(loggedPath(.inbox, name)), "size": .int(staged[index].status.size)])
                        event.fields += fields
                        return event
                    } + trailing(placed.count)
                }, undo: { stuck = takeBack(placed, of: staged, in: folder) })
        } catch {
            placed.removeAll { !stuck.contains($0.index) }
            failure = error
        }
        let kept = Set(placed.map(\.index))
        return Placement(
            placed: placed.map { ($0.index, InboxItem(inbox: self, name: $0.name, status: staged[$0.index].status)) },
            notPlaced: staged.indices.filter { !kept.contains($0) }, error: failure)
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
                try system_renameat2(folder, name, folder, staged[index].staging, .noReplace)
            } catch {
                stuck.insert(index)
            }
        }
        // Unsynced, a crash may bring a file back under its name: then it arrives, and nothing is lost.
        _ = try? system_fsync(folder)
        return stuck
    }
}
