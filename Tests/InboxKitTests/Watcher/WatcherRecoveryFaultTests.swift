import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// The watcher's start-up recovery (`ArrivalPipeline.recoverInterruptedBatch`, in a `watch --once --on-arrival
/// move`) with each system call of the restart failing in turn, after a crash cut a move on arrival short: the item
/// is once in the Inbox or Documents and arrived once, every `moved` record names a file that is there, and once the
/// fault is lifted a clean restart finishes the move with its one `moved` record. The crash is built by hand: the
/// `arrived` record the watcher writes before it renames (with its disposition), and the rename done or not.
@Suite struct WatcherRecoveryFaultTests {
    enum CrashPoint: String, CaseIterable {
        /// Logged `arrived` for a move, not yet renamed.
        case arrived
        /// Renamed into Documents; no `moved` record yet.
        case renamed
        /// The same, and the file renamed in Documents since: only a walk of Documents finds it.
        case renamedAndRenamedAgain
    }

    struct World {
        let scratch: Scratch
        let point: CrashPoint
        let bytes: [UInt8]

        /// Where the item is once the move is finished, relative to the container.
        var settledPath: String {
            point == .renamedAndRenamedAgain ? "Documents/renamed by the user.bin" : "Documents/item.bin"
        }
    }

    static func crash(at point: CrashPoint) throws -> World {
        let scratch = try Scratch.withInbox()
        let world = World(scratch: scratch, point: point, bytes: pattern(20_000, seed: 11))
        _ = try scratch.inbox.deliver(data: Data(world.bytes), suggestedName: "item.bin")
        try makeFile(scratch.documentsPath("the user's own.txt"), Array("kept".utf8))
        // Sealed, then logged: what the watcher does before its rename.
        #expect(chmod(scratch.inboxPath("item.bin"), 0o444) == 0)
        let item = try status(scratch.inboxPath("item.bin"))
        _ = try scratch.inbox.log.append(
            Event(
                .arrived,
                [
                    "path": .path(Array("Documents/Inbox/item.bin".utf8)), "size": .int(Int64(world.bytes.count)),
                    "type": .string("data"), "id": .string(Identity(item).text), "disposition": .string("move"),
                ]), durable: true)
        if point != .arrived {
            try scratch.renameIntoDocuments(
                "item.bin", renamedTo: point == .renamedAndRenamedAgain ? "renamed by the user.bin" : nil)
        }
        return world
    }

    @Test(.long, arguments: CrashPoint.allCases)
    func everyCallOfTheWatchersRestart(_ point: CrashPoint) throws {
        try FaultSweep(
            setup: { try Self.crash(at: point) },
            operation: { world in try WatcherFaultTests.watchOnce(world.scratch.inbox) },
            check: { world, outcome, plan in
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                try Self.expectNothingLostNothingTwice(world, plan, when: "after the fault")
                try WatcherFaultTests.watchOnce(world.scratch.inbox)
                try Self.expectFinished(world, plan)
            },
            teardown: { $0.scratch.remove() }
        ).run("watcher restart (\(point.rawValue))", errors: RecoveryFaultTests.errors, collapsingRepeats: true)
    }

    /// A walk of Documents that fails at the start-up was taken for "never renamed": the item stayed in Documents
    /// with no `moved` record, and nothing looked for it again. Now the failure is logged, the move kept pending in
    /// the checkpoint, and the next start logs it.
    @Test func aWalkOfDocumentsThatFailsLeavesTheMoveForTheNextStart() throws {
        let counting = SyscallFaultPlan(only: "getdents64")
        let countingWorld = try Self.crash(at: .renamedAndRenamedAgain)
        try counting.run { try WatcherFaultTests.watchOnce(countingWorld.scratch.inbox) }
        countingWorld.scratch.remove()
        var failedInTheWalk = 0
        for index in 1...max(1, counting.calls.count) {
            let world = try Self.crash(at: .renamedAndRenamedAgain)
            defer { world.scratch.remove() }
            let plan = SyscallFaultPlan(failing: index, only: "getdents64", with: .ioError)
            let outcome = Result { try plan.run { try WatcherFaultTests.watchOnce(world.scratch.inbox) } }
            expectClearError(outcome, plan)
            let errors = try world.scratch.inbox.log.records(kinds: [.error])
            if errors.contains(where: { $0.fields["message"]?.contains("look in Documents for") == true }) {
                failedInTheWalk += 1
                #expect(try world.scratch.inbox.log.records(kinds: [.moved]).isEmpty, "\(plan.summary)")
                #expect(throws: ContainerError.self, "\(plan.summary): `watch --once` fails") { try outcome.get() }
            }
            try Self.expectNothingLostNothingTwice(world, plan, when: "after the fault")
            try WatcherFaultTests.watchOnce(world.scratch.inbox)
            try Self.expectFinished(world, plan)
        }
        #expect(failedInTheWalk >= 1, "no failed walk: \(counting.calls.count) getdents64 calls")
    }

    /// The item once, in the Inbox or Documents; arrived once; at most one `moved` record, naming a file there.
    static func expectNothingLostNothingTwice(_ world: World, _ plan: SyscallFaultPlan, when: String) throws {
        let scratch = world.scratch
        let copies = try copies(world)
        #expect(copies.count == 1, "\(plan.summary): \(when): the item is at \(copies)")
        let log = try scratch.inbox.log.records()
        let moved = log.filter { $0.event == "moved" }.compactMap { $0.fields["to"] }
        #expect(moved.count <= 1, "\(plan.summary): \(when): moved twice: \(moved)")
        for to in moved {
            #expect(exists(scratch.container.root + "/" + to), "\(plan.summary): \(when): moved to '\(to)', not there")
        }
        #expect(log.filter { $0.event == "arrived" }.count == 1, "\(plan.summary): \(when): arrived again")
    }

    /// After a clean restart: in Documents where the crash point sends it, with one `moved` record and its write bit.
    static func expectFinished(_ world: World, _ plan: SyscallFaultPlan) throws {
        try expectNothingLostNothingTwice(world, plan, when: "after a clean restart")
        let scratch = world.scratch
        #expect(try copies(world) == [world.settledPath], "\(plan.summary): after a clean restart")
        let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["to"] }
        #expect(moved == [world.settledPath], "\(plan.summary): after a clean restart: moved records \(moved)")
        // A write bit that could not be given back is logged, and the move stands without it.
        let unrestored = try scratch.inbox.log.records(kinds: [.error]).contains {
            $0.fields["during"] == "restore the write bit"
        }
        if let mode = try? status(scratch.container.root + "/" + world.settledPath).mode, !unrestored {
            #expect(mode & 0o200 != 0, "\(plan.summary): after a clean restart: no write bit in Documents")
        }
    }

    /// Every name in the Inbox and Documents that holds the item, relative to the container.
    static func copies(_ world: World) throws -> [String] {
        try world.scratch.copies(of: world.bytes)
    }
}
