import AppContainer
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// A copying move that crashed part-way is finished or rolled back at the next start: never lost,
/// never two copies (ARCHITECTURE.md, "How an arrival flows"). The crash is built by hand with the journal's own API:
/// an intent written and locked, the item claimed, maybe a copy named in Documents, and then the record dropped, which
/// releases its lock as the death of its process would.
@Suite struct RecoveryTests {
    /// An item whose inode it shares with a file outside the container, as the copy path is for.
    private func hardLinkedItem(_ scratch: Scratch, _ item: String, _ bytes: [UInt8]) throws -> FileStatus {
        try makeFile(scratch.outside(item), bytes, mode: 0o644)
        #expect(link(scratch.outside(item), scratch.inboxPath(item)) == 0)
        return try status(scratch.outside(item))
    }

    /// Writes the intent, claims the item, runs `steps`, and returns the live record.
    private func startMove(
        _ scratch: Scratch, _ item: String, claim: String,
        _ steps: (MoveJournal, MoveJournal.Record) throws -> Void = { _, _ in }
    ) throws -> MoveJournal.Record {
        let journal = MoveJournal(container: scratch.container)
        let record = try journal.begin(MoveJournal.Intent(name: name(item), claim: name(claim)))
        try system_renameat2(
            currentDirectory, scratch.inboxPath(item), currentDirectory, scratch.inboxPath(claim), .noReplace)
        try steps(journal, record)
        return record
    }

    /// The same, then the mover dies: its record goes, and with it the lock.
    private func crashedMove(
        _ scratch: Scratch, _ item: String, claim: String,
        _ steps: (MoveJournal, MoveJournal.Record) throws -> Void = { _, _ in }
    ) throws {
        _ = try startMove(scratch, item, claim: claim, steps)
        try scratch.waitForDeadMoversLocks()
    }

    /// How many files, anywhere in the Inbox (claims included) or Documents, hold `bytes`.
    private func copies(of bytes: [UInt8], in scratch: Scratch) throws -> Int {
        let inbox = try scratch.inboxEntries().map(scratch.inboxPath)
        let documents = try scratch.documentsEntries().map(scratch.documentsPath)
        return try (inbox + documents).filter { try readFile($0) == bytes }.count
    }

    @Test func anAbandonedClaimWithNoCopyGoesBackToItsName() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(200_000)
        let outside = try hardLinkedItem(scratch, "report.pdf", bytes)
        try crashedMove(scratch, "report.pdf", claim: ".inbox-claim.1.1")
        #expect(try scratch.inboxEntries() == [".inbox-claim.1.1"])
        #expect(try scratch.journalEntries() == [".inbox-claim.1.1.intent"])

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try scratch.inboxEntries() == ["report.pdf"])
        #expect(try status(scratch.inboxPath("report.pdf")).isSameFile(as: outside))
        #expect(try readFile(scratch.inboxPath("report.pdf")) == bytes)
        #expect(try scratch.documentsEntries() == [])
        #expect(try scratch.journalEntries() == [])
        #expect(try status(scratch.outside("report.pdf")).linkCount == 2)
    }

    @Test func aClaimGoesBackUnderAFreeNameWhenItsNameWasTaken() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try hardLinkedItem(scratch, "report.pdf", Array("claimed".utf8))
        try crashedMove(scratch, "report.pdf", claim: ".inbox-claim.1.2")
        _ = try scratch.inbox.deliver(data: Data("newer".utf8), suggestedName: "report.pdf")

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try scratch.inboxEntries() == ["report-1.pdf", "report.pdf"])
        #expect(try readFile(scratch.inboxPath("report.pdf")) == Array("newer".utf8))
        #expect(try readFile(scratch.inboxPath("report-1.pdf")) == Array("claimed".utf8))
        #expect(try scratch.journalEntries() == [])
    }

    @Test func anAbandonedMoveWhoseCopyWasLinkedIsFinished() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(300_000)
        let outside = try hardLinkedItem(scratch, "report.pdf", bytes)
        try crashedMove(scratch, "report.pdf", claim: ".inbox-claim.1.3") { journal, record in
            try journal.note("try", name("report.pdf"), in: record)
            try makeFile(scratch.documentsPath("report.pdf"), bytes)
            try journal.note("linked", name("report.pdf"), in: record)
        }
        #expect(try copies(of: bytes, in: scratch) == 2)

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try scratch.inboxEntries() == [], "the claim is removed")
        #expect(try scratch.documentsEntries() == ["report.pdf"])
        #expect(try readFile(scratch.documentsPath("report.pdf")) == bytes)
        #expect(try copies(of: bytes, in: scratch) == 1, "exactly one copy, in Documents")
        #expect(try scratch.journalEntries() == [])
        let after = try status(scratch.outside("report.pdf"))
        #expect(after.isSameFile(as: outside))
        #expect(after.linkCount == 1)
        #expect(try readFile(scratch.outside("report.pdf")) == bytes)
    }

    @Test func aCopyNamedButNotYetNotedIsFinished() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(100_000)
        try makeFile(scratch.documentsPath("report.pdf"), Array("the user's own".utf8))
        _ = try hardLinkedItem(scratch, "report.pdf", bytes)
        // Crashed after linkat named the copy `report 2.pdf`, before the journal noted it.
        try crashedMove(scratch, "report.pdf", claim: ".inbox-claim.1.4") { journal, record in
            try journal.note("try", name("report.pdf"), in: record)
            try journal.note("try", name("report 2.pdf"), in: record)
            try makeFile(scratch.documentsPath("report 2.pdf"), bytes)
        }

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try scratch.inboxEntries() == [])
        #expect(try scratch.documentsEntries() == ["report 2.pdf", "report.pdf"])
        #expect(try readFile(scratch.documentsPath("report.pdf")) == Array("the user's own".utf8))
        #expect(try copies(of: bytes, in: scratch) == 1)
        #expect(try scratch.journalEntries() == [])
    }

    @Test func aTriedNameHoldingAnotherFileIsRolledBack() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(100_000)
        try makeFile(scratch.documentsPath("report.pdf"), Array("the user's own".utf8))
        _ = try hardLinkedItem(scratch, "report.pdf", bytes)
        // Crashed after trying `report.pdf`, which was taken (EEXIST), before the next name.
        try crashedMove(scratch, "report.pdf", claim: ".inbox-claim.1.5") { journal, record in
            try journal.note("try", name("report.pdf"), in: record)
        }

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try scratch.inboxEntries() == ["report.pdf"])
        #expect(try readFile(scratch.inboxPath("report.pdf")) == bytes)
        #expect(try scratch.documentsEntries() == ["report.pdf"])
        #expect(try readFile(scratch.documentsPath("report.pdf")) == Array("the user's own".utf8))
        #expect(try scratch.journalEntries() == [])
    }

    @Test func aLinkedCopyThatIsGoneIsRolledBackNotLost() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(100_000)
        _ = try hardLinkedItem(scratch, "report.pdf", bytes)
        // Crashed while undoing a failed move: the copy was linked, then unlinked, and the claim not yet renamed
        // back. The claim is now the only copy in the container.
        try crashedMove(scratch, "report.pdf", claim: ".inbox-claim.1.6") { journal, record in
            try journal.note("try", name("report.pdf"), in: record)
            try makeFile(scratch.documentsPath("report.pdf"), bytes)
            try journal.note("linked", name("report.pdf"), in: record)
            try system_unlinkat(currentDirectory, scratch.documentsPath("report.pdf"))
        }

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try copies(of: bytes, in: scratch) == 1, "never lost")
        #expect(try scratch.inboxEntries() == ["report.pdf"])
        #expect(try scratch.documentsEntries() == [])
        #expect(try scratch.journalEntries() == [])
    }

    @Test func anIntentWithNoClaimIsDroppedAndTouchesNothing() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("item".utf8), suggestedName: "report.pdf")
        let item = try status(scratch.inboxPath("report.pdf"))
        // Crashed after writing the intent, before the claim.
        do {
            let journal = MoveJournal(container: scratch.container)
            _ = try journal.begin(MoveJournal.Intent(name: name("report.pdf"), claim: name(".inbox-claim.1.7")))
        }
        #expect(try scratch.journalEntries() == [".inbox-claim.1.7.intent"])

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try scratch.inboxEntries() == ["report.pdf"])
        #expect(try status(scratch.inboxPath("report.pdf")).isSameFile(as: item))
        #expect(try scratch.journalEntries() == [])
    }

    @Test func anIntentHeldByALiveMoverIsLeftAlone() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(10_000)
        _ = try hardLinkedItem(scratch, "report.pdf", bytes)
        let record = try startMove(scratch, "report.pdf", claim: ".inbox-claim.1.8")

        withExtendedLifetime(record) {
            // Another Inbox, as another process would hold, must not touch a move in progress.
            let other = try? Inbox(container: scratch.container)
            #expect(other != nil)
            #expect(other?.recoverInterruptedMoves().isEmpty == true)
            #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

            #expect((try? scratch.inboxEntries()) == [".inbox-claim.1.8"])
            #expect((try? scratch.journalEntries()) == [".inbox-claim.1.8.intent"])
            #expect((try? scratch.documentsEntries()) == [])
        }
    }

    @Test func anIntentIsRecoveredOnceItsMoverIsGone() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try hardLinkedItem(scratch, "report.pdf", Array("x".utf8))
        var record: MoveJournal.Record? = try startMove(scratch, "report.pdf", claim: ".inbox-claim.1.9")
        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try scratch.inboxEntries() == [".inbox-claim.1.9"])
        #expect(record != nil)

        record = nil
        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)

        #expect(try scratch.inboxEntries() == ["report.pdf"])
        #expect(try scratch.journalEntries() == [])
    }

    @Test func aMoveRecoversFirstThenMoves() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(50_000)
        _ = try hardLinkedItem(scratch, "report.pdf", bytes)
        try crashedMove(scratch, "report.pdf", claim: ".inbox-claim.1.10")
        expectError(.noSuchItem) { try scratch.inbox.item(named: name("report.pdf")) }

        let document = try scratch.inbox.moveToDocuments(name("report.pdf"), reason: "test")

        #expect(document.name.string == "report.pdf")
        #expect(try readFile(scratch.documentsPath("report.pdf")) == bytes)
        #expect(try scratch.inboxEntries() == [])
        #expect(try copies(of: bytes, in: scratch) == 1)
        #expect(try scratch.journalEntries() == [])
    }

    /// Counts what a library handler is asked, and moves everything.
    final class CountingHandler: ArrivalHandler, Sendable {
        let asked = Mutex<[String]>([])
        func handle(_ arrival: Arrival) -> Disposition {
            asked.withLock { $0.append(arrival.item.name.string) }
            return .move
        }
    }

    @Test func aHandlerAskedBeforeACrashIsNeverAskedAgain() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("cut off\n".utf8), suggestedName: "asked.txt")
        _ = try scratch.inbox.deliver(data: Data("answered\n".utf8), suggestedName: "answered.txt")
        _ = try scratch.inbox.deliver(data: Data("new\n".utf8), suggestedName: "new.txt")
        func record(_ kind: EventKind, _ item: String, _ more: [(key: String, value: EventValue)]) throws -> Event {
            let path = scratch.inbox.loggedPath(.inbox, try name(item))
            let id = Identity(try status(scratch.inboxPath(item))).text
            var event = Event(kind, ["path": .path(path), "id": .string(id)])
            event.fields += more
            return event
        }
        // What a crash leaves: both asked, one answer logged, nothing moved yet.
        _ = try scratch.inbox.log.append(
            [
                try record(.arrived, "asked.txt", [("handler", .string("library"))]),
                try record(.arrived, "answered.txt", [("handler", .string("library"))]),
                try record(
                    .handled, "answered.txt", [("handler", .string("library")), ("disposition", .string("move"))]),
            ], durable: true)
        let handler = CountingHandler()
        var options = WatchOptions()
        options.once = true
        try Watcher(inbox: scratch.inbox, options: options, handler: handler).runBlocking()

        #expect(handler.asked.withLock { $0 } == ["new.txt"], "only the new arrival is asked")
        #expect(try scratch.inboxEntries() == ["asked.txt"], "kept: its answer never reached the log")
        #expect(try scratch.documentsEntries().sorted() == ["answered.txt", "new.txt"])
        let handled = try scratch.inbox.log.records(kinds: [.handled])
        let interrupted = handled.filter { $0.fields["interrupted"] == "true" }
        #expect(interrupted.map { $0.fields["path"] } == ["Documents/Inbox/asked.txt"])
        #expect(interrupted.first?.fields["disposition"] == "keep")
        let moved = try scratch.inbox.log.records(kinds: [.moved]).map {
            "\($0.fields["from"] ?? "") \($0.fields["reason"] ?? "")"
        }
        #expect(moved.sorted() == ["Documents/Inbox/answered.txt recovered", "Documents/Inbox/new.txt handler"])
    }
}
