import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// Moves made by `link` and `unlink` where rename flags are refused (ARCHITECTURE.md, "Network and FUSE
/// filesystems"): a crash between the two leaves both names on one file, and each site's recovery finishes the move;
/// where `link` is refused too, the container is refused with 73 and a line naming the filesystem.
@Suite(.serialized) struct FuseMoveRecoveryTests {
    @Test func aRotationCutBetweenLinkAndUnlinkIsFinishedAtTheNextOpen() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let folder = scratch.outside("log")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let writer = try EventLog(directory: folder)
        _ = try writer.append([Event(.setup), Event(.setup)])
        // The crash: the rotated name linked, `events.jsonl` not yet unlinked.
        let rotated = folder + "/" + EventLog.rotatedName(2)
        #expect(link(folder + "/events.jsonl", rotated) == 0)
        let reopened = try EventLog(directory: folder)
        #expect(try reopened.append(Event(.arrived)) == 3)
        #expect(try status(rotated).linkCount == 1)
        let rotatedLines = try String(contentsOfFile: rotated, encoding: .utf8).split(separator: "\n")
        #expect(rotatedLines.count == 2, "nothing written through the rotated name")
        #expect(try reopened.records().map(\.seq) == [1, 2, 3])
    }

    @Test func aMoveJournalIntentFindingBothNamesUnlinksTheInboxName() throws {
        let mount = try FuseMount()
        let inbox = try Inbox(container: Container.create(at: mount.mountPoint + "/c", appName: "Mail"))
        _ = try inbox.deliver(data: Data("once".utf8), suggestedName: "item.txt")
        let inboxPath = inbox.container.path(.inbox) + "/item.txt"
        let documentsPath = inbox.container.path(.documents) + "/item.txt"
        do {
            let record = try MoveJournal(container: inbox.container).begin(
                MoveJournal.Intent(
                    name: try name("item.txt"), identity: Identity(try status(inboxPath)), seq: inbox.log.lastSeq()))
            // The mover dies between the `link` into Documents and the `unlink` of the Inbox name.
            #expect(link(inboxPath, documentsPath) == 0)
            withExtendedLifetime(record) {}
        }
        #expect(inbox.recoverInterruptedMoves().isEmpty)
        #expect(try inbox.log.records(kinds: [.error]).isEmpty)
        #expect(!exists(inboxPath))
        #expect(try readFile(documentsPath) == Array("once".utf8))
        let moved = try inbox.log.records(kinds: [.moved])
        #expect(moved.count == 1 && moved.first?.fields["to"] == "Documents/item.txt")
    }

    @Test func aDeliveryCutBetweenLinkAndUnlinkLosesItsStagingNameAtTheNextSweep() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("once".utf8), suggestedName: "item.txt")
        // The crash: the Inbox name linked, the staging name (young: not yet abandoned) not unlinked.
        #expect(link(scratch.inboxPath("item.txt"), scratch.inboxPath(".inbox-staging.1.2")) == 0)
        #expect(try scratch.inbox.sweepAbandonedStaging().isEmpty)
        #expect(try scratch.inboxEntries() == ["item.txt"])
        #expect(try status(scratch.inboxPath("item.txt")).linkCount == 1)
        #expect(try scratch.inbox.log.records(kinds: [.deleted]).isEmpty)
    }

    @Test func whereLinkIsRefusedTooADeliveryFailsWith73NamingTheFilesystem() throws {
        let mount = try FuseMount()
        let inbox = try Inbox(container: Container.create(at: mount.mountPoint + "/c", appName: "Mail"))
        let plan = SyscallFaultPlan(forcing: ("linkat", .notPermitted))
        let failure = plan.run {
            Result { () throws(ContainerError) in _ = try inbox.deliver(data: Data("x".utf8), suggestedName: "x.txt") }
        }
        guard case .failure(let error) = failure else {
            Issue.record("delivered where link is refused")
            return
        }
        #expect(error.code == .cannotCreate && error.exitStatus == 73)
        #expect(error.message.contains("fuse") && !error.message.contains("\n"), "\(error.message)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox.container.path(.inbox)).isEmpty)
    }
}
