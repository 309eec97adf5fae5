import AppContainer
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// The watcher's worker threads with their system calls failing in turn, the threads really running beside the
/// watcher's (a `threaded` fault plan; under any other, the preparing thread and the folder syncer run their jobs
/// inline, ARCHITECTURE.md, "The hot path"). Each call of one thread's lane fails in turn: the preparing thread
/// (`inbox-prepare`), the folder syncer (`inbox-sync`) or the `--exec` hooks (`inbox-hook`). After the faulty
/// `watch --once` and a clean one: each file once in the Inbox or Documents, arrived once, moved at most once and
/// only to where it is; for a move on arrival, every file in Documents with its one `moved` record.
@Suite struct ThreadedFaultSweepTests {
    final class World {
        let scratch: Scratch
        /// Each file's name and bytes.
        let files: [(String, [UInt8])]

        init(files count: Int) throws {
            scratch = try Scratch.withInbox()
            files = (0..<count).map { ("file-\($0).bin", pattern(4_000 + $0, seed: UInt64(20 + $0))) }
            for (name, bytes) in files { _ = try scratch.inbox.deliver(data: Data(bytes), suggestedName: name) }
        }
    }

    /// How many faulty runs found their call: with threads, a run may make fewer calls in a lane than the count.
    final class Tally: Sendable {
        let counts = Mutex((runs: 0, injected: 0))
        func note(_ plan: SyscallFaultPlan) {
            counts.withLock {
                $0.runs += 1
                if plan.injected != nil { $0.injected += 1 }
            }
        }
    }

    static func watchOnce(_ inbox: Inbox, exec: String?) throws {
        var options = WatchOptions()
        options.once = true
        options.onArrival = .move
        options.cleanInterval = nil
        // Two batches of two: the second is prepared on its thread while the first is applied.
        options.maxBatch = 2
        options.exec = exec
        options.jobs = 2
        // A fault that left a hook waiting would cost its timeout: kept short.
        options.hookTimeout = .seconds(5)
        try WatcherFaultTests.runRetryingBusy(inbox, options)
    }

    static func sweep(lane: String, tally: Tally) -> FaultSweep<World> {
        FaultSweep(
            setup: { try World(files: 4) },
            operation: { world in try watchOnce(world.scratch.inbox, exec: nil) },
            check: { world, outcome, plan in
                if plan.failing != nil { tally.note(plan) }
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                try expectNothingLostNothingTwice(world, plan, when: "after the fault")
                try watchOnce(world.scratch.inbox, exec: nil)
                try expectNothingLostNothingTwice(world, plan, when: "after a clean run")
                try expectAllMoved(world, plan)
            },
            teardown: { $0.scratch.remove() })
    }

    static let errors = [EIO, EINTR].map(Errno.init)

    @Test(arguments: ["inbox-prepare", "inbox-sync"])
    func everyCallOfAWorkerThreadOfAMoveOnArrival(_ lane: String) throws {
        let tally = Tally()
        let runs = try Self.sweep(lane: lane, tally: tally).run(
            "threaded \(lane)", errors: Self.errors, collapsingRepeats: true, lane: lane)
        let counts = tally.counts.withLock { $0 }
        #expect(counts.runs == runs)
        #expect(counts.injected * 2 >= runs, "\(lane): \(counts.injected) of \(runs) runs reached their call")
    }

    /// A hook thread's call failing while the pool's two hook threads run side by side (a sweep of every call there
    /// costs a hook process a run: too slow to keep): the first `poll` on the hooks' output fails. That item's hook
    /// could not be heard, so it is kept, answered once; the other is moved; a clean run asks neither again.
    @Test func aFailedCallOnAHookThreadKeepsItsItemAndAsksOnce() throws {
        let world = try World(files: 2)
        defer { world.scratch.remove() }
        let plan = SyscallFaultPlan(failing: 1, only: "poll", threaded: true, lane: "inbox-hook")
        try plan.run { try Self.watchOnce(world.scratch.inbox, exec: "echo move") }
        #expect(plan.injected?.name == "poll", "\(plan.summary)")
        try Self.expectNothingLostNothingTwice(world, plan, when: "after the fault")
        try Self.watchOnce(world.scratch.inbox, exec: "echo move")
        try Self.expectNothingLostNothingTwice(world, plan, when: "after a clean run")

        let scratch = world.scratch
        #expect(try scratch.inboxEntries().count == 1, "\(plan.summary): the item whose hook failed is kept")
        #expect(try scratch.documentsEntries().count == 1, "\(plan.summary): the other is moved")
        let handled = try scratch.inbox.log.records(kinds: [.handled])
        #expect(handled.count == 2, "\(plan.summary): each asked once: \(handled)")
        #expect(handled.filter { $0.fields["status"] == "127" }.count == 1, "\(plan.summary): \(handled)")
    }

    /// The plan counts only its lane's calls, and the worker threads run as threads: the watcher's own thread never
    /// makes the preparing thread's calls (under an unthreaded plan it does, inline).
    @Test func aThreadedPlanCountsItsLaneAlone() throws {
        let world = try World(files: 4)
        defer { world.scratch.remove() }
        let lane = SyscallFaultPlan(threaded: true, lane: "inbox-prepare")
        let mine = SyscallFaultPlan(threaded: true, lane: SyscallFaultPlan.threadName())
        try lane.run { try Self.watchOnce(world.scratch.inbox, exec: nil) }
        #expect(lane.calls.contains("fcntl_getlease"), "the preparing thread took and read leases: \(lane.calls)")
        try Self.expectAllMoved(world, lane)

        let again = try World(files: 4)
        defer { again.scratch.remove() }
        try mine.run { try Self.watchOnce(again.scratch.inbox, exec: nil) }
        #expect(!mine.calls.contains("fcntl_getlease"), "the watcher's thread prepared nothing: \(mine.calls)")
        #expect(mine.calls.contains("renameat2"), "it renamed: \(mine.calls)")
    }

    /// Each file once, in the Inbox or in Documents; no identity arrived or moved twice; every `moved` record
    /// names a file in Documents.
    static func expectNothingLostNothingTwice(_ world: World, _ plan: SyscallFaultPlan, when: String) throws {
        let scratch = world.scratch
        let inbox = try scratch.inboxEntries().map(scratch.inboxPath)
        let documents = try scratch.documentsEntries().map(scratch.documentsPath)
        for (name, bytes) in world.files {
            let copies = try (inbox + documents).filter { try readFile($0) == bytes }
            #expect(copies.count == 1, "\(plan.summary): \(when): '\(name)' is at \(copies)")
        }
        let log = try scratch.inbox.log.records()
        for kind in ["arrived", "moved"] {
            let ids = log.filter { $0.event == kind }.compactMap { $0.fields["id"] }
            #expect(Set(ids).count == ids.count, "\(plan.summary): \(when): \(kind) twice")
        }
        for to in log.filter({ $0.event == "moved" }).compactMap({ $0.fields["to"] }) {
            #expect(exists(scratch.container.root + "/" + to), "\(plan.summary): \(when): moved to '\(to)', not there")
        }
    }

    /// Every file in Documents, each with one `arrived` and one `moved` record.
    static func expectAllMoved(_ world: World, _ plan: SyscallFaultPlan) throws {
        let scratch = world.scratch
        #expect(try scratch.inboxEntries().isEmpty, "\(plan.summary): left in the Inbox")
        let documents = try scratch.documentsEntries().map { "Documents/" + $0 }.sorted()
        #expect(documents.count == world.files.count, "\(plan.summary): \(documents)")
        let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["to"] }.sorted()
        #expect(moved == documents, "\(plan.summary): moved records \(moved), Documents \(documents)")
        let arrived = try scratch.inbox.log.records(kinds: [.arrived])
        #expect(arrived.count == world.files.count, "\(plan.summary): \(arrived.count) arrived records")
    }
}
