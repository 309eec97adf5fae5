import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox import`: real mail in, each attachment delivered once, with the exit statuses an MTA expects
/// (ARCHITECTURE.md, "Mail import").
@Suite struct ImportCommandTests {
    static let corpus = "/usr/lib/python3.11/test/test_email/data"

    /// The shared sample message and oracle (TestSupport's `MailFixtures`), under the names these tests use.
    static let message = MailFixtures.message
    static func oracle(_ path: String) throws -> [[String: Any]] { try MailFixtures.oracle(path) }
    static func contents(_ container: String) throws -> [String] { try MailFixtures.contents(container) }

    @Test func aMessageIsImportedAsPythonReadsItAndOnlyOnce() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let path = try folder.file("report.eml", Self.message)
        let expected = try Self.oracle(path)
        #expect(expected.count == 3, "the oracle finds the two attachments and the forwarded one")

        let first = try InboxProcess.run("--container", container, "import", "--json", path)
        #expect(first.status == 0, "\(first.stderr)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout)) as? [[String: Any]])
        let message = try #require(objects.first)
        #expect(message["status"] as? String == "imported")
        #expect(message["message_id"] as? String == "report-1@example.org")
        #expect(message["subject"] as? String == "the report")
        let attachments = try #require(message["attachments"] as? [[String: Any]])
        #expect(attachments.map { $0["name"] as? String } == expected.map { $0["name"] as? String })
        #expect(attachments.map { $0["sha256"] as? String } == expected.map { $0["sha256"] as? String })
        #expect(attachments.map { $0["size"] as? Int } == expected.map { $0["size"] as? Int })
        #expect(attachments.allSatisfy { ($0["path"] as? String)?.hasPrefix(container + "/Documents/Inbox/") == true })
        #expect(try Self.contents(container) == expected.compactMap { $0["sha256"] as? String }.sorted())

        let again = try InboxProcess.run("--container", container, "import", path)
        #expect(again.status == 0 && again.stdout.isEmpty, "\(again.stderr)")
        #expect(try Self.contents(container).count == 3, "nothing delivered twice")
        let imported = logRecords(container, event: "imported")
        #expect(imported.map { $0["duplicate"] as? Bool } == [false, true])
        let delivered = logRecords(container, event: "delivered")
        #expect(
            delivered.count == 3
                && delivered.allSatisfy { $0["message_sha256"] as? String == message["message_sha256"] as? String })
    }

    @Test func pythonsCorpusIsImportedAsPythonReadsIt() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.corpus)
            .filter { $0.hasPrefix("msg_") && $0.hasSuffix(".txt") }.sorted().map { Self.corpus + "/" + $0 }
        #expect(files.count > 40)
        let result = try InboxProcess.run(
            (["--container", container, "import", "--json"] + files).map { Array($0.utf8) })
        // msg_19 does not start with a header field: not a message, so refused (65); every other source goes on.
        #expect(result.status == 65, "\(result.stderr)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]])
        #expect(objects.count == files.count)
        var compared = 0
        for object in objects where object["status"] as? String == "imported" {
            let source = try #require(object["source"] as? String)
            // msg_15 reuses its outer boundary inside: Python loses an attachment there that we find.
            guard !source.hasSuffix("msg_15.txt") else { continue }
            let ours = (object["attachments"] as? [[String: Any]] ?? []).map {
                "\($0["size"] ?? "") \($0["sha256"] ?? "")"
            }
            let theirs = try Self.oracle(source).map { "\($0["size"] ?? "") \($0["sha256"] ?? "")" }
            #expect(ours == theirs, "\(source)")
            compared += 1
        }
        #expect(compared > 40)
        #expect(
            objects.filter { $0["status"] as? String == "refused" }.compactMap { $0["source"] as? String }.map {
                ($0 as NSString).lastPathComponent
            } == ["msg_19.txt"])
    }

    @Test func theExitStatusIsWhatAnMTAExpects() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let good = try folder.file("good.eml", Self.message)
        let garbage = try folder.file("garbage.txt", "no header here\n")
        let missing = try InboxProcess.run("--container", container, "import", folder.path + "/missing.eml", good)
        #expect(missing.status == 66)
        #expect(missing.lines.count == 3, "every source is still tried: \(missing.stdoutText)")
        let bad = try InboxProcess.run("--container", container, "import", garbage)
        #expect(bad.status == 65)
        #expect(bad.stderr.split(separator: "\n").count == 1, "one line for one message: \(bad.stderr)")
        let tooBig = try folder.file("big.eml", Self.message.replacingOccurrences(of: "report-1", with: "report-2"))
        let refused = try InboxProcess.run("--container", container, "import", "--max-bytes", "10", tooBig)
        #expect(refused.status == 65)
        #expect(logRecords(container, event: "rejected").count == 2)
        // Refused under a small limit, it may be imported later under a larger one.
        #expect(try InboxProcess.run("--container", container, "import", tooBig).status == 0)
    }

    @Test func anMTAHandsAMessageOnStandardInputWithItsEnvelopeLine() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let result = try InboxProcess.run(
            "--container", container, "import", "-",
            input: "From alice@example.org Mon Jan  1 00:00:00 2024\n" + Self.message)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.count == 3)
        // The envelope line is not part of the message: the same message from a file is a duplicate.
        let path = try folder.file("report.eml", Self.message)
        #expect(try InboxProcess.run("--container", container, "import", path).stdout.isEmpty)
        #expect(logRecords(container, event: "imported").last?["duplicate"] as? Bool == true)
    }

    @Test func twentyImportsOfOneMessageAtOnceDeliverItOnce() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let path = try folder.file("report.eml", Self.message)
        let children = try (0..<20).map { _ in
            try InboxProcess.start(["--container", container, "import", path].map { Array($0.utf8) })
        }
        let results = try children.map { try $0.finish() }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        #expect(results.map(\.lines.count).reduce(0, +) == 3, "three attachments delivered in all")
        #expect(try Self.contents(container).count == 3)
    }

    @Test func anMboxAndAMaildirAreImportedWholeAndTheMaildirIsLeftAsItWas() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let second = Self.message.replacingOccurrences(of: "report-1", with: "report-2")
            .replacingOccurrences(of: "AAECAwQFBgc=", with: "CAkKCwwNDg8=")
        let mbox = try folder.file(
            "mail.mbox",
            "From a Mon Jan  1 00:00:00 2024\n" + Self.message + "\nFrom b Mon Jan  1 00:00:01 2024\n" + second)
        let result = try InboxProcess.run("--container", container, "import", "--json", mbox)
        #expect(result.status == 0, "\(result.stderr)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]])
        #expect(objects.map { $0["status"] as? String } == ["imported", "imported"])
        let maildir = folder.path + "/Maildir"
        for sub in ["cur", "new", "tmp"] {
            try FileManager.default.createDirectory(atPath: maildir + "/" + sub, withIntermediateDirectories: true)
        }
        try Self.message.write(toFile: maildir + "/cur/1.host:2,S", atomically: false, encoding: .utf8)
        let third = second.replacingOccurrences(of: "report-2", with: "report-3")
        try third.write(toFile: maildir + "/new/2.host", atomically: false, encoding: .utf8)
        let before = try FileManager.default.subpathsOfDirectory(atPath: maildir).sorted()
        let fromMaildir = try InboxProcess.run("--container", container, "import", "--json", maildir)
        #expect(fromMaildir.status == 0, "\(fromMaildir.stderr)")
        let statuses = try #require(
            try JSONSerialization.jsonObject(with: Data(fromMaildir.stdout)) as? [[String: Any]]
        )
        .map { $0["status"] as? String }
        #expect(statuses.sorted { ($0 ?? "") < ($1 ?? "") } == ["duplicate", "imported"])
        #expect(try FileManager.default.subpathsOfDirectory(atPath: maildir).sorted() == before)
    }

    @Test func twoHundredMailsWithANamelessAttachmentEachAreAllImported() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        // Each nameless attachment is `attachment-1.pdf`: 200 of them clash with each other.
        let messages = (0..<200).map { index in
            """
            From sender Mon Jan  1 00:00:00 2024
            Subject: scan \(index)
            Message-ID: <scan-\(index)@example.org>
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="b"

            --b
            Content-Type: application/pdf
            Content-Disposition: attachment

            %PDF-1.4 scan \(index)
            --b--

            """
        }
        let mbox = try folder.file("scans.mbox", messages.joined())
        let result = try InboxProcess.run("--container", container, "import", mbox)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines.count == 200)
        let names = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox")
        #expect(names.count == 200 && names.allSatisfy { $0.hasPrefix("attachment-1") && $0.hasSuffix(".pdf") })
    }
}
