import AppContainer
import Dispatch
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// A watcher of its own that moves or deletes on arrival prepares the next batch on a second thread while it applies
/// the one before (ARCHITECTURE.md, "The hot path"): every file still arrives once and moves once.
@Suite(.serialized) struct OverlappedBatchesTests {
    /// Under a test's fault plan the next batch is prepared before the batch before it is applied, one of the orders
    /// the two threads may take. A file in both is left to the first: without that it would arrive twice, and its
    /// second seal could reach it in Documents.
    @Test func aFileInTwoOverlappingBatchesArrivesOnceAndKeepsItsWriteBitInDocuments() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let pipeline = try movingPipeline(scratch, files: ["a.txt", "b.txt"])
        defer { pipeline.prepareAhead?.stop() }
        let a = try name("a.txt")
        let b = try name("b.txt")
        var arrivals: [Arrival] = []
        let plan = SyscallFaultPlan()
        try plan.run {
            arrivals += try pipeline.process([a], more: true)
            #expect(arrivals.isEmpty, "a.txt is being prepared, not yet applied")
            arrivals += try pipeline.process([a, b], more: true)
            arrivals += try pipeline.finishPrepared()
        }

        #expect(arrivals.map(\.item.name.string) == ["a.txt", "b.txt"])
        #expect(try scratch.inbox.log.records(kinds: [.arrived]).count == 2)
        #expect(try scratch.inbox.log.records(kinds: [.moved]).count == 2)
        #expect(try scratch.inbox.log.records(kinds: [.error]).isEmpty)
        #expect(try scratch.documentsEntries() == ["a.txt", "b.txt"])
        for file in ["a.txt", "b.txt"] {
            #expect(try status(scratch.documentsPath(file)).mode & 0o200 != 0, "\(file) got its write bit back")
        }
        #expect(plan.calls.contains("renameat2"))
    }

    /// The files of the batch applied last are closed by the next batch's preparation (on the preparing thread,
    /// where the renaming thread does not wait for them), before it opens any: never more than two batches open.
    /// Under the fault plan each preparation runs at its start, so the calls come in that order.
    @Test func theBatchAppliedLastIsClosedByTheNextPreparationBeforeItOpensAFile() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let pipeline = try movingPipeline(scratch, files: ["a.txt", "b.txt", "c.txt"])
        defer { pipeline.prepareAhead?.stop() }
        let plan = SyscallFaultPlan()
        var third: ArraySlice<String> = []
        try plan.run {
            _ = try pipeline.process([try name("a.txt")], more: true)
            _ = try pipeline.process([try name("b.txt")], more: true)  // a.txt applied
            // Two batches open: b.txt prepared, a.txt applied and waiting to be let go.
            #expect(openDescriptors(under: scratch.documentsPath("")) == ["Inbox/b.txt", "a.txt"])
            let before = plan.calls.count
            _ = try pipeline.process([try name("c.txt")], more: true)  // c.txt prepared, b.txt applied
            third = plan.calls[before...]
            #expect(openDescriptors(under: scratch.documentsPath("")) == ["Inbox/c.txt", "b.txt"])
            _ = try pipeline.finishPrepared()
        }

        let closes = third.indices.filter { third[$0] == "close" }
        let firstOpen = try #require(third.firstIndex(of: "openat"))
        #expect(closes.count == 1, "a.txt's file, and no other: \(Array(third))")
        #expect(closes.allSatisfy { $0 < firstOpen }, "closed before c.txt is opened: \(Array(third))")
        #expect(openDescriptors(under: scratch.documentsPath("")).isEmpty, "finishPrepared lets every file go")
        #expect(try scratch.documentsEntries() == ["a.txt", "b.txt", "c.txt"])
        #expect(try scratch.inbox.log.records(kinds: [.moved]).count == 3)
    }

    /// Files renamed into the Inbox while the watcher runs, in batches of 8 so that many overlap: each is in
    /// Documents once, with one `arrived` and one `moved` record and its write bit, prepared on the second thread;
    /// once they are all in, the watcher holds none of them open.
    @Test func aBurstMovedWithOverlappingBatchesMovesEachFileOnce() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let count = 2_000
        let staging = try stageFiles(scratch, count: count)
        var options = WatchOptions()
        options.onArrival = .move
        options.maxBatch = 8
        options.cleanInterval = nil
        let running = try InProcessWatcher(Watcher(inbox: scratch.inbox, options: options))
        #expect(threadNames().contains("inbox-prepare"))
        for index in 0..<count {
            try #require(rename(staging + "/f\(index).txt", scratch.inboxPath("f\(index).txt")) == 0)
        }
        #expect(waitUntil(timeout: 60, interval: 0.001) { (try? scratch.documentsEntries().count) == count })
        #expect(waitUntil(timeout: 30, interval: 0.001) { openDescriptors(under: scratch.documentsPath("")).isEmpty })
        #expect(running.stop() == nil)

        #expect(try scratch.inboxEntries().isEmpty)
        let documents = try scratch.documentsEntries()
        #expect(Set(documents) == Set((0..<count).map { "f\($0).txt" }))
        for file in documents {
            #expect(try status(scratch.documentsPath(file)).mode & 0o200 != 0, "\(file) got its write bit back")
        }
        let arrived = try scratch.inbox.log.records(kinds: [.arrived]).compactMap { $0.fields["path"] }
        let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["from"] }
        #expect(arrived.count == count && Set(arrived).count == count)
        #expect(moved.count == count && Set(moved) == Set(arrived))
        #expect(try scratch.inbox.log.records(kinds: [.error]).isEmpty)
    }

    /// A pipeline that moves on arrival, with a preparing thread of its own, and `files` in the Inbox.
    private func movingPipeline(_ scratch: Scratch, files: [String]) throws -> ArrivalPipeline {
        for file in files { try makeFile(scratch.inboxPath(file), Array("\(file)\n".utf8)) }
        var options = WatchOptions()
        options.onArrival = .move
        options.cleanInterval = nil
        let threads = ArrivalPipeline.Threads(prepareAhead: try SideThread(name: "test-prepare"))
        return try ArrivalPipeline(inbox: scratch.inbox, options: options, handler: nil, threads: threads, wake: {})
    }
}
