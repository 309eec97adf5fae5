import AppContainer
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// The move journal's recovery with each system call of the restart failing in turn, after a crash left a move half
/// done (ARCHITECTURE.md, "The log never lies"): the item is never lost, an intent is ended only once its move is
/// settled and logged, and once the fault is lifted a clean restart settles it, with one `moved` record where the
/// item went to Documents. The crash is built by hand with the journal's own API, as in `RecoveryTests`.
@Suite struct RecoveryFaultTests {
    /// Where the mover died.
    enum CrashPoint: String, CaseIterable {
        /// Renamed into Documents; no `moved` record yet.
        case renamed
        /// The same, and the file renamed in Documents since: only a walk of Documents finds it.
        case renamedAndRenamedAgain
        /// A hard-linked item claimed for its copy, no copy made: rolled back.
        case claimed
        /// The copy made and noted linked: finished, the claim removed.
        case copyLinked
    }

    final class World {
        let scratch: Scratch
        let point: CrashPoint
        let bytes: [UInt8]
        /// What the faulty recovery could not log.
        var unlogged: [ContainerError] = []

        init(scratch: Scratch, point: CrashPoint, bytes: [UInt8]) {
            self.scratch = scratch
            self.point = point
            self.bytes = bytes
        }

        /// Where the item is once settled, relative to the container.
        var settledPath: String {
            switch point {
            case .renamed, .copyLinked: "Documents/item.bin"
            case .renamedAndRenamedAgain: "Documents/renamed by the user.bin"
            case .claimed: "Documents/Inbox/item.bin"
            }
        }

        var link: String { scratch.outside("item.bin") }
    }

    static func crash(at point: CrashPoint) throws -> World {
        let scratch = try Scratch.withInbox()
        let world = World(scratch: scratch, point: point, bytes: pattern(20_000, seed: 7))
        let journal = MoveJournal(container: scratch.container)
        let item = try name("item.bin")
        switch point {
        case .renamed, .renamedAndRenamedAgain:
            _ = try scratch.inbox.deliver(data: Data(world.bytes), suggestedName: "item.bin")
            try makeFile(scratch.documentsPath("the user's own.txt"), Array("kept".utf8))
            let identity = Identity(try status(scratch.inboxPath("item.bin")))
            let record = try journal.begin(
                MoveJournal.Intent(name: item, identity: identity, seq: scratch.inbox.log.lastSeq()))
            try scratch.renameIntoDocuments(
                "item.bin", renamedTo: point == .renamedAndRenamedAgain ? "renamed by the user.bin" : nil)
            withExtendedLifetime(record) {}  // the mover dies: its record goes, and with it the lock
        case .claimed, .copyLinked:
            try makeFile(world.link, world.bytes, mode: 0o644)
            #expect(link(world.link, scratch.inboxPath("item.bin")) == 0)
            let claim = try name(".inbox-claim.1.1")
            let record = try journal.begin(
                MoveJournal.Intent(
                    name: item, claim: claim, identity: Identity(try status(world.link)),
                    seq: scratch.inbox.log.lastSeq()))
            try system_renameat2(
                currentDirectory, scratch.inboxPath("item.bin"), currentDirectory, scratch.inboxPath(claim.string),
                .noReplace)
            if point == .copyLinked {
                try journal.note("try", item, in: record)
                try makeFile(scratch.documentsPath("item.bin"), world.bytes, mode: 0o644)
                try journal.note("linked", item, in: record)
            }
            withExtendedLifetime(record) {}
        }
        try scratch.waitForDeadMoversLocks()
        return world
    }

    static func sweep(_ point: CrashPoint) -> FaultSweep<World> {
        FaultSweep(
            setup: { try crash(at: point) },
            operation: { world in
                world.unlogged = world.scratch.inbox.recoverInterruptedMoves()
            },
            check: { world, _, plan in try expectRecovered(world, plan) },
            teardown: { $0.scratch.remove() })
    }

    @Test(arguments: CrashPoint.allCases)
    func everyCallOfTheMoveJournalsRecovery(_ point: CrashPoint) throws {
        try Self.sweep(point).run(
            "move journal recovery (\(point.rawValue))", errors: Self.errors, collapsingRepeats: true)
    }

    /// Recovery handles every error but ENOENT alike (it cannot tell, and tries again later; the other errors are
    /// swept by the move's own sweep, `MoveFaultTests`) and EINTR apart (the syscall layer retries it).
    static let errors = [EIO, EINTR].map(Errno.init)

    /// The bug this suite was written for: a walk of Documents that fails (a `getdents64` after every name a clash
    /// would give was looked at) was taken for "never renamed", the intent ended, and the item left in Documents with
    /// no `moved` record. Now the intent is kept, the failure logged and reported, and the next try logs the move.
    @Test func aWalkOfDocumentsThatFailsKeepsTheIntent() throws {
        let counting = SyscallFaultPlan(only: "getdents64")
        let countingWorld = try Self.crash(at: .renamedAndRenamedAgain)
        _ = counting.run { countingWorld.scratch.inbox.recoverInterruptedMoves() }
        countingWorld.scratch.remove()
        var keptByTheWalk = 0
        // The journal's own `getdents64` calls come first: each call in turn, the walk's among them.
        for index in 1...max(1, counting.calls.count) {
            let world = try Self.crash(at: .renamedAndRenamedAgain)
            defer { world.scratch.remove() }
            let scratch = world.scratch
            let plan = SyscallFaultPlan(failing: index, only: "getdents64", with: .ioError)
            let reports = Mutex<[String]>([])
            let unlogged = plan.run {
                scratch.inbox.recoverInterruptedMoves { error in reports.withLock { $0.append(error.message) } }
            }
            #expect(unlogged.isEmpty, "\(plan.summary): \(unlogged)")
            #expect(plan.injected != nil, "\(plan.summary)")
            if try scratch.journalEntries().isEmpty {
                try Self.expectSettled(world, plan, when: "the intent ended")
                continue
            }
            #expect(try scratch.inbox.log.records(kinds: [.moved]).isEmpty, "\(plan.summary)")
            let errors = try scratch.inbox.log.records(kinds: [.error])
            if errors.first?.fields["path"] == "Documents/Inbox/item.bin" { keptByTheWalk += 1 }
            #expect(errors.map { $0.fields["errno"] } == ["\(EIO)"], "\(plan.summary): \(errors)")
            #expect(reports.withLock { $0 }.count == 1, "\(plan.summary): and reported")
            #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
            try Self.expectSettled(world, plan, when: "at the next try")
        }
        #expect(keptByTheWalk >= 1, "no failed walk kept the intent: \(counting.calls.count) getdents64 calls")
    }

    /// After the faulty recovery: the item is still there; a `moved` record names a file that is there; an intent
    /// ended was settled (logged where it went to Documents); an intent kept says why. Then a clean recovery settles
    /// it.
    static func expectRecovered(_ world: World, _ plan: SyscallFaultPlan) throws {
        let scratch = world.scratch
        expectRetried(world, plan)
        let copies = try copies(world)
        #expect(!copies.isEmpty, "\(plan.summary): the item is lost")
        let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["to"] }
        #expect(moved.count <= 1, "\(plan.summary): moved twice: \(moved)")
        for to in moved {
            #expect(exists(scratch.container.root + "/" + to), "\(plan.summary): moved to '\(to)', not there")
        }
        let unlogged = world.unlogged
        if try scratch.journalEntries().isEmpty {
            try expectSettled(world, plan, when: "the intent ended")
        } else if plan.injected != nil {
            let errors = try scratch.inbox.log.records(kinds: [.error])
            #expect(!errors.isEmpty || !unlogged.isEmpty, "\(plan.summary): the intent is kept and nothing says why")
        }
        #expect(
            unlogged.allSatisfy { $0.message.contains(plan.error.description) && !$0.message.contains("\n") },
            "\(plan.summary): \(unlogged)")

        var again: [ContainerError] = []
        #expect(
            waitUntil(timeout: 10, interval: 0.001) {
                again += scratch.inbox.recoverInterruptedMoves()
                return (try? scratch.journalEntries().isEmpty) == true
            }, "\(plan.summary): intents left after a clean recovery: \((try? scratch.journalEntries()) ?? [])")
        #expect(again.isEmpty, "\(plan.summary): the clean recovery could not log \(again)")
        try expectSettled(world, plan, when: "after a clean recovery")
    }

    /// An injected EINTR is retried, and a recovery so interrupted ends as a clean one does.
    private static func expectRetried(_ world: World, _ plan: SyscallFaultPlan) {
        guard plan.error == .interrupted, let injected = plan.injected,
            !["close"].contains(injected.name)
        else { return }
        #expect(
            (try? world.scratch.journalEntries().isEmpty) == true, "\(plan.summary): EINTR was not retried")
    }

    /// Settled: no intent left, the item once, where its crash point sends it, with one `moved` record and its
    /// write bit in Documents and none in the Inbox; the other hard link untouched.
    static func expectSettled(_ world: World, _ plan: SyscallFaultPlan, when: String) throws {
        let scratch = world.scratch
        #expect(try scratch.journalEntries().isEmpty, "\(plan.summary): \(when): intents left")
        let copies = try copies(world)
        #expect(copies == [world.settledPath], "\(plan.summary): \(when): the item is at \(copies)")
        let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["to"] }
        if world.settledPath.hasPrefix("Documents/Inbox/") {
            #expect(moved.isEmpty, "\(plan.summary): \(when): rolled back, and logged moved to \(moved)")
        } else {
            #expect(moved == [world.settledPath], "\(plan.summary): \(when): moved records \(moved)")
            let mode = try status(scratch.container.root + "/" + world.settledPath).mode
            #expect(mode & 0o200 != 0, "\(plan.summary): \(when): no write bit in Documents")
        }
        if world.point == .claimed || world.point == .copyLinked {
            #expect(try readFile(world.link) == world.bytes, "\(plan.summary): \(when): the other hard link changed")
        }
    }

    /// Every name in the Inbox (claims included) and Documents that holds the item, relative to the container.
    static func copies(_ world: World) throws -> [String] {
        try world.scratch.copies(of: world.bytes)
    }
}
