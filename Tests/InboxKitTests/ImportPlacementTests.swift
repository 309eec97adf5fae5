import AppContainer
import Foundation
import Glibc
import Synchronization
import Testing

@testable import InboxKit

/// A message's attachments are delivered once (ARCHITECTURE.md, "Mail import"): again and again, after a failure
/// at any system call, after a crash between the index and the rename, and from 20 importers at once.
@Suite struct ImportPlacementTests {
    static let attachments: [(name: String, bytes: [UInt8])] = [
        ("report.pdf", pattern(70_000, seed: 1)), ("photo.jpg", pattern(5_000, seed: 2)),
        ("notes.txt", Array("notes\n".utf8)),
    ]
    static let key = Array(repeating: UInt8(0xAB), count: 32)

    /// Stages this run's copies of the attachments, as an import does before it places them.
    private func staged(_ scratch: Scratch) throws -> (StagedMessage, SharedDescriptor) {
        let folder = SharedDescriptor(try scratch.container.openFolder(.inbox))
        let files = try Self.attachments.map { attachment in
            try scratch.inbox.stage(
                Inbox.importStagingName(), named: try name(attachment.name), shown: attachment.name, in: folder.rawValue
            ) { file in try file.writeAll(attachment.bytes) }
        }
        return (
            StagedMessage(key: Self.key, messageID: "<m1@example.org>", source: "m1.eml", attachments: files), folder
        )
    }

    private func importOnce(_ scratch: Scratch, index: ImportIndex? = nil) throws -> ImportPlacement {
        let (message, folder) = try staged(scratch)
        return scratch.inbox.placeOnce(
            message, index: try index ?? ImportIndex(container: scratch.container), folder: folder.rawValue)
    }

    /// Each attachment is in the Inbox exactly once, and nothing of the import is left hidden there.
    private func expectEachOnce(_ scratch: Scratch, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let entries = try scratch.inboxEntries()
        let items = entries.filter { !$0.hasPrefix(".") }.sorted()
        #expect(items == Self.attachments.map(\.name).sorted(), sourceLocation: sourceLocation)
        for attachment in Self.attachments where items.contains(attachment.name) {
            #expect(
                try readFile(scratch.inboxPath(attachment.name)) == attachment.bytes, sourceLocation: sourceLocation)
        }
        let delivered = try scratch.inbox.log.records(kinds: ["delivered"])
        #expect(delivered.count == Self.attachments.count, sourceLocation: sourceLocation)
        #expect(delivered.allSatisfy { $0.fields["message_sha256"] == String(repeating: "ab", count: 32) })
    }

    @Test func aMessageImportedAgainDeliversNothing() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let first = try importOnce(scratch)
        #expect(first.error == nil && !first.duplicate)
        #expect(first.delivered.map(\.ordinal) == [0, 1, 2])
        let second = try importOnce(scratch)
        #expect(second.error == nil && second.duplicate && second.delivered.isEmpty)
        try expectEachOnce(scratch)
        #expect(try scratch.inboxEntries().allSatisfy { !$0.hasPrefix(".") }, "no staging left")
        let imported = try scratch.inbox.log.records(kinds: ["imported"])
        #expect(imported.map { $0.fields["duplicate"] } == ["false", "true"])
        #expect(imported.map { $0.fields["attachments"] } == ["3", "0"])
        #expect(imported.first?.fields["message_id"] == "<m1@example.org>")
    }

    @Test func aCrashBeforeTheRenameDeliversItOnceAndACrashAfterItDeliversItNever() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let index = try ImportIndex(container: scratch.container)
        let (message, folder) = try staged(scratch)
        // The crash: all three recorded as placing; only the first renamed into the Inbox.
        try index.markPlacing(Self.key, message.attachments.enumerated().map { ($0.offset, $0.element) })
        let first = message.attachments[0]
        try system_renameat2(folder.rawValue, first.staging, folder.rawValue, first.name, .noReplace)

        let again = try importOnce(scratch, index: index)

        #expect(again.error == nil)
        #expect(again.delivered.map(\.ordinal) == [1, 2], "only what was not renamed")
        #expect(try scratch.inboxEntries().sorted() == Self.attachments.map(\.name).sorted(), "stale staging removed")
        #expect(try index.isComplete(Self.key))
    }

    @Test func aFailureAtAnySystemCallLeavesARetryToDeliverExactlyTheMissing() throws {
        let sweep = FaultSweep<(Scratch, StagedMessage, SharedDescriptor, ImportIndex)>(
            setup: {
                let scratch = try Scratch()
                let (message, folder) = try staged(scratch)
                return (scratch, message, folder, try ImportIndex(container: scratch.container))
            },
            operation: { scratch, message, folder, index in
                if let error = scratch.inbox.placeOnce(message, index: index, folder: folder.rawValue).error {
                    throw error
                }
            },
            check: { context, outcome, plan in
                let (scratch, _, _, index) = context
                expectClearError(outcome, plan)
                let retry = try importOnce(scratch, index: index)
                #expect(retry.error == nil, "\(plan.summary): \(retry.error?.message ?? "")")
                try expectEachOnce(scratch)
                #expect(try index.isComplete(Self.key), "\(plan.summary)")
            },
            teardown: { $0.0.remove() })
        try sweep.run("import placement")
    }

    @Test func twentyImportersAtOnceDeliverEachAttachmentOnce() async throws {
        let scratch = try Scratch()
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
        let scratch = try Scratch()
        defer { scratch.remove() }
        let index = try ImportIndex(container: scratch.container)
        let (message, _) = try staged(scratch)
        // The first is recorded as placing (a crash left it); the others are orphans of a crashed import.
        try index.markPlacing(Self.key, [(0, message.attachments[0])])
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
        let scratch = try Scratch()
        defer { scratch.remove() }
        let index = try ImportIndex(container: scratch.container)
        let (message, _) = try staged(scratch)
        // The backup catches the import between its placing records and the renames: the staging files are
        // left out of the archive, the records are in it.
        try index.markPlacing(Self.key, message.attachments.enumerated().map { ($0.offset, $0.element) })
        _ = try BackupArchive(path: scratch.outside("backup.tar")).write(from: scratch.container)
        let restored = try Container.create(at: scratch.outside("restored"), appName: "Restored")
        _ = try BackupArchive(path: scratch.outside("backup.tar")).restore(into: restored)

        let inbox = try Inbox(container: restored)
        let folder = SharedDescriptor(try restored.openFolder(.inbox))
        let copies = try Self.attachments.map { attachment in
            try inbox.stage(
                Inbox.importStagingName(), named: try name(attachment.name), shown: attachment.name,
                in: folder.rawValue
            ) { file in try file.writeAll(attachment.bytes) }
        }
        let again = inbox.placeOnce(
            StagedMessage(key: Self.key, messageID: nil, source: "m1.eml", attachments: copies),
            index: try ImportIndex(container: restored), folder: folder.rawValue)
        #expect(again.error == nil)
        #expect(again.delivered.map(\.ordinal) == [0, 1, 2], "nothing taken for placed that never was")
    }
}
