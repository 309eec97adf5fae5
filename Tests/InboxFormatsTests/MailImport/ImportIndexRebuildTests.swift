import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// The import index is a cache of the event log (ARCHITECTURE.md, "The index is a cache of the log"): damaged,
/// foreign, unreadable or missing, it is rebuilt from the log's records, rotated files included, and nothing the log
/// holds is delivered twice; a failure that is not damage leaves it where it is.
@Suite struct ImportIndexRebuildTests {
    /// A message with `count` attachments, each named after the message.
    static func message(_ number: Int, attachments count: Int) -> String {
        MailFixtures.numbered(number, attachments: count)
    }

    /// An mbox of three messages, with one, two and three attachments.
    static let mbox = MailFixtures.numberedMbox

    /// Imports `path` with a fresh importer; the statuses of its messages.
    private func importAll(_ scratch: Scratch, _ path: String) throws -> [ImportedMessage.Status] {
        let importer = try MailImporter(inbox: scratch.inbox)
        var statuses: [ImportedMessage.Status] = []
        try importer.importSource(path) { statuses.append($0.status) }
        return statuses
    }

    private func writeMbox(_ scratch: Scratch) throws -> String {
        let path = scratch.outside("mail.mbox")
        try makeFile(path, Array(Self.mbox.utf8))
        return path
    }

    /// The Inbox's items, each with its content.
    private func inboxContents(_ scratch: Scratch) throws -> [String: [UInt8]] {
        var contents: [String: [UInt8]] = [:]
        for name in try scratch.inboxEntries() { contents[name] = try readFile(scratch.inboxPath(name)) }
        return contents
    }

    /// The names in the state folder that begin with `import.sqlite.damaged-`, without the write-ahead log and
    /// shared memory set aside beside an index found damaged while open.
    private func setAside(_ scratch: Scratch) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: scratch.container.stateDirectory)
            .filter { $0.hasPrefix("import.sqlite.damaged-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }
            .sorted()
    }

    /// Runs python3 with `script` and its arguments; its exit status.
    private func python(_ script: String, _ arguments: String...) throws -> Int32 {
        try runProgram("/usr/bin/python3", ["-c", script] + arguments).status
    }

    enum Damage: String, CaseIterable {
        case garbage, truncated, garbledPage, foreign, folder, fifo
    }

    /// Damages the index as `damage` says, once it is quiet: its write-ahead log, which the importer keeps,
    /// checkpointed into it and removed (by python3's sqlite3, which does so when it closes the last connection).
    private func damage(_ scratch: Scratch, _ damage: Damage) throws {
        let path = ImportIndex.path(scratch.container)
        let quiet = try python(
            "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('PRAGMA wal_checkpoint(TRUNCATE)'); db.close()",
            path)
        #expect(quiet == 0)
        // Removed, or emptied where an importer still has the index open.
        let kept = exists(path + "-wal") ? try status(path + "-wal").size : 0
        #expect(kept == 0, "quiet")
        switch damage {
        case .garbage:
            try FileManager.default.removeItem(atPath: path)
            try makeFile(path, pattern(20_000, seed: 7))
        case .truncated:
            #expect(truncate(path, Int(try status(path).size / 2)) == 0)
        case .garbledPage:
            // Every page but the first (the header and the schema), which open and the schema check read.
            let size = Int(try status(path).size)
            #expect(size > 4_096)
            let file = try FileDescriptor(path, [.writeOnly])
            #expect(try system_pwrite(file.rawValue, pattern(size - 4_096, seed: 9), at: 4_096) == size - 4_096)
        case .foreign:
            try FileManager.default.removeItem(atPath: path)
            let made = try python(
                """
                import sqlite3, sys
                db = sqlite3.connect(sys.argv[1])
                db.execute("CREATE TABLE messages(key BLOB PRIMARY KEY, body TEXT)")
                db.execute("INSERT INTO messages VALUES (x'00', 'not ours')")
                db.commit()
                """, path)
            #expect(made == 0)
        case .folder:
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        case .fifo:
            try FileManager.default.removeItem(atPath: path)
            #expect(mkfifo(path, 0o644) == 0)
        }
    }

    @Test(arguments: Damage.allCases) func aDamagedIndexIsSetAsideAndRebuiltSoNothingIsDeliveredTwice(
        _ kind: Damage
    ) throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let mbox = try writeMbox(scratch)
        #expect(try importAll(scratch, mbox) == [.imported, .imported, .imported])
        let before = try inboxContents(scratch)
        #expect(before.count == 6)
        try damage(scratch, kind)

        #expect(try importAll(scratch, mbox) == [.duplicate, .duplicate, .duplicate], "\(kind)")

        #expect(try inboxContents(scratch) == before, "nothing new in the Inbox")
        let aside = try setAside(scratch)
        #expect(aside.count == 1, "\(aside)")
        #expect(aside.allSatisfy { $0.wholeMatch(of: /import\.sqlite\.damaged-[0-9]+/) != nil }, "\(aside)")
        let errors = try scratch.inbox.log.records(kinds: [.error])
        #expect(errors.count == 1)
        // A garbled page is found by the first lookup that reads it (the open reads the header and the schema).
        let during = kind == .garbledPage ? "read the import index" : "open the import index"
        #expect(errors.first?.fields["during"] == during)
        #expect(errors.first?.fields["path"] == Container.stateRelativePath + "/" + (aside.first ?? ""))
        // The rebuilt index is sound: a third import opens it as it is.
        #expect(try importAll(scratch, mbox) == [.duplicate, .duplicate, .duplicate])
        #expect(try setAside(scratch).count == 1)
        #expect(try scratch.inbox.log.records(kinds: [.error]).count == 1)
    }

    @Test func damageMetByAnImporterWithTheIndexOpenIsSetAsideAndTheImportGoesOn() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let mbox = try writeMbox(scratch)
        #expect(try importAll(scratch, mbox) == [.imported, .imported, .imported])
        let importer = try MailImporter(inbox: scratch.inbox)
        try damage(scratch, .garbledPage)

        var statuses: [ImportedMessage.Status] = []
        try importer.importSource(mbox) { statuses.append($0.status) }

        #expect(statuses == [.duplicate, .duplicate, .duplicate])
        #expect(try scratch.inboxEntries().count == 6, "nothing delivered twice")
        #expect(try setAside(scratch).count == 1)
        let errors = try scratch.inbox.log.records(kinds: [.error])
        #expect(errors.map { $0.fields["during"] } == ["read the import index"])
    }

    @Test func theKeptWriteAheadLogStaysSmallHoweverManyMessagesAreImportedOneByOne() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        for number in 0..<100 {
            let path = scratch.outside("m\(number).eml")
            try makeFile(path, Array(Self.message(number, attachments: 1).utf8))
            #expect(try importAll(scratch, path) == [.imported])
        }
        // Each open reads the whole log: a checkpoint keeps it to about `keptWriteAheadPages` pages (each with
        // its 24-byte frame header, after the log's 32-byte header), where SQLite's own measure lets 1,000 gather.
        let size = try status(ImportIndex.path(scratch.container) + "-wal").size
        #expect(size <= 32 + Int64(SQLiteDatabase.keptWriteAheadPages + 8) * (4_096 + 24), "\(size) bytes")
        #expect(try scratch.inboxEntries().count == 100)
    }

    @Test func onAFuseFilesystemTheIndexKeepsARollbackJournal() throws {
        let mount = try FuseMount()
        for (root, mode) in [(mount.mountPoint, 1), (FileManager.default.temporaryDirectory.path, 2)] {
            let scratch = try Scratch.withInbox(under: root)
            defer { scratch.remove() }
            let path = scratch.outside("m.eml")
            try makeFile(path, Array(Self.message(1, attachments: 1).utf8))
            #expect(try importAll(scratch, path) == [.imported])
            // The file format's read and write versions (bytes 18 and 19): 1 for a rollback journal, 2 for WAL.
            let header = try readFile(ImportIndex.path(scratch.container)).prefix(20)
            #expect(Array(header.suffix(2)) == [UInt8(mode), UInt8(mode)], "\(root)")
            #expect(exists(ImportIndex.path(scratch.container) + "-wal") == (mode == 2), "\(root)")
            #expect(try scratch.inboxEntries().count == 1)
        }
    }

    @Test func aMissingIndexIsBuiltFromTheLogWithNothingSetAside() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let mbox = try writeMbox(scratch)
        _ = try importAll(scratch, mbox)
        // The index and the write-ahead log the importer keeps beside it.
        for suffix in ["", "-wal", "-shm"] {
            try FileManager.default.removeItem(atPath: ImportIndex.path(scratch.container) + suffix)
        }

        #expect(try importAll(scratch, mbox) == [.duplicate, .duplicate, .duplicate])
        #expect(try setAside(scratch).isEmpty)
        #expect(try scratch.inbox.log.records(kinds: [.error]).isEmpty)
        #expect(try scratch.inboxEntries().count == 6)
    }

    @Test func aCutImportDeliversExactlyTheMissingAfterARebuild() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let path = scratch.outside("m3.eml")
        try makeFile(path, Array(Self.message(3, attachments: 3).utf8))
        // The third rename fails: two attachments delivered and logged, no `imported` record.
        do {
            let importer = try MailImporter(inbox: scratch.inbox)
            let plan = SyscallFaultPlan(failing: 3, only: "renameat2", with: Errno(rawValue: ENOSPC))
            #expect(throws: ContainerError.self) { try plan.run { try importer.importSource(path) { _ in } } }
        }
        #expect(try scratch.inboxEntries() == ["m3-0.bin", "m3-1.bin"])
        #expect(try scratch.inbox.log.records(kinds: [.imported]).isEmpty)
        try damage(scratch, .garbage)

        let again = try MailImporter(inbox: scratch.inbox)
        var delivered: [String] = []
        try again.importSource(path) { delivered += $0.attachments.map(\.item.name.string) }

        #expect(delivered == ["m3-2.bin"], "exactly the missing one")
        #expect(try scratch.inboxEntries() == ["m3-0.bin", "m3-1.bin", "m3-2.bin"])
        #expect(try scratch.inbox.log.records(kinds: [.delivered]).count == 3)
        #expect(try scratch.inbox.log.records(kinds: [.imported]).map { $0.fields["duplicate"] } == ["false"])
    }

    @Test func theRotatedLogFilesAreReadToo() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let mbox = try writeMbox(scratch)
        _ = try importAll(scratch, mbox)
        // An append past a tiny size rotates the log: the import records are only in the rotated file now.
        try EventLog(directory: scratch.container.stateDirectory, maxBytes: 1).append(Event(.rescan))
        let live =
            (try? String(contentsOfFile: scratch.container.stateDirectory + "/events.jsonl", encoding: .utf8)) ?? ""
        #expect(!live.contains("\"imported\""))
        #expect(try scratch.inbox.log.rotatedFiles().count == 1)
        try damage(scratch, .garbage)

        #expect(try importAll(scratch, mbox) == [.duplicate, .duplicate, .duplicate])
        #expect(try scratch.inboxEntries().count == 6)
    }

    @Test func anIndexFromBeforeTheStampIsKeptAndStamped() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let key = Array(repeating: UInt8(0x5A), count: 32)
        try writeEarlierIndex(
            scratch, version: 0, #"db.execute("INSERT INTO messages VALUES (?, NULL, 1, 1)", (bytes([0x5A] * 32),))"#)

        let index = try ImportIndex(container: scratch.container)

        #expect(try index.isComplete(key), "what it held is kept")
        #expect(try setAside(scratch).isEmpty)
        var stamp: [Int64] = []
        try index.database.query("SELECT * FROM pragma_application_id, pragma_user_version") { row in
            stamp = [row.integer(0), row.integer(1)]
        }
        #expect(stamp == [ImportIndex.applicationID, ImportIndex.schemaVersion])
        #expect(try columns(index, "messages") == ImportIndex.messagesColumns)
        #expect(try columns(index, "parts") == ImportIndex.partsColumns)
    }

    @Test func anIndexOfVersionOneIsKeptAndGainsTheColumnOfTwo() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try writeEarlierIndex(
            scratch, version: 1,
            #"db.execute("INSERT INTO parts VALUES (?, 0, 0, ?, 1, 2, NULL)", (bytes([0x5A] * 32), b".inbox-import.1"))"#
        )

        let index = try ImportIndex(container: scratch.container)

        #expect(try setAside(scratch).isEmpty)
        #expect(try columns(index, "parts") == ImportIndex.partsColumns)
        let placing = try index.placingParts()
        #expect(placing.map(\.inode) == [2], "what it held is kept")
        #expect(placing.map(\.notExpanded) == [nil])
    }

    /// Writes an import index as schema `version` had it (0: before the stamp), with what the Python statements
    /// `rows` put in it through `db`.
    private func writeEarlierIndex(_ scratch: Scratch, version: Int, _ rows: String) throws {
        let made = try python(
            """
            import sqlite3, sys
            version = int(sys.argv[2])
            db = sqlite3.connect(sys.argv[1])
            db.execute("CREATE TABLE messages(key BLOB PRIMARY KEY, message_id TEXT, attachments INTEGER NOT NULL, "
                       "complete INTEGER NOT NULL" + (", source TEXT" if version >= 1 else "") + ") WITHOUT ROWID")
            db.execute("CREATE TABLE parts(key BLOB NOT NULL, ordinal INTEGER NOT NULL, delivered INTEGER NOT NULL, "
                       "staging BLOB, device INTEGER, inode INTEGER, name BLOB, PRIMARY KEY(key, ordinal)) WITHOUT ROWID")
            if version >= 1:
                db.execute("PRAGMA application_id = \(ImportIndex.applicationID)")
                db.execute(f"PRAGMA user_version = {version}")
            \(rows)
            db.commit()
            """, ImportIndex.path(scratch.container), "\(version)")
        #expect(made == 0)
    }

    /// The columns of one of the index's tables, in order.
    private func columns(_ index: ImportIndex, _ table: String) throws -> [String] {
        var names: [String] = []
        try index.database.query("SELECT name FROM pragma_table_info(?)", [.text(table)]) { row in
            names.append(String(decoding: row.blob(0), as: UTF8.self))
        }
        return names
    }

    @Test func aFailureThatIsNotDamageNeverSetsASoundIndexAside() throws {
        // A sound index opened with each system call failing in turn: never set aside, never rebuilt.
        let sweep = FaultSweep<(Scratch, String)>(
            setup: {
                let scratch = try Scratch.withInbox()
                let mbox = try writeMbox(scratch)
                _ = try importAll(scratch, mbox)
                return (scratch, mbox)
            },
            operation: { scratch, _ in _ = try ImportIndex(container: scratch.container) },
            check: { context, outcome, plan throws in
                let (scratch, mbox) = context
                expectClearError(outcome, plan)
                #expect(try setAside(scratch).isEmpty, "\(plan.summary)")
                #expect(try scratch.inbox.log.records(kinds: [.error]).isEmpty, "\(plan.summary)")
                #expect(try importAll(scratch, mbox) == [.duplicate, .duplicate, .duplicate], "\(plan.summary)")
            },
            teardown: { $0.0.remove() })
        // EACCES and EPERM at the index's own open are its being unreadable, which is set aside by design.
        try sweep.run(
            "open a sound import index",
            errors: FaultSweep<(Scratch, String)>.errors.filter { ![EACCES, EPERM].contains($0.rawValue) })
    }

    @Test(.long) func aRebuildCutShortAtAnyCallLeavesTheIndexToBeRebuiltNextTime() throws {
        let sweep = FaultSweep<(Scratch, String, [String: [UInt8]])>(
            setup: {
                let scratch = try Scratch.withInbox()
                let mbox = try writeMbox(scratch)
                _ = try importAll(scratch, mbox)
                let before = try inboxContents(scratch)
                try damage(scratch, .garbage)
                return (scratch, mbox, before)
            },
            operation: { scratch, _, _ in _ = try ImportIndex(container: scratch.container) },
            check: { context, outcome, plan throws in
                let (scratch, mbox, before) = context
                expectClearError(outcome, plan)
                #expect(try importAll(scratch, mbox) == [.duplicate, .duplicate, .duplicate], "\(plan.summary)")
                #expect(try inboxContents(scratch) == before, "\(plan.summary)")
                // Set aside once, whole, whatever failed first.
                #expect(try setAside(scratch).count == 1, "\(plan.summary)")
            },
            teardown: { $0.0.remove() })
        try sweep.run("rebuild a damaged import index")
    }
}
