import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// The container's own state files are hostile input too (issue 9): a crafted or damaged log or checkpoint is
/// set aside with an `error` record and rebuilt, never a crash and never a reset that handles the Inbox again.
@Suite struct StateFileTests {
    static func watchOnce(_ inbox: Inbox) throws {
        var options = WatchOptions()
        options.once = true
        options.cleanInterval = nil
        // The same container watched twice in a row: a child another test spawns may hold the lock a moment.
        try WatcherFaultTests.runRetryingBusy(inbox, options)
    }

    var logPath: (Scratch) -> String { { $0.container.stateDirectory + "/events.jsonl" } }

    @Test func aLogWhoseSeqIsAtTheEndOfTheCountIsSetAside() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let crafted = #"{"seq":18446744073709551615,"time":"2026-11-29T16:46:34.204Z","event":"rescan"}"# + "\n"
        try Data(crafted.utf8).write(to: URL(fileURLWithPath: logPath(scratch)))
        let inbox = try Inbox(container: scratch.container)
        _ = try inbox.deliver(data: Data("after".utf8), suggestedName: "a.txt")
        let records = try inbox.log.records()
        #expect(records.map(\.event) == ["error", "delivered"])
        #expect(records.allSatisfy { $0.seq <= EventLog.maxSeq })
        let aside = try FileDescriptor(scratch.container.stateDirectory, [.directory]).entries().map(\.string)
            .filter { $0.hasPrefix("events.jsonl.damaged-") }
        #expect(aside.count == 1)
        #expect(try readFile(scratch.container.stateDirectory + "/" + aside[0]) == Array(crafted.utf8))
    }

    @Test func aLogThatIsASymbolicLinkIsSetAsideAndItsTargetUntouched() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let target = scratch.outside("elsewhere.jsonl")
        try makeFile(target, Array("not ours\n".utf8))
        #expect(symlink(target, logPath(scratch)) == 0)
        let inbox = try Inbox(container: scratch.container)
        _ = try inbox.deliver(data: Data("after".utf8), suggestedName: "a.txt")
        #expect(try inbox.log.records().map(\.event) == ["error", "delivered"])
        #expect(try readFile(target) == Array("not ours\n".utf8))
        #expect(try status(logPath(scratch)).kind == .regular)
    }

    @Test func aLogTruncatedBelowTheCheckpointNeverHidesLaterArrivals() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let inbox = try Inbox(container: scratch.container)
        for index in 0..<5 { _ = try inbox.deliver(data: Data("first \(index)".utf8), suggestedName: "first.txt") }
        try Self.watchOnce(inbox)
        let checkpoint = scratch.container.stateDirectory + "/arrived.checkpoint"
        let saved = try readFile(checkpoint)
        // The log emptied (a restore, a careless hand); two more arrive, handled by new processes.
        #expect(truncate(logPath(scratch), 0) == 0)
        let later = try Inbox(container: scratch.container)
        for index in 0..<2 { _ = try later.deliver(data: Data("later \(index)".utf8), suggestedName: "later.txt") }
        try Self.watchOnce(try Inbox(container: scratch.container))
        // A kill -9 before that run saved its checkpoint: the old one is what the next start finds.
        try Data(saved).write(to: URL(fileURLWithPath: checkpoint))
        try Self.watchOnce(try Inbox(container: scratch.container))
        let arrived = try later.log.records(kinds: [.arrived]).compactMap { $0.fields["path"] }
        #expect(arrived.sorted() == ["Documents/Inbox/later-1.txt", "Documents/Inbox/later.txt"], "each once")
        #expect(try inbox.log.records(kinds: [.error]).contains { $0.fields["message"]?.contains("behind") == true })
    }

    @Test func aCheckpointWhoseSeqIsAtTheEndOfTheCountIsSetAside() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let inbox = try Inbox(container: scratch.container)
        for index in 0..<3 { _ = try inbox.deliver(data: Data("kept \(index)".utf8), suggestedName: "kept.txt") }
        try Self.watchOnce(inbox)
        let checkpoint = scratch.container.stateDirectory + "/arrived.checkpoint"
        try Data("seq 18446744073709551615\n".utf8).write(to: URL(fileURLWithPath: checkpoint))
        try Self.watchOnce(inbox)
        #expect(try inbox.log.records(kinds: [.arrived]).count == 3, "nothing arrives again")
        let aside = try FileManager.default.contentsOfDirectory(atPath: scratch.container.stateDirectory)
            .filter { $0.wholeMatch(of: /arrived\.checkpoint\.damaged-[0-9]+/) != nil }
        #expect(aside.count == 1, "\(aside)")
        // A second damaged checkpoint goes beside the first, never over it.
        try Data("seq 18446744073709551615\n".utf8).write(to: URL(fileURLWithPath: checkpoint))
        try Self.watchOnce(inbox)
        let both = try FileManager.default.contentsOfDirectory(atPath: scratch.container.stateDirectory)
            .filter { $0.contains(".damaged-") }
        #expect(both.count == 2, "\(both)")
        #expect(try inbox.log.records(kinds: [.error]).contains { $0.fields["during"] == "read the checkpoint" })
    }
}

/// A move journal intent that no mover of ours wrote (a restored archive could hold one) is never acted on.
@Suite struct ForeignIntentTests {
    @Test func anIntentClaimingAnItemByItsOwnNameIsSetAsideAndTheItemKept() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("the real invoice".utf8), suggestedName: "invoice.pdf")
        try makeFile(scratch.documentsPath("decoy.txt"), Array("decoy".utf8))
        let journal = MoveJournal(container: scratch.container)
        do {
            let invoice = try #require(FileName("invoice.pdf"))
            let record = try journal.begin(MoveJournal.Intent(name: invoice, claim: invoice))
            try journal.note("linked", try #require(FileName("decoy.txt")), in: record)
        }  // the record goes: as if its mover had died
        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try readFile(scratch.inboxPath("invoice.pdf")) == Array("the real invoice".utf8))
        #expect(try readFile(scratch.documentsPath("decoy.txt")) == Array("decoy".utf8))
        #expect(try scratch.inbox.log.records(kinds: [.moved, .recovered]).isEmpty, "the log claims nothing")
        #expect(try scratch.inbox.log.records(kinds: [.error]).count == 1)
        let left = try FileDescriptor(journal.directory, [.directory]).entries().map(\.string)
        #expect(left.count == 1 && left[0].hasSuffix(".intent.refused"), "\(left)")
        // Not acted on, nor reported, again.
        #expect(scratch.inbox.recoverInterruptedMoves().isEmpty)
        #expect(try scratch.inbox.log.records(kinds: [.error]).count == 1)
    }
}
