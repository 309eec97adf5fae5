import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox import` with a damaged, foreign or unreadable import index (ARCHITECTURE.md, "The index is a cache of the
/// log"): the index is set aside and rebuilt from the event log, so no mail is refused and none delivered twice.
@Suite struct ImportIndexDamageTests {
    /// Message `number`, with `number` attachments.
    static func message(_ number: Int) -> String { MailFixtures.numbered(number, attachments: number) }

    /// Three messages: one, two and three attachments.
    static let mbox = MailFixtures.numberedMbox

    enum Damage: String, CaseIterable {
        case garbage, truncated, foreign, folder
    }

    /// Runs python3's sqlite3 on the index with `code` (the connection is `db`).
    static func python(_ index: String, _ code: String) throws -> Int32 {
        try runProgram(
            "/usr/bin/python3", ["-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); " + code, index]
        ).status
    }

    /// Damages the index as `damage` says, once it is quiet: the write-ahead log the importer keeps checkpointed
    /// into it and removed (python3's sqlite3 does so when it closes the last connection).
    static func damage(_ index: String, _ damage: Damage) throws {
        #expect(try python(index, "db.execute('PRAGMA wal_checkpoint(TRUNCATE)'); db.close()") == 0)
        #expect(!FileManager.default.fileExists(atPath: index + "-wal"), "quiet")
        switch damage {
        case .garbage:
            try FileManager.default.removeItem(atPath: index)
            try Data(repeating: 0xA5, count: 16_384).write(to: URL(fileURLWithPath: index))
        case .truncated:
            let size = try FileManager.default.attributesOfItem(atPath: index)[.size] as? Int ?? 0
            #expect(truncate(index, off_t(size / 2)) == 0)
        case .foreign:
            try FileManager.default.removeItem(atPath: index)
            #expect(try python(index, "db.execute('CREATE TABLE notes(x)'); db.commit()") == 0)
        case .folder:
            try FileManager.default.removeItem(atPath: index)
            try FileManager.default.createDirectory(atPath: index, withIntermediateDirectories: false)
        }
    }

    @Test(arguments: Damage.allCases) func aDamagedIndexIsRebuiltAndEveryMessageIsADuplicate(_ kind: Damage) throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let mbox = try folder.file("mail.mbox", Self.mbox)
        let first = try InboxProcess.run("--container", container, "import", mbox)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.lines.count == 6)
        let state = container + "/Library/Application Support/inbox"
        let inbox = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").sorted()
        try Self.damage(state + "/import.sqlite", kind)

        let again = try InboxProcess.run("--container", container, "import", "--json", mbox)

        #expect(again.status == 0, "\(kind): \(again.stderr)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout)) as? [[String: Any]])
        #expect(objects.map { $0["status"] as? String } == ["duplicate", "duplicate", "duplicate"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").sorted() == inbox)
        let aside = try FileManager.default.contentsOfDirectory(atPath: state).filter {
            $0.hasPrefix("import.sqlite.damaged-")
        }
        #expect(aside.count == 1 && aside.allSatisfy { $0.wholeMatch(of: /import\.sqlite\.damaged-[0-9]+/) != nil })
        let errors = logRecords(container, event: "error")
        #expect(errors.count == 1)
        #expect(errors.first?["path"] as? String == "Library/Application Support/inbox/" + (aside.first ?? ""))
        // An MTA's next message, on standard input, goes through the rebuilt index: a duplicate, exit 0.
        let piped = try InboxProcess.run("--container", container, "import", "-", input: Self.message(2))
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stdout.isEmpty, "imported before")
        #expect(logRecords(container, event: "error").count == 1)
    }
}
