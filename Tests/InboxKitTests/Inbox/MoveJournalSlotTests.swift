import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// The move journal's slots (`MoveJournal`): a move writes its intent over a kept file, in frames that count only
/// when whole, and never writes a slot that another mover holds or that is not a plain file of its own.
@Suite struct MoveJournalSlotTests {
    private func slotPath(_ scratch: Scratch, _ index: Int) -> String {
        MoveJournal(container: scratch.container).directory + "/slot-\(index).intent"
    }

    /// The journal's folder as the log names it.
    private let journalPath = "Library/Application Support/inbox/journal"

    private func deliver(_ scratch: Scratch, _ names: String...) throws {
        for item in names { _ = try scratch.inbox.deliver(data: Data(item.utf8), suggestedName: item) }
    }

    /// The intents recovery would act on now, by the name they move.
    private func abandoned(_ scratch: Scratch) -> [MoveJournal.Intent] {
        var intents: [MoveJournal.Intent] = []
        MoveJournal(container: scratch.container).forEachAbandoned { finding in
            if case .abandoned(let intent, _) = finding { intents.append(intent) }
        }
        return intents
    }

    @Test func movesWriteOneSlotOverAndLeaveNoIntent() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try deliver(scratch, "a.txt", "b.txt")
        _ = try scratch.inbox.moveToDocuments(name("a.txt"), reason: "test")
        let slot = try status(slotPath(scratch, 0))
        _ = try scratch.inbox.moveToDocuments(name("b.txt"), reason: "test")

        let journal = MoveJournal(container: scratch.container)
        #expect(try FileDescriptor(journal.directory, [.directory]).entries().map(\.string) == ["slot-0.intent"])
        #expect(try status(slotPath(scratch, 0)).isSameFile(as: slot), "the same file, written over")
        #expect(try readFile(slotPath(scratch, 0)).starts(with: Array("done".utf8)))
        #expect(try scratch.journalEntries() == [])
        #expect(abandoned(scratch).isEmpty)
        #expect(try scratch.documentsEntries() == ["a.txt", "b.txt"])
    }

    @Test func aRenameCutShortInAReusedSlotIsLoggedOnceAndTheEarlierMoveNotAgain() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try deliver(scratch, "a.txt", "b.txt")
        _ = try scratch.inbox.moveToDocuments(name("a.txt"), reason: "test")
        let before = try status(scratch.inboxPath("b.txt"))
        do {
            let record = try MoveJournal(container: scratch.container).begin(
                MoveJournal.Intent(
                    name: name("b.txt"), identity: Identity(before), seq: scratch.inbox.log.lastSeq()))
            #expect(record.recordName.string == "slot-0.intent")
            try system_renameat2(
                currentDirectory, scratch.inboxPath("b.txt"), currentDirectory, scratch.documentsPath("b.txt"),
                .noReplace)
        }  // the record goes, unlocked: as if its mover had died after the rename

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        let moved = try scratch.inbox.log.records(kinds: [.moved])
        #expect(moved.map { $0.fields["from"] } == ["Documents/Inbox/a.txt", "Documents/Inbox/b.txt"])
        #expect(moved.map { $0.fields["reason"] } == ["test", "recovered"])
        #expect(try scratch.journalEntries() == [])
    }

    @Test func aTornFrameCountsForNothingAndATornStepIsLeftOut() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let journal = MoveJournal(container: scratch.container)
        do {
            let record = try journal.begin(MoveJournal.Intent(name: name("a.txt"), seq: 1))
            try journal.note("try", name("a 2.txt"), in: record)
            try journal.note("try", name("a 3.txt"), in: record)
        }
        #expect(abandoned(scratch).map(\.tried) == [[try name("a 2.txt"), try name("a 3.txt")]])

        // The last step's frame loses its last byte, as a crash in the middle of its write would leave it.
        let slot = slotPath(scratch, 0)
        let whole = try readFile(slot)
        #expect(truncate(slot, off_t(whole.count - 1)) == 0)
        #expect(abandoned(scratch).map(\.tried) == [[try name("a 2.txt")]])

        // A byte of the first frame changed: nothing counts, and recovery leaves the slot be.
        let file = try FileDescriptor(slot, [.readWrite])
        try file.writeAll(Array("X".utf8), at: 6)
        #expect(abandoned(scratch).isEmpty)
        #expect(try scratch.journalEntries() == [])
    }

    @Test func whatALongerIntentLeftInItsSlotNeverCountsForTheNext() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let journal = MoveJournal(container: scratch.container)
        do {
            let first = try journal.begin(MoveJournal.Intent(name: name("a long name for the first item.txt"), seq: 1))
            for attempt in 2...9 { try journal.note("try", name("a long name, attempt \(attempt).txt"), in: first) }
            try journal.end(first)
        }
        let longer = try readFile(slotPath(scratch, 0)).count
        #expect(abandoned(scratch).isEmpty, "an ended intent counts for nothing")
        do {
            let next = try journal.begin(MoveJournal.Intent(name: name("b.txt"), seq: 2))
            #expect(next.recordName.string == "slot-0.intent")
        }
        #expect(try readFile(slotPath(scratch, 0)).count == longer, "written over, not cut")
        let left = abandoned(scratch)
        #expect(left.map(\.name) == [try name("b.txt")])
        #expect(left.map(\.tried) == [[]])
        #expect(left.map(\.seq) == [2])
    }

    @Test func aSlotAnotherMoverHoldsIsPassedOver() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let journal = MoveJournal(container: scratch.container)
        let held = try journal.begin(MoveJournal.Intent(name: name("a.txt")))
        let next = try journal.begin(MoveJournal.Intent(name: name("b.txt")))
        #expect(held.recordName.string == "slot-0.intent")
        #expect(next.recordName.string == "slot-1.intent")
        #expect(abandoned(scratch).isEmpty, "both are locked by their movers")
        try journal.end(held)
        try journal.end(next)
    }

    @Test func aSlotThatIsNotAPlainFileOfItsOwnIsNeverWritten() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try deliver(scratch, "a.txt")
        let journal = MoveJournal(container: scratch.container)
        #expect(mkdir(journal.directory, 0o755) == 0)
        let kept = Array("the user's own".utf8)
        try makeFile(scratch.documentsPath("kept.txt"), kept)
        #expect(link(scratch.documentsPath("kept.txt"), slotPath(scratch, 0)) == 0)
        #expect(symlink(scratch.documentsPath("linked.txt"), slotPath(scratch, 1)) == 0)
        #expect(mkfifo(slotPath(scratch, 2), 0o600) == 0)
        #expect(mkdir(slotPath(scratch, 3), 0o755) == 0)

        let record = try journal.begin(MoveJournal.Intent(name: name("a.txt")))
        #expect(record.recordName.string == "slot-4.intent", "the first plain slot")
        try journal.end(record)
        #expect(try readFile(scratch.documentsPath("kept.txt")) == kept)
        #expect(!exists(scratch.documentsPath("linked.txt")))

        // Recovery, at the next move, sets each aside and says so; the move takes a new slot.
        _ = try scratch.inbox.moveToDocuments(name("a.txt"), reason: "test")
        #expect(try readFile(scratch.documentsPath("kept.txt")) == kept)
        #expect(try scratch.documentsEntries() == ["a.txt", "kept.txt"])
        let entries = try FileDescriptor(journal.directory, [.directory]).entries().map(\.string).sorted()
        #expect(entries == ["slot-0.intent"] + (0..<4).map { "slot-\($0).intent.refused" } + ["slot-4.intent"])
        #expect(try readFile(slotPath(scratch, 0)).starts(with: Array("done".utf8)))
        let errors = try scratch.inbox.log.records(kinds: [.error])
        #expect(errors.compactMap { $0.fields["path"] }.sorted() == (0..<4).map { "\(journalPath)/slot-\($0).intent" })
    }

    @Test func everySlotTakenGivesTheMoveAnIntentOfItsOwn() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try deliver(scratch, "a.txt")
        let journal = MoveJournal(container: scratch.container)
        let holders = try (0..<MoveJournal.slotCount).map { _ in
            try journal.begin(MoveJournal.Intent(name: name("held.txt")))
        }
        #expect(holders.allSatisfy { $0.isSlot })
        let own = try journal.begin(MoveJournal.Intent(name: name("a.txt")))
        #expect(!own.isSlot && own.recordName.string.hasPrefix("move."))
        try journal.end(own)

        _ = try scratch.inbox.moveToDocuments(name("a.txt"), reason: "test")
        #expect(try scratch.documentsEntries() == ["a.txt"])
        for holder in holders { try journal.end(holder) }
        #expect(try scratch.journalEntries() == [], "the move's own intent removed, every slot ended")
    }

    @Test func anIntentAnEarlierInboxWroteIsStillSettled() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try deliver(scratch, "a.txt")
        let item = try status(scratch.inboxPath("a.txt"))
        let journal = MoveJournal(container: scratch.container)
        #expect(mkdir(journal.directory, 0o755) == 0)
        // Lines only, no frames: named only once whole, as intents were before slots.
        let text =
            "name \(Data("a.txt".utf8).base64EncodedString())\nseq \(try scratch.inbox.log.lastSeq())\n"
            + "id \(Identity(item).text)\n"
        try makeFile(journal.directory + "/move.1.2.intent", Array(text.utf8), mode: 0o600)
        try system_renameat2(
            currentDirectory, scratch.inboxPath("a.txt"), currentDirectory, scratch.documentsPath("a.txt"), .noReplace)

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try scratch.inbox.log.records(kinds: [.moved]).map { $0.fields["reason"] } == ["recovered"])
        #expect(try scratch.journalEntries() == [])
    }

    @Test func anIntentLargerThanAnyOfOursIsNotActedOn() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try deliver(scratch, "a.txt")
        let claim = ".inbox-claim.1.1"
        try system_renameat2(
            currentDirectory, scratch.inboxPath("a.txt"), currentDirectory, scratch.inboxPath(claim), .noReplace)
        let journal = MoveJournal(container: scratch.container)
        #expect(mkdir(journal.directory, 0o755) == 0)
        // An intent that would roll the claim back, then more bytes than any intent of ours holds.
        let lines =
            "name \(Data("a.txt".utf8).base64EncodedString())\nclaim \(Data(claim.utf8).base64EncodedString())\n"
        try makeFile(
            journal.directory + "/big.intent", Array(lines.utf8) + [UInt8](repeating: 0x0A, count: 17 << 20))

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try scratch.inboxEntries() == [claim], "the claim stays as it is")
        #expect(try scratch.inbox.log.records(kinds: [.recovered]).isEmpty)
        let errors = try scratch.inbox.log.records(kinds: [.error])
        #expect(errors.map { $0.fields["path"] } == ["\(journalPath)/big.intent"])
        #expect(errors.first?.fields["message"]?.contains("larger than any intent of ours") == true)
        #expect(exists(journal.directory + "/big.intent.refused"))
    }
}
