import AppContainer
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// Recovery never passes over a move journal entry in silence: one it cannot read now is kept for the next try,
/// one no mover of ours wrote is set aside, and each is logged `error`.
@Suite struct MoveJournalRecoveryErrorTests {
    private let journalPath = "Library/Application Support/inbox/journal"

    /// A copy's intent whose mover died after it claimed `a.txt`: recovery rolls it back.
    private func abandonedCopy(_ scratch: Scratch) throws -> (claim: String, intent: String) {
        _ = try scratch.inbox.deliver(data: Data("the item".utf8), suggestedName: "a.txt")
        let claim = ".inbox-claim.1.1"
        let item = try status(scratch.inboxPath("a.txt"))
        try system_renameat2(
            currentDirectory, scratch.inboxPath("a.txt"), currentDirectory, scratch.inboxPath(claim), .noReplace)
        let record = try MoveJournal(container: scratch.container).begin(
            MoveJournal.Intent(name: try name("a.txt"), claim: try name(claim), identity: Identity(item)))
        return (claim, record.recordName.string)
    }

    private func errors(_ scratch: Scratch) throws -> [EventRecord] {
        try scratch.inbox.log.records(kinds: [.error])
    }

    @Test(arguments: [("read", 1, EIO), ("openat", 3, EACCES)])
    func anIntentThatCannotBeReadIsKeptAndLoggedThenSettled(call: String, index: Int, code: CInt) throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let (claim, intent) = try abandonedCopy(scratch)
        let plan = SyscallFaultPlan(failing: index, only: call, with: Errno(rawValue: code))
        #expect(plan.run { scratch.inbox.recoverInterruptedMoves() }.isEmpty)

        #expect(plan.injected != nil, "\(plan.summary)")
        #expect(try scratch.inboxEntries() == [claim], "nothing done yet")
        #expect(try scratch.journalEntries() == [intent], "the intent is kept")
        let logged = try errors(scratch)
        #expect(logged.map { $0.fields["path"] } == ["\(journalPath)/\(intent)"])
        #expect(logged.map { $0.fields["during"] } == ["recover a move"])
        #expect(logged.map { $0.fields["errno"] } == ["\(code)"])

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try scratch.inboxEntries() == ["a.txt"], "rolled back at the next try")
        #expect(try scratch.journalEntries() == [])
        #expect(try scratch.inbox.log.records(kinds: [.recovered]).count == 1)
        #expect(try errors(scratch).count == 1)
    }

    @Test func aJournalThatCannotBeOpenedIsLogged() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let (claim, _) = try abandonedCopy(scratch)
        let plan = SyscallFaultPlan(failing: 1, only: "openat", with: .ioError)
        #expect(plan.run { scratch.inbox.recoverInterruptedMoves() }.isEmpty)

        #expect(try scratch.inboxEntries() == [claim])
        let logged = try errors(scratch)
        #expect(logged.map { $0.fields["path"] } == [journalPath])
        #expect(logged.first?.fields["message"]?.contains("cannot read the move journal") == true)
    }

    @Test func entriesNoMoverWroteAreSetAsideOnceEachAndNeverRead() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let journal = MoveJournal(container: scratch.container)
        #expect(mkdir(journal.directory, 0o755) == 0)
        let kept = Array("the user's own".utf8)
        try makeFile(scratch.documentsPath("kept.txt"), kept)
        #expect(mkfifo(journal.directory + "/fifo.intent", 0o600) == 0)
        #expect(symlink(scratch.documentsPath("kept.txt"), journal.directory + "/link.intent") == 0)
        #expect(mkdir(journal.directory + "/folder.intent", 0o755) == 0)
        #expect(link(scratch.documentsPath("kept.txt"), journal.directory + "/hardlink.intent") == 0)
        try makeFile(journal.directory + "/junk.intent", Array("not an intent\n".utf8))
        // A slot that holds no whole frame is a slot between two moves, not a crafted file.
        try makeFile(journal.directory + "/slot-5.intent", Array("done, and then some".utf8))
        // What an earlier refusal left takes the next free name.
        try makeFile(journal.directory + "/junk.intent.refused", [])

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        let refused = ["fifo", "folder", "hardlink", "junk", "link"]
        let logged = try errors(scratch)
        #expect(logged.compactMap { $0.fields["path"] }.sorted() == refused.map { "\(journalPath)/\($0).intent" })
        #expect(logged.allSatisfy { $0.fields["message"]?.contains("set aside, not acted on") == true })
        let entries = try FileDescriptor(journal.directory, [.directory]).entries().map(\.string).sorted()
        #expect(
            entries == [
                "fifo.intent.refused", "folder.intent.refused", "hardlink.intent.refused", "junk.intent-1.refused",
                "junk.intent.refused", "link.intent.refused", "slot-5.intent",
            ])
        #expect(try readFile(scratch.documentsPath("kept.txt")) == kept, "never written")

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try errors(scratch).count == refused.count, "nor reported again")
    }

    /// An intent no mover wrote, which recovery sets aside: its only trace is the `error` it logs.
    private func craftedIntent(_ scratch: Scratch) throws {
        let journal = MoveJournal(container: scratch.container)
        #expect(mkdir(journal.directory, 0o755) == 0)
        try makeFile(journal.directory + "/junk.intent", Array("not an intent\n".utf8))
    }

    /// The event log's first append (one `write`) fails with ENOSPC.
    private func logFull() -> SyscallFaultPlan { SyscallFaultPlan(failing: 1, only: "write", with: .noSpace) }

    private func expectBoth(_ failure: ContainerError?) {
        #expect(
            failure?.code == .ioError && failure?.cause == .noSpace, "the log's failure: \(String(describing: failure))"
        )
        let message = failure?.message ?? ""
        #expect(message.contains("junk.intent"), "what recovery met: \(message)")
        #expect(message.contains("the event log cannot record it"), "\(message)")
        #expect(message.contains("No space left on device"), "\(message)")
    }

    @Test func aFailureTheLogCannotTakeIsReturnedToTheCaller() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try craftedIntent(scratch)
        let plan = logFull()
        let unlogged = plan.run { scratch.inbox.recoverInterruptedMoves() }

        #expect(plan.injected?.name == "write", "\(plan.summary)")
        #expect(unlogged.count == 1)
        expectBoth(unlogged.first)
        #expect(try errors(scratch).isEmpty, "the log took nothing")
        #expect(try scratch.journalEntries() == ["junk.intent.refused"], "set aside all the same")
    }

    @Test func aMoveIsNotMadeWhenTheLogCannotTakeWhatRecoveryMet() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("the item".utf8), suggestedName: "a.txt")
        try craftedIntent(scratch)
        let plan = logFull()
        let failure = #expect(throws: ContainerError.self) {
            try plan.run { try scratch.inbox.moveToDocuments(try name("a.txt"), reason: "test") }
        }

        expectBoth(failure)
        #expect(try scratch.inboxEntries() == ["a.txt"], "not moved")
        #expect(try scratch.documentsEntries() == [])
        #expect(try scratch.journalEntries() == ["junk.intent.refused"], "no intent begun")
    }

    @Test func aWatcherReportsWhatTheLogCannotTake() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try craftedIntent(scratch)
        let reports = Mutex<[String]>([])
        var options = WatchOptions()
        options.once = true
        options.report = { line in reports.withLock { $0.append(line) } }
        let plan = logFull()
        try plan.run { try Watcher(inbox: scratch.inbox, options: options).runBlocking() }

        #expect(plan.injected?.name == "write", "\(plan.summary)")
        let lines = reports.withLock { $0 }.filter { $0.contains("the event log cannot record it") }
        #expect(lines.count == 1, "\(reports.withLock { $0 })")
        #expect(lines.first?.contains("junk.intent") == true)
        #expect(try errors(scratch).isEmpty)
        #expect(try scratch.inbox.log.records(kinds: [.watchStopped]).count == 1, "and it went on")
    }

    @Test func aJournalThatIsASymbolicLinkIsNeverFollowed() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("the item".utf8), suggestedName: "a.txt")
        let elsewhere = scratch.outside("elsewhere")
        #expect(mkdir(elsewhere, 0o755) == 0)
        try makeFile(elsewhere + "/victim.intent", Array("someone else's".utf8))
        let journal = MoveJournal(container: scratch.container)
        #expect(symlink(elsewhere, journal.directory) == 0)

        let failure = #expect(throws: ContainerError.self) {
            try scratch.inbox.moveToDocuments(try name("a.txt"), reason: "test")
        }
        #expect(failure?.code == .refused, "refused (77), not taken for a missing folder (66)")
        #expect(failure?.message.contains("a symbolic link is never followed") == true, "\(failure?.message ?? "")")
        #expect(try scratch.inboxEntries() == ["a.txt"], "not moved without its intent")
        #expect(try FileDescriptor(elsewhere, [.directory]).entries().map(\.string) == ["victim.intent"])
        let logged = try errors(scratch)
        #expect(logged.map { $0.fields["path"] } == [journalPath], "recovery said why it read nothing")
        #expect(logged.map { $0.fields["errno"] } == ["\(ELOOP)"], "ELOOP, as for any symbolic link refused")
    }

    @Test func anInboxThatCannotBeOpenedLeavesTheIntentAndIsLogged() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let (claim, intent) = try abandonedCopy(scratch)
        let inbox = scratch.container.path(.inbox)
        #expect(rename(inbox, inbox + ".away") == 0)
        #expect(symlink(inbox + ".away", inbox) == 0)
        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try errors(scratch).map { $0.fields["path"] } == ["Documents/Inbox/a.txt"])
        #expect(try scratch.journalEntries() == [intent], "kept for the next try")

        #expect(unlink(inbox) == 0 && rename(inbox + ".away", inbox) == 0)
        #expect(try scratch.inboxEntries() == [claim])
        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try scratch.inboxEntries() == ["a.txt"], "rolled back once the Inbox is back")
        #expect(try scratch.journalEntries() == [])
    }

    @Test func anIntentSettledButNotEndedIsLoggedAndSettledAgainAsNothing() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("the item".utf8), suggestedName: "a.txt")
        let item = try status(scratch.inboxPath("a.txt"))
        do {
            let record = try MoveJournal(container: scratch.container).begin(
                MoveJournal.Intent(name: try name("a.txt"), identity: Identity(item), seq: scratch.inbox.log.lastSeq()))
            #expect(record.isSlot)
            try system_renameat2(
                currentDirectory, scratch.inboxPath("a.txt"), currentDirectory, scratch.documentsPath("a.txt"),
                .noReplace)
        }  // its mover died after the rename
        let plan = SyscallFaultPlan(failing: 1, only: "pwrite", with: .ioError)
        #expect(plan.run { scratch.inbox.recoverInterruptedMoves() }.isEmpty)

        #expect(plan.injected != nil, "\(plan.summary)")
        #expect(try scratch.inbox.log.records(kinds: [.moved]).count == 1, "the move is finished")
        let logged = try errors(scratch)
        #expect(logged.map { $0.fields["path"] } == ["\(journalPath)/slot-0.intent"])
        #expect(logged.first?.fields["message"]?.contains("cannot end the move journal intent") == true)

        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try scratch.inbox.log.records(kinds: [.moved]).count == 1, "not logged twice")
        #expect(try scratch.journalEntries() == [])
        #expect(try errors(scratch).count == 1)
    }
}
