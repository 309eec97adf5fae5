import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// `Inbox.moveToDocuments` with each system call failing in turn, then `recoverInterruptedMoves`: the file is
/// in the Inbox or in Documents, once, and a `moved` record exists iff it is in Documents.
@Suite struct MoveFaultTests {
    struct World {
        let scratch: Scratch
        let bytes: [UInt8]
        /// The other hard link, outside the container, for the copy path.
        let link: String?
    }

    static func sweep(hardLinked: Bool) -> FaultSweep<World> {
        FaultSweep(
            setup: {
                let scratch = try Scratch.withInbox()
                let bytes = pattern(20_000)
                _ = try scratch.inbox.deliver(data: Data(bytes), suggestedName: "item.bin")
                var link: String?
                if hardLinked {
                    link = scratch.outside("link.bin")
                    guard Glibc.link(scratch.inboxPath("item.bin"), scratch.outside("link.bin")) == 0 else {
                        throw Errno(rawValue: errno)
                    }
                }
                return World(scratch: scratch, bytes: bytes, link: link)
            },
            operation: { world in _ = try world.scratch.inbox.moveToDocuments(try name("item.bin"), reason: "move") },
            check: checkMoved, teardown: { $0.scratch.remove() })
    }

    @Test func renamePath() throws {
        try Self.sweep(hardLinked: false).run("move (rename)")
    }

    @Test func copyPathForAHardLinkedItem() throws {
        try Self.sweep(hardLinked: true).run("move (copy, nlink 2)")
    }

    @Test func crossFilesystemPath() throws {
        try Self.sweep(hardLinked: false).run("move (EXDEV copy)", forcing: ("renameat2", .crossDevice))
    }
}

private func checkMoved(_ world: MoveFaultTests.World, _ outcome: Result<Void, any Error>, _ plan: SyscallFaultPlan)
    throws
{
    expectClearError(outcome, plan)
    expectRetriedInterrupt(outcome, plan)
    let scratch = world.scratch
    // Recovery settles every intent and ends it. It leaves a locked one for later, as it must, and the lock of a
    // failed move can outlive it for a moment in a process another test thread is spawning (which holds a copy of
    // every descriptor until its exec): so it runs again while an intent is left.
    var unlogged: [ContainerError] = []
    #expect(
        waitUntil(timeout: 10, interval: 0.001) {
            unlogged += scratch.inbox.recoverInterruptedMoves()
            return (try? scratch.journalEntries().contains { $0.hasSuffix(".intent") }) == false
        }, "\(plan.summary): intents left after recovery: \((try? scratch.journalEntries()) ?? [])")
    #expect(unlogged.isEmpty, "\(plan.summary): recovery could not log \(unlogged)")
    let inbox = try scratch.inboxEntries()
    let documents = try scratch.documentsEntries()
    #expect(inbox.allSatisfy { !$0.hasPrefix(".") }, "\(plan.summary): hidden names left in the Inbox: \(inbox)")
    let inInbox = try inbox.filter { try readFile(scratch.inboxPath($0)) == world.bytes }
    let inDocuments = try documents.filter { try readFile(scratch.documentsPath($0)) == world.bytes }
    #expect(
        inInbox.count + inDocuments.count == 1,
        "\(plan.summary): the item is in the Inbox \(inInbox) and Documents \(inDocuments)")
    #expect(documents == inDocuments, "\(plan.summary): other files in Documents: \(documents)")
    let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["to"] }
    #expect(
        moved == inDocuments.map { "Documents/" + $0 },
        "\(plan.summary): moved records \(moved), in Documents \(inDocuments)")
    if case .success = outcome { #expect(inDocuments.count == 1, "\(plan.summary): succeeded, not in Documents") }
    if let link = world.link {
        #expect(try readFile(link) == world.bytes, "\(plan.summary): the other hard link changed")
        #expect(try status(link).mode & 0o777 == 0o444, "\(plan.summary): the other hard link's mode changed")
    }
}
