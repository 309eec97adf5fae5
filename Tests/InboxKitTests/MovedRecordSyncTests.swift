import AppContainer
import Foundation
import Synchronization
import Testing

@testable import InboxKit

/// A batch's `moved` records are written at once but made durable by the next batch's fsync, or on their own
/// once `ArrivalPipeline.syncDelay` has passed; what they settle is handed on only then (ARCHITECTURE.md, "The
/// hot path").
@Suite struct MovedRecordSyncTests {
    @Test func aBatchsMovedRecordsShareTheNextBatchsFsyncAndSettleAfterIt() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        for name in ["a.txt", "b.txt"] {
            try Data("\(name)\n".utf8).write(to: URL(fileURLWithPath: scratch.inboxPath(name)))
        }
        // Every system call of this thread counted in order; each settled batch noted with how many had been made.
        let plan = SyscallFaultPlan()
        let settled = Mutex<[(names: [String], calls: Int)]>([])
        var options = WatchOptions()
        options.onArrival = .move
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
            for name in ["a.txt", "b.txt"] { watcher.queue.push(try #require(FileName(name))) }
            // One turn takes both names (a watcher of its own goes on while names are queued), then the start-up
            // scan: `once` is done.
            #expect(try session.turn() == false)
            try session.close()
        }

        let calls = plan.calls
        // The two moves, then the checkpoint's replacement of its file.
        let renames = Array(calls.indices.filter { calls[$0] == "renameat2" }.prefix(2))
        try #require(renames.count == 2, "\(calls)")
        // Between the two renames: Documents and the Inbox for a.txt, then b.txt's phase 1, whose fsync of the log
        // makes a.txt's `moved` record durable too. Before, that record had an fsync of its own: four.
        #expect(calls[renames[0]..<renames[1]].filter { $0 == "fsync" }.count == 3, "\(calls)")
        let order = settled.withLock { $0 }
        try #require(order.map(\.names) == [["a.txt"], ["b.txt"]], "\(order)")
        // a.txt is settled once b.txt's phase 1 has synced the log; b.txt once its record was synced on its own.
        #expect(order[0].calls > renames[1])
        #expect(calls[renames[1]..<order[1].calls].filter { $0 == "fsync" }.count >= 3, "\(calls)")

        let moved = try scratch.inbox.log.records(kinds: ["moved"])
        #expect(moved.count == 2)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: scratch.container.path(.documents)).sorted() == [
                "Inbox", "a.txt", "b.txt",
            ])
    }
}
