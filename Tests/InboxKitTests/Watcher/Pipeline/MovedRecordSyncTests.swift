import AppContainer
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// Where phase 1 is fsynced (a deletion, a handler), a batch's `deleted` or `moved` records are written at once but
/// made durable by a later batch's fsync, or on their own once `GroupCommit.syncDelay` has passed; what they
/// settle is handed on only then. A move on arrival fsyncs nothing before its rename: its `arrived` and `moved`
/// records are made durable together, after its folders' fsync (ARCHITECTURE.md, "Group commit across batches").
@Suite struct MovedRecordSyncTests {
    /// Three names, a batch each, on arrival `disposition`, every system call of the thread counted in order; returns
    /// the calls and each settled batch with how many calls had been made by then.
    func watchOnce(_ scratch: Scratch, _ names: [String], _ disposition: Disposition) throws
        -> (calls: [String], settled: [(names: [String], calls: Int)])
    {
        for name in names {
            try Data("\(name)\n".utf8).write(to: URL(fileURLWithPath: scratch.inboxPath(name)))
        }
        let plan = SyscallFaultPlan()
        let settled = Mutex<[(names: [String], calls: Int)]>([])
        var options = WatchOptions()
        options.onArrival = disposition
        options.once = true
        options.maxBatch = 1
        options.cleanInterval = nil
        options.onSettled = { arrivals in
            let names = arrivals.map { $0.item.name.string }
            settled.withLock { $0.append((names, plan.calls.count)) }
            return true
        }
        let watcher = Watcher(inbox: scratch.inbox, options: options)
        try plan.run {
            let session = try WatchSession(watcher, start: .blocking)
            for name in names { watcher.queue.push(try #require(FileName(name))) }
            // One turn takes the three names (a watcher of its own goes on while names are queued), then the
            // start-up scan: `once` is done.
            #expect(try session.turn() == false)
            try session.close()
        }
        return (plan.calls, settled.withLock { $0 })
    }

    /// Where the three items' renames are in `calls` (the first three: the checkpoint's replacement of its file
    /// comes after them).
    func threeRenames(_ calls: [String]) throws -> [Int] {
        let renames = Array(calls.indices.filter { calls[$0] == "renameat2" }.prefix(3))
        try #require(renames.count == 3, "\(calls)")
        return renames
    }

    @Test func aBatchsDeletedRecordsShareALaterBatchsFsyncAndSettleAfterIt() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let names = ["a.txt", "b.txt", "c.txt"]
        let (calls, order) = try watchOnce(scratch, names, .delete)

        // Each deletion's rename aside.
        let renames = try threeRenames(calls)
        // Each batch is prepared and logged (phase 1, on the preparing thread) while the one before is applied; under
        // the fault plan, before it. Between the first two renames: Documents and the Inbox for a.txt, and c.txt's
        // phase 1, whose fsync of the log makes a.txt's `deleted` record durable too. Without the group commit, that
        // record had an fsync of its own: four.
        #expect(calls[renames[0]..<renames[1]].filter { $0 == "fsync" }.count == 3, "\(calls)")
        // a.txt is settled once c.txt's phase 1 is known to have synced the log (c.txt applied); b.txt and c.txt,
        // whose records no later phase 1 came for, once the log was synced before `watch-stopped`.
        try #require(order.map(\.names) == [["a.txt"], ["b.txt", "c.txt"]], "\(order)")
        #expect(order[0].calls > renames[2])
        #expect(calls[renames[2]..<order[1].calls].filter { $0 == "fsync" }.count >= 3, "\(calls)")

        #expect(try scratch.inbox.log.records(kinds: [.deleted]).count == 3)
        #expect(try scratch.inboxEntries().isEmpty && scratch.documentsEntries().isEmpty)
    }

    @Test func aMoveOnArrivalIsRenamedBeforeAnyFsyncAndItsRecordsAreMadeDurableTogether() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let names = ["a.txt", "b.txt", "c.txt"]
        let (calls, order) = try watchOnce(scratch, names, .move)

        let renames = try threeRenames(calls)
        // Under the fault plan, a.txt's and b.txt's phase 1 (each one `write` of the log) come before a.txt's rename
        // with no fsync after them; between the first two renames: a.txt's phase 2 (Documents, the Inbox, its
        // `moved` record, the log's fsync, which makes its `arrived` durable too), then c.txt's phase 1, unsynced.
        let beforeFirst = calls[..<renames[0]]
        let lastFsync = beforeFirst.lastIndex(of: "fsync") ?? 0
        #expect(beforeFirst[lastFsync...].filter { $0 == "write" }.count == 2, "\(calls)")
        let between = calls[renames[0]..<renames[1]].filter { $0 == "fsync" || $0 == "write" }
        #expect(between == ["fsync", "fsync", "write", "fsync", "write"], "\(calls)")
        // Each is settled by its own phase 2, before the next one's rename.
        try #require(order.map(\.names) == [["a.txt"], ["b.txt"], ["c.txt"]], "\(order)")
        #expect(order[0].calls < renames[1] && order[1].calls < renames[2])

        let log = scratch.inbox.log
        #expect(try log.records(kinds: [.arrived]).count == 3 && log.records(kinds: [.moved]).count == 3)
        #expect(try scratch.documentsEntries() == names)
    }

    /// A watcher, of its own or in a pool, with no fault plan, has a batch's folders fsynced on another thread while
    /// it goes on with the next batch, and the batch's `moved` records appended once that fsync is done: whatever it
    /// settles has its record in the log already, and arrivals are settled in the order they were applied, each once.
    @Test(arguments: [false, true])
    func movesSettleOnlyOnceTheirRecordsFollowTheFoldersFsyncOnAnotherThread(pooled: Bool) async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let count = 400
        let staging = try stageFiles(scratch, count: count)
        let log = scratch.inbox.log
        // Each settled name, and those whose `moved` record was not in the log when they were settled.
        let settled = Guarded<[String]>([])
        let unlogged = Guarded<[String]>([])
        let sawSyncThread = Guarded(false)
        var options = WatchOptions()
        options.onArrival = .move
        options.maxBatch = 4
        options.cleanInterval = nil
        options.onSettled = { arrivals in
            let moved = Set(((try? log.records(kinds: [.moved])) ?? []).compactMap { $0.fields["from"] })
            let names = arrivals.map { $0.item.name.string }
            let missing = names.filter { !moved.contains("Documents/Inbox/" + $0) }
            settled.update { $0 += names }
            unlogged.update { $0 += missing }
            if threadNames().contains("inbox-sync") { sawSyncThread.update { $0 = true } }
            return true
        }
        let pool = WatchPool(threads: 2, maxThreads: 2)
        let running = try InProcessWatcher(Watcher(inbox: scratch.inbox, options: options), in: pooled ? pool : nil)
        for index in 0..<count {
            try #require(rename(staging + "/f\(index).txt", scratch.inboxPath("f\(index).txt")) == 0)
        }
        #expect(waitUntil(timeout: 60, interval: 0.001) { settled.value.count >= count })
        #expect(running.stop() == nil)
        pool.close()

        #expect(sawSyncThread.value)
        #expect(unlogged.value.count == 0, "settled before their moved records: \(unlogged.value.prefix(5))")
        let arrived = try log.records(kinds: [.arrived]).compactMap { $0.fields["path"] }
        #expect(settled.value.map { "Documents/Inbox/" + $0 } == arrived)
        let moved = try log.records(kinds: [.moved]).compactMap { $0.fields["from"] }
        #expect(moved.count == count && Set(moved) == Set(arrived))
        #expect(try scratch.documentsEntries().count == count)
        #expect(try log.records(kinds: [.error]).isEmpty)
    }
}
