import AppContainer
import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// The watcher's start-up recovery looks at each name once, however many identities the log holds pending
/// (ARCHITECTURE.md, "Network and FUSE filesystems"): a filesystem that gave an item a new inode at every look once
/// left a loop's worth of `arrived` records for one name, and the restarted watcher spent minutes looking at the
/// same names (120 clash names and then all of Documents for each identity) before it started.
@Suite struct BoundedRecoveryTests {
    @Test func manyIdentitiesPendingForOneNameCostOneLookAName() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let documents = 50
        for index in 0..<documents {
            try Data("\(index)".utf8).write(to: URL(fileURLWithPath: scratch.documentsPath("d\(index).txt")))
        }
        // The item that is there, and 300 identities of the same name that no file has any more.
        try Data("item".utf8).write(to: URL(fileURLWithPath: scratch.inboxPath("a.pdf")))
        let item = Identity(try fileStatus(in: currentDirectory, scratch.inboxPath("a.pdf")))
        let pending = 300
        var records: [Event] = []
        for index in 0..<pending {
            let gone = try #require(Identity(text: "\(item.device):\(900_000 + index):4:1.0:1.0"))
            records.append(Self.arrived(gone))
        }
        records.append(Self.arrived(item))
        try scratch.inbox.log.append(records, durable: true)
        var options = WatchOptions()
        options.onArrival = .move
        options.cleanInterval = nil
        let pipeline = try ArrivalPipeline(inbox: scratch.inbox, options: options, handler: nil, wake: {})
        let counting = SyscallFaultPlan(only: "statx")
        try counting.run { try pipeline.recoverInterruptedBatch() }
        // Each name once (the Inbox's and Documents'), with room for the item's own move and the folders' looks:
        // not once an identity.
        #expect(counting.calls.count < documents + 40, "\(counting.calls.count) statx calls")
        #expect(try scratch.documentsEntries().contains("a.pdf"), "the item itself was moved")
        #expect(try scratch.inbox.log.records(kinds: [.moved]).count == 1)
    }

    private static func arrived(_ id: Identity) -> Event {
        Event(
            .arrived,
            [
                "path": .string("Documents/Inbox/a.pdf"), "id": .string(id.text), "disposition": .string("move"),
            ])
    }
}
