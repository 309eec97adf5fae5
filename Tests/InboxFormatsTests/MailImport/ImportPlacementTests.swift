import AppContainer
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// A message's attachments are delivered once (ARCHITECTURE.md, "Mail import"): again and again, after a failure
/// at any system call, after a crash between the index and the rename, and from 20 importers at once.
@Suite struct ImportPlacementTests {
    static let attachments: [(name: String, bytes: [UInt8])] = [
        ("report.pdf", pattern(70_000, seed: 1)), ("photo.jpg", pattern(5_000, seed: 2)),
        ("notes.txt", Array("notes\n".utf8)),
    ]
    static let key = Array(repeating: UInt8(0xAB), count: 32)
    /// A second message, placed in the same batch as the first.
    static let otherAttachments: [(name: String, bytes: [UInt8])] = [
        ("invoice.pdf", pattern(30_000, seed: 3)), ("notes.txt", Array("other notes\n".utf8)),
    ]
    static let otherKey = Array(repeating: UInt8(0xCD), count: 32)

    /// What one import run staged: a message's attachments (or several messages'), not yet synced.
    private struct Staged {
        var messages: [StagedMessage]
        let folder: SharedDescriptor
        let writes: StagedWrites

        var message: StagedMessage { messages[0] }
    }

    /// Stages this run's copies of the attachments (and of the other message's, with `both`), as an import does
    /// before it places them.
    private func staged(_ scratch: Scratch, first: Bool = true, both: Bool = false) throws -> Staged {
        let folder = SharedDescriptor(try scratch.container.openFolder(.inbox))
        let writes = StagedWrites()
        func stage(_ attachments: [(name: String, bytes: [UInt8])]) throws -> [StagedDelivery] {
            try attachments.map { attachment in
                try scratch.inbox.stage(
                    Inbox.importStagingName(), named: try name(attachment.name), shown: attachment.name,
                    in: folder.rawValue, writes: writes
                ) { file in try file.writeAll(attachment.bytes) }
            }
        }
        var messages: [StagedMessage] = []
        if first {
            messages.append(
                StagedMessage(
                    key: Self.key, messageID: "<m1@example.org>", source: Array("m1.eml".utf8),
                    attachments: try stage(Self.attachments)))
        }
        if both {
            messages.append(
                StagedMessage(
                    key: Self.otherKey, messageID: nil, source: Array("m2.eml".utf8),
                    attachments: try stage(Self.otherAttachments))
            )
        }
        return Staged(messages: messages, folder: folder, writes: writes)
    }

    private func place(_ scratch: Scratch, _ staged: Staged, index: ImportIndex) -> [ImportPlacement] {
        ImportLedger(inbox: scratch.inbox, index: index).placeOnce(
            staged.messages, writes: staged.writes, folder: staged.folder.rawValue)
    }

    private func importOnce(_ scratch: Scratch, index: ImportIndex? = nil) throws -> ImportPlacement {
        try importBoth(scratch, index: index, both: false)[0]
    }

    private func importBoth(_ scratch: Scratch, index: ImportIndex? = nil, both: Bool = true) throws
        -> [ImportPlacement]
    {
        place(scratch, try staged(scratch, both: both), index: try index ?? ImportIndex(container: scratch.container))
    }

    /// Records the staged attachments as placing, as a crash after that commit leaves them.
    /// A crash in the middle of a placement: the message staged and synced, every attachment recorded as placing,
    /// the first `renamed` of them renamed into the Inbox and no record written.
    private func crashedPlacing(_ scratch: Scratch, renamed: Int, notExpanded: [Int: String] = [:]) throws
        -> (crashed: Staged, index: ImportIndex)
    {
        let index = try ImportIndex(container: scratch.container)
        var crashed = try staged(scratch)
        crashed.messages[0].notExpanded = notExpanded
        try crashed.writes.syncAll()
        try markPlacing(index, crashed.message)
        for file in crashed.message.attachments.prefix(renamed) {
            try system_renameat2(crashed.folder.rawValue, file.staging, crashed.folder.rawValue, file.name, .noReplace)
        }
        return (crashed, index)
    }

    private func markPlacing(_ index: ImportIndex, _ message: StagedMessage, only: Int? = nil) throws {
        try index.markPlacing(
            message.attachments.enumerated().filter { only == nil || $0.offset == only }.map {
                (message.key, $0.offset, $0.element, message.notExpanded[$0.offset])
            },
            of: [
                ImportIndex.PendingMessage(
                    key: message.key, messageID: message.messageID, source: message.source,
                    count: message.attachments.count)
            ])
    }

    /// Each attachment (of both messages, with `both`) is in the Inbox exactly once, with its `delivered` record,
    /// and nothing of the import is left hidden there.
    private func expectEachOnce(
        _ scratch: Scratch, both: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        // The other message's notes.txt clashes with the first's: it is delivered as notes-1.txt.
        let expected: [(name: String, bytes: [UInt8], key: String)] =
            Self.attachments.map { ($0.name, $0.bytes, String(repeating: "ab", count: 32)) }
            + (both ? Self.otherAttachments.map { ($0.name, $0.bytes, String(repeating: "cd", count: 32)) } : [])
        let items = try scratch.inboxEntries().filter { !$0.hasPrefix(".") }.sorted()
        #expect(items.count == expected.count, "\(items)", sourceLocation: sourceLocation)
        var contents: [[UInt8]: Int] = [:]
        for item in items { contents[try readFile(scratch.inboxPath(item)), default: 0] += 1 }
        #expect(
            contents == Dictionary(expected.map { ($0.bytes, 1) }, uniquingKeysWith: +), sourceLocation: sourceLocation)
        let delivered = try scratch.inbox.log.records(kinds: [.delivered])
        #expect(delivered.count == expected.count, sourceLocation: sourceLocation)
        #expect(
            delivered.map { $0.fields["message_sha256"] ?? "" }.sorted() == expected.map(\.key).sorted(),
            sourceLocation: sourceLocation)
        #expect(
            try scratch.inboxEntries().allSatisfy { !$0.hasPrefix(".") }, "no staging left",
            sourceLocation: sourceLocation)
    }

    /// Ages the hidden files in the Inbox by a week and runs the staging sweep.
    private func sweepAsAWeekLater(_ scratch: Scratch) throws {
        let weekAgo = timespec(tv_sec: time(nil) - 7 * 86_400, tv_nsec: 0)
        for entry in try scratch.inboxEntries() where entry.hasPrefix(".") {
            #expect(utimensat(AT_FDCWD, scratch.inboxPath(entry), [weekAgo, weekAgo], 0) == 0)
        }
        _ = try scratch.inbox.sweepAbandonedStaging()
    }

    @Test func aMessageImportedAgainDeliversNothing() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let first = try importOnce(scratch)
        #expect(first.error == nil && !first.duplicate)
        #expect(first.delivered.map(\.ordinal) == [0, 1, 2])
        let second = try importOnce(scratch)
        #expect(second.error == nil && second.duplicate && second.delivered.isEmpty)
        try expectEachOnce(scratch)
        #expect(try scratch.inboxEntries().allSatisfy { !$0.hasPrefix(".") }, "no staging left")
        let imported = try scratch.inbox.log.records(kinds: [.imported])
        #expect(imported.map { $0.fields["duplicate"] } == ["false", "true"])
        #expect(imported.map { $0.fields["attachments"] } == ["3", "0"])
        #expect(imported.first?.fields["message_id"] == "<m1@example.org>")
    }

    @Test func aCrashBeforeTheRenameDeliversItOnceAndACrashAfterItDeliversItNever() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // The crash: all three recorded as placing; only the first renamed into the Inbox.
        let index = try crashedPlacing(scratch, renamed: 1).index

        let again = try importOnce(scratch, index: index)

        #expect(again.error == nil)
        #expect(again.delivered.map(\.ordinal) == [1, 2], "only what was not renamed")
        #expect(try scratch.inboxEntries().sorted() == Self.attachments.map(\.name).sorted(), "stale staging removed")
        #expect(try index.isComplete(Self.key))
    }

    @Test func twoMessagesPlacedTogetherAreEachDeliveredOnceWithTheirRecordsInOrder() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let outcomes = try importBoth(scratch)
        #expect(outcomes.allSatisfy { $0.error == nil })
        #expect(outcomes.map { $0.delivered.map(\.ordinal) } == [[0, 1, 2], [0, 1]])
        try expectEachOnce(scratch, both: true)
        // Each message's delivered records, then its imported record.
        let records = try scratch.inbox.log.records(kinds: [.delivered, .imported])
        #expect(
            records.map { "\($0.event) \($0.fields["message_sha256"]?.prefix(2) ?? "")" } == [
                "delivered ab", "delivered ab", "delivered ab", "imported ab", "delivered cd", "delivered cd",
                "imported cd",
            ])
        let again = try importBoth(scratch)
        #expect(again.map(\.duplicate) == [true, true])
        try expectEachOnce(scratch, both: true)
    }

    @Test(.long) func aFailureAtAnySystemCallLeavesARetryToDeliverExactlyTheMissing() throws {
        // Two messages in one batch: the first delivered in part before (its placing records left by a crash),
        // the second new.
        let sweep = FaultSweep<(Scratch, Staged, ImportIndex)>(
            setup: {
                let scratch = try Scratch.withInbox()
                let index = try ImportIndex(container: scratch.container)
                let earlier = try staged(scratch)
                try earlier.writes.syncAll()
                try markPlacing(index, earlier.message, only: 1)
                let placedBefore = earlier.message.attachments[1]
                try system_renameat2(
                    earlier.folder.rawValue, placedBefore.staging, earlier.folder.rawValue, placedBefore.name,
                    .noReplace)
                for file in [0, 2].map({ earlier.message.attachments[$0] }) {
                    try system_unlinkat(earlier.folder.rawValue, file.staging)
                }
                try scratch.inbox.log.append(
                    Event(
                        .delivered,
                        [
                            "path": .string("Documents/Inbox/photo.jpg"),
                            "message_sha256": .string(String(repeating: "ab", count: 32)), "ordinal": .int(1),
                        ]))
                return (scratch, try staged(scratch, both: true), index)
            },
            operation: { scratch, batch, index in
                if let error = place(scratch, batch, index: index).compactMap(\.error).first { throw error }
            },
            check: { context, outcome, plan in
                let (scratch, _, index) = context
                expectClearError(outcome, plan)
                let retry = try importBoth(scratch, index: index)
                // A staging file a failed unlink left is the sweep's, a week on.
                try sweepAsAWeekLater(scratch)
                #expect(retry.allSatisfy { $0.error == nil }, "\(plan.summary): \(retry.compactMap(\.error))")
                try expectEachOnce(scratch, both: true)
                #expect(try index.isComplete(Self.key) && index.isComplete(Self.otherKey), "\(plan.summary)")
            },
            teardown: { $0.0.remove() })
        try sweep.run("import placement")
    }

    @Test func twentyImportersAtOnceDeliverEachAttachmentOnce() async throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let outcomes = Mutex<[ImportPlacement]>([])
        await onThreads(20) { _ in
            let outcome = Result { try importOnce(scratch) }
            outcomes.withLock {
                $0.append((try? outcome.get()) ?? ImportPlacement(error: ContainerError(.failure, "\(outcome)")))
            }
        }
        let all = outcomes.withLock { $0 }
        #expect(all.allSatisfy { $0.error == nil })
        #expect(all.filter { !$0.duplicate }.count == 1)
        #expect(all.map(\.delivered.count).reduce(0, +) == Self.attachments.count)
        try expectEachOnce(scratch)
        #expect(try scratch.inboxEntries().allSatisfy { !$0.hasPrefix(".") }, "no staging left")
    }

    @Test func theStagingSweepKeepsWhatTheIndexNamesAndRemovesOrphans() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let index = try ImportIndex(container: scratch.container)
        let crashed = try staged(scratch)
        try crashed.writes.syncAll()
        let message = crashed.message
        // The first is recorded as placing (a crash left it); the others are orphans of a crashed import.
        try markPlacing(index, message, only: 0)
        let weekAgo = timespec(tv_sec: time(nil) - 7 * 86_400, tv_nsec: 0)
        for file in message.attachments {
            #expect(utimensat(AT_FDCWD, scratch.inboxPath(file.staging.string), [weekAgo, weekAgo], 0) == 0)
        }

        let swept = try scratch.inbox.sweepAbandonedStaging()

        #expect(Set(swept) == Set(message.attachments.dropFirst().map(\.staging)))
        #expect(try scratch.inboxEntries() == [message.attachments[0].staging.string])
        // The next import of the message settles the one left: delivered once.
        #expect(try importOnce(scratch, index: index).error == nil)
        try expectEachOnce(scratch)
    }

    @Test func aBackupTakenMidPlacementRestoresAnIndexThatDeliversTheMissingAgain() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let index = try ImportIndex(container: scratch.container)
        let crashed = try staged(scratch)
        try crashed.writes.syncAll()
        // The backup catches the import between its placing records and the renames: the staging files are
        // left out of the archive, the records are in it.
        try markPlacing(index, crashed.message)
        _ = try BackupArchive(path: scratch.outside("backup.tar")).write(from: scratch.container)
        let restored = try Container.create(at: scratch.outside("restored"), appName: "Restored")
        _ = try BackupArchive(path: scratch.outside("backup.tar")).restore(into: restored)

        let inbox = try Inbox(container: restored)
        let folder = SharedDescriptor(try restored.openFolder(.inbox))
        let writes = StagedWrites()
        let copies = try Self.attachments.map { attachment in
            try inbox.stage(
                Inbox.importStagingName(), named: try name(attachment.name), shown: attachment.name,
                in: folder.rawValue, writes: writes
            ) { file in try file.writeAll(attachment.bytes) }
        }
        let again = ImportLedger(inbox: inbox, index: try ImportIndex(container: restored)).placeOnce(
            [StagedMessage(key: Self.key, messageID: nil, source: Array("m1.eml".utf8), attachments: copies)],
            writes: writes, folder: folder.rawValue)[0]
        #expect(again.error == nil)
        #expect(again.delivered.map(\.ordinal) == [0, 1, 2], "nothing taken for placed that never was")
    }

    /// The SHA-256 of `bytes`, in hex.
    private func sha256(_ bytes: [UInt8]) throws -> String {
        let digest = try SHA256Digest()
        try digest.begin()
        try bytes.withUnsafeBytes { try digest.update($0) }
        return SHA256Digest.hex(try digest.finish())
    }

    @Test func aCrashBetweenTheRenamesAndTheirRecordsIsRepairedByTheNextImportOfAnotherMessage() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // The crash: the first two renamed into the Inbox, their records never written.
        let index = try crashedPlacing(scratch, renamed: 2).index

        let other = place(scratch, try staged(scratch, first: false, both: true), index: index)

        #expect(other.map { $0.error == nil && $0.delivered.count == 2 } == [true])
        let key = String(repeating: "ab", count: 32)
        let repaired = try scratch.inbox.log.records(kinds: [.delivered]).filter { $0.fields["message_sha256"] == key }
        #expect(repaired.map { $0.fields["ordinal"] } == ["0", "1"])
        #expect(repaired.map { $0.fields["path"] } == ["Documents/Inbox/report.pdf", "Documents/Inbox/photo.jpg"])
        #expect(repaired.map { $0.fields["size"] } == Self.attachments.prefix(2).map { "\($0.bytes.count)" })
        #expect(try repaired.map { $0.fields["sha256"] } == Self.attachments.prefix(2).map { try sha256($0.bytes) })
        let otherKey = String(repeating: "cd", count: 32)
        let delivered = try scratch.inbox.log.records(kinds: [.delivered])
        #expect(
            delivered.map { $0.fields["message_sha256"] } == [key, key, otherKey, otherKey],
            "the repair's records come before anything else")
        #expect(try scratch.inbox.log.records(kinds: [.imported]).map { $0.fields["message_sha256"] } == [otherKey])
        #expect(
            try index.parts(of: Self.key) == [
                0: .delivered(name: try name("report.pdf")), 1: .delivered(name: try name("photo.jpg")),
            ])
        #expect(try scratch.inboxEntries().allSatisfy { !$0.hasPrefix(".") }, "the unplaced staging file removed")
        // The message's next import delivers exactly the third, and completes it.
        let again = try importOnce(scratch, index: index)
        #expect(again.error == nil && again.delivered.map(\.ordinal) == [2])
        try expectEachOnce(scratch, both: true)
        #expect(try index.isComplete(Self.key))
    }

    @Test func anAttachmentGoneFromTheInboxSinceTheCrashGetsARecoveredRecordAndNoDeliveredOne() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let (crashed, index) = try crashedPlacing(scratch, renamed: 3)
        // Moved on before the repair.
        try system_unlinkat(crashed.folder.rawValue, crashed.message.attachments[0].name)

        try scratch.inbox.repairInterruptedImports()

        let delivered = try scratch.inbox.log.records(kinds: [.delivered])
        #expect(delivered.map { $0.fields["path"] } == ["Documents/Inbox/photo.jpg", "Documents/Inbox/notes.txt"])
        let recovered = try scratch.inbox.log.records(kinds: [.recovered])
        #expect(recovered.map { $0.fields["ordinal"] } == ["0"])
        #expect(recovered.first?.fields["path"] == nil, "no path the Inbox does not hold")
        let imported = try scratch.inbox.log.records(kinds: [.imported])
        #expect(imported.map { $0.fields["duplicate"] } == ["false"])
        #expect(imported.first?.fields["message_id"] == "<m1@example.org>")
        #expect(imported.first?.fields["source"] == "m1.eml")
        #expect(try index.isComplete(Self.key))
        #expect(try importOnce(scratch, index: index).duplicate)
        #expect(try scratch.inbox.log.records(kinds: [.delivered]).count == 2, "nothing delivered again")
    }

    @Test func aWinmailDatDeliveredAsItIsKeepsItsNotExpandedThroughARepair() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let why = "a winmail.dat over 16 MiB"
        _ = try crashedPlacing(scratch, renamed: 2, notExpanded: [0: why])

        try scratch.inbox.repairInterruptedImports()

        let repaired = try scratch.inbox.log.records(kinds: [.delivered])
        #expect(repaired.map { $0.fields["ordinal"] } == ["0", "1"])
        #expect(repaired.map { $0.fields["recovered"] } == ["true", "true"])
        #expect(repaired.map { $0.fields["not_expanded"] } == [why, nil])
    }

    @Test(.long) func aRepairFailingAtAnySystemCallLeavesEachFileOneRecordOnceRetried() throws {
        let sweep = FaultSweep<Scratch>(
            setup: {
                let scratch = try Scratch.withInbox()
                _ = try crashedPlacing(scratch, renamed: 2)
                return scratch
            },
            operation: { scratch in try scratch.inbox.repairInterruptedImports() },
            check: { scratch, outcome, plan throws in
                expectClearError(outcome, plan)
                try scratch.inbox.repairInterruptedImports()
                let delivered = try scratch.inbox.log.records(kinds: [.delivered])
                #expect(delivered.compactMap { $0.fields["ordinal"] }.sorted() == ["0", "1"], "\(plan.summary)")
                #expect(try importOnce(scratch).delivered.map(\.ordinal) == [2], "\(plan.summary)")
                try sweepAsAWeekLater(scratch)
                try expectEachOnce(scratch)
            },
            teardown: { $0.remove() })
        try sweep.run("repair an interrupted import")
    }

    @Test func aRepairThatFailsAtAWatchersStartIsLoggedAndDoneAtTheNextTry() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try crashedPlacing(scratch, renamed: 1)
        // The first `flock` is `import.lock`'s.
        let plan = SyscallFaultPlan(failing: 1, only: "flock", with: .ioError)

        #expect(plan.run { scratch.inbox.repairInterruptedImportsLogging() } == nil, "logged, not returned")

        let errors = try scratch.inbox.log.records(kinds: [.error])
        #expect(errors.map { $0.fields["during"] } == ["repair an interrupted import"])
        #expect(try scratch.inbox.log.records(kinds: [.delivered]).isEmpty)
        #expect(scratch.inbox.repairInterruptedImportsLogging() == nil)
        #expect(try scratch.inbox.log.records(kinds: [.delivered]).map { $0.fields["ordinal"] } == ["0"])
    }
}
