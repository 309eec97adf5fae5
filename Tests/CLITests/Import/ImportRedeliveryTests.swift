import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox import` where mail comes from in practice: redelivered by an MTA with its trace fields, a Maildir with
/// things in it that are not messages, a pipe, a path that is not UTF-8 (ARCHITECTURE.md, "Mail import").
@Suite struct ImportRedeliveryTests {
    /// What Postfix's local(8) puts before a message it pipes to a command.
    static let postfixTrace = """
        Return-Path: <alice@example.org>
        X-Original-To: bob+inbox@localhost
        Delivered-To: bob+inbox@localhost
        Received: by host.localdomain (Postfix, from userid 1000)
        \tid 4F1A2B3C4D; Fri,  4 Dec 2026 20:00:00 +0000 (UTC)

        """

    /// `Oracle/message_key.py KIND PATH…`: the key of each message.
    static func oracleKeys(_ kind: String, _ paths: [String]) throws -> [String] {
        let oracle = try MailFixtures.oracleLines("message_key", kind, paths)
        #expect(oracle.succeeded)
        return oracle.lines
    }

    /// The `--json` objects of an import.
    static func objects(_ result: InboxProcess.Result) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]])
    }

    /// `inbox ARGS…` under `timeout`, so a hang fails the test (status 124) instead of stalling it.
    static func runWithDeadline(_ arguments: [[UInt8]]) throws -> InboxProcess.Result {
        try InboxProcess.run(
            [Array("60".utf8), Array(InboxProcess.binary.utf8)] + arguments, executable: "/usr/bin/timeout")
    }

    @Test func aMessageRedeliveredWithPostfixsTraceFieldsIsADuplicate() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let first = try InboxProcess.run(
            "--container", container, "import", "--json", "-", input: ImportCommandTests.message)
        #expect(first.status == 0, "\(first.stderr)")
        let delivered = try Self.objects(first)
        #expect(delivered.first?["status"] as? String == "imported")
        let redelivered =
            "From MAILER-DAEMON Fri Dec  4 20:00:00 2026\n" + Self.postfixTrace + ImportCommandTests.message
        let again = try InboxProcess.run(
            "--container", container, "import", "--json", "-",
            input: redelivered.replacingOccurrences(of: "\n", with: "\r\n"))
        #expect(again.status == 0, "\(again.stderr)")
        let second = try #require(try Self.objects(again).first)
        #expect(second["status"] as? String == "duplicate")
        #expect(second["message_sha256"] as? String == delivered.first?["message_sha256"] as? String)
        #expect((second["attachments"] as? [Any])?.isEmpty == true)
        let imported = logRecords(container, event: "imported")
        #expect(imported.map { $0["duplicate"] as? Bool } == [false, true])
        let path = try folder.file("report.eml", ImportCommandTests.message)
        let expected = try ImportCommandTests.oracle(path)
        #expect(expected.count == 3)
        #expect(try ImportCommandTests.contents(container) == expected.compactMap { $0["sha256"] as? String }.sorted())
        #expect(try Self.oracleKeys("message", [path]) == [second["message_sha256"] as? String ?? ""])
    }

    @Test func standardInputIsAlwaysOneMessage() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let input =
            "From alice@example.org Mon Jan  1 00:00:00 2024\n" + ImportCommandTests.message
            + "\nFrom bob@example.org Mon Jan  1 00:00:01 2024\nSubject: not a message of its own\n\nbody\n"
        let path = try folder.file("stdin.txt", input)
        let result = try InboxProcess.run("--container", container, "import", "--json", "-", input: input)
        #expect(result.status == 0, "\(result.stderr)")
        let objects = try Self.objects(result)
        #expect(objects.count == 1)
        #expect(objects.first?["source"] as? String == "-")
        #expect(objects.first?["message_sha256"] as? String == (try Self.oracleKeys("message", [path])).first)
    }

    @Test func aMaildirsEntriesThatAreNotMessagesAreSkippedAndReported() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let maildir = folder.path + "/Maildir"
        for sub in ["cur", "new", "tmp"] {
            try FileManager.default.createDirectory(atPath: maildir + "/" + sub, withIntermediateDirectories: true)
        }
        let good = [maildir + "/new/1.host", maildir + "/cur/2.host:2,S"]
        try Data(ImportCommandTests.message.utf8).write(to: URL(fileURLWithPath: good[0]))
        let other = ImportCommandTests.message.replacingOccurrences(of: "AAECAwQFBgc=", with: "CAkKCwwNDg8=")
        try Data(other.utf8).write(to: URL(fileURLWithPath: good[1]))
        #expect(mkfifo(maildir + "/new/3.fifo", 0o644) == 0)
        #expect(mknod(maildir + "/new/4.socket", S_IFSOCK | 0o644, 0) == 0)
        try FileManager.default.createDirectory(atPath: maildir + "/cur/5.folder", withIntermediateDirectories: false)
        #expect(symlink(maildir + "/nowhere", maildir + "/cur/6.dangling") == 0)
        #expect(symlink(good[0], maildir + "/cur/7.link") == 0)

        let result = try Self.runWithDeadline(
            ["--container", container, "import", "--json", maildir].map { Array($0.utf8) })
        #expect(result.status == 0, "a skip is no failure: \(result.stderr)")
        let objects = try Self.objects(result)
        #expect(objects.map { $0["status"] as? String } == ["imported", "imported"])
        let keys = objects.compactMap { $0["message_sha256"] as? String }
        #expect(keys.sorted() == (try Self.oracleKeys("message", good)).sorted())
        let skipped = result.stderr.split(separator: "\n").filter { $0.hasPrefix("inbox: skipped '") }
        #expect(skipped.count == 5, "\(result.stderr)")
        for name in ["new/3.fifo", "new/4.socket", "cur/5.folder", "cur/6.dangling", "cur/7.link"] {
            #expect(skipped.contains { $0.hasPrefix("inbox: skipped '\(maildir)/\(name)': ") }, "\(name)")
        }
    }

    @Test func aPipeSourceIsReadOnceAsAnMbox() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        var box = ""
        for number in 1...3 {
            let message = ImportCommandTests.message.replacingOccurrences(
                of: "AAECAwQFBgc=", with: "AAECAwQFBg\(number)=")
            box += "From alice@example.org Mon Jan  1 00:00:0\(number) 2024\n" + message + "\n"
        }
        let path = try folder.file("three.mbox", box)
        let script = "exec \"$0\" --container \"$1\" import --json <(cat \"$2\")"
        let result = try InboxProcess.run(
            ["-c", script, InboxProcess.binary, container, path].map { Array($0.utf8) }, executable: "/bin/bash")
        #expect(result.status == 0, "\(result.stderr)")
        let objects = try Self.objects(result)
        #expect(objects.map { $0["status"] as? String } == ["imported", "imported", "imported"])
        #expect(objects.map { $0["message_sha256"] as? String } == (try Self.oracleKeys("mbox", [path])))
        #expect((objects.first?["source"] as? String)?.hasPrefix("/dev/fd/") == true)
    }

    @Test func aSourcePathThatIsNotUTF8IsImportedAndLoggedExactly() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let path = Array((folder.path + "/caf").utf8) + [0xFF] + Array(".eml".utf8)
        let notMail = Array((folder.path + "/junk").utf8) + [0xFE]
        for (file, text) in [(path, ImportCommandTests.message), (notMail, "no header here\n")] {
            let fd = open(file.map { CChar(bitPattern: $0) } + [0], O_WRONLY | O_CREAT | O_EXCL, 0o644)
            try #require(fd >= 0)
            #expect(write(fd, text, text.utf8.count) == text.utf8.count)
            close(fd)
        }
        let missing = Array((folder.path + "/missing").utf8) + [0xFD]
        let result = try InboxProcess.run(
            ["--container", container, "import", "--json"].map { Array($0.utf8) } + [path, notMail, missing])
        #expect(result.status == 65, "the second is not a message: \(result.stderr)")
        let objects = try Self.objects(result)
        #expect(objects.map { $0["status"] as? String } == ["imported", "refused"])
        #expect(objects.first?["source_b64"] as? String == Data(path).base64EncodedString())
        #expect((objects.first?["source"] as? String)?.hasSuffix("caf\u{FFFD}.eml") == true)
        #expect((objects.first?["attachments"] as? [Any])?.count == 3)
        #expect(result.stderr.contains("cannot read '\(folder.path)/missing\\xfd'"), "shown escaped: \(result.stderr)")
        let rejected = logRecords(container, event: "rejected")
        #expect(rejected.map { $0["source_b64"] as? String } == [Data(notMail).base64EncodedString()])
        let imported = logRecords(container, event: "imported")
        #expect(imported.map { $0["source_b64"] as? String } == [Data(path).base64EncodedString()])
    }
}
