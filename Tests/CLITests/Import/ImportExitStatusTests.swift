import Foundation
import Glibc
import TestSupport
import Testing

/// What `inbox import` tells an MTA (ARCHITECTURE.md, "Mail import"): for `-`, 65 only for the message itself and
/// 75 for every other failure, so that the MTA keeps the message and tries again; file sources keep the command
/// line's statuses. One line a failure; a summary only when more than one message or source was read.
@Suite struct ImportExitStatusTests {
    static let message = ImportCommandTests.message

    static func stderrLines(_ result: InboxProcess.Result) -> [Substring] {
        result.stderr.split(separator: "\n")
    }

    @Test func everyFaultOfTheInstallationIsTryAgainForStandardInput() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let missing = folder.path + "/no-container"
        let cases: [(String, [String], [String: String])] = [
            ("no container", ["--container", missing, "import", "-"], [:]),
            ("a size that is not one", ["--container", container, "import", "--max-bytes", "lots", "-"], [:]),
            ("an unknown option", ["--container", container, "import", "--nonsense", "-"], [:]),
            ("no $TMPDIR", ["--container", container, "import", "-"], ["TMPDIR": folder.path + "/no-tmp"]),
        ]
        for (what, arguments, environment) in cases {
            let result = try InboxProcess.run(
                arguments.map { Array($0.utf8) }, input: Array(Self.message.utf8), environment: environment)
            #expect(result.status == 75, "\(what): \(result.stderr)")
            #expect(Self.stderrLines(result).count == 1, "\(what): one line: \(result.stderr)")
            #expect(result.stderr.hasPrefix("inbox: "), "\(what)")
        }
        // The same faults with a file SOURCE keep the command line's statuses.
        let file = try folder.file("report.eml", Self.message)
        #expect(try InboxProcess.run("--container", missing, "import", file).status == 73)
        #expect(try InboxProcess.run("--container", container, "import", "--max-bytes", "lots", file).status == 64)
        // No Inbox: standard input is tried again, a file is "no such item".
        try FileManager.default.removeItem(atPath: container + "/Documents/Inbox")
        let noInbox = try InboxProcess.run("--container", container, "import", "-", input: Self.message)
        #expect(noInbox.status == 75, "\(noInbox.stderr)")
        #expect(Self.stderrLines(noInbox).count == 1, "\(noInbox.stderr)")
        #expect(try InboxProcess.run("--container", container, "import", file).status == 66)
        // Once the installation is right, the retry imports the message.
        #expect(mkdir(container + "/Documents/Inbox", 0o755) == 0)
        let retried = try InboxProcess.run("--container", container, "import", "-", input: Self.message)
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(retried.lines.count == 3)
    }

    @Test func aMessageRefusedIsBouncedWithOneLineNamingWhy() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let garbage = try InboxProcess.run("--container", container, "import", "-", input: "no header here\n")
        #expect(garbage.status == 65)
        #expect(
            Self.stderrLines(garbage) == [
                "inbox: refused a message of '-': not a message: no header field before the first blank line"
            ])
        let tooBig = try InboxProcess.run(
            "--container", container, "import", "--max-bytes", "10", "-", input: Self.message)
        #expect(tooBig.status == 65)
        #expect(Self.stderrLines(tooBig).count == 1, "\(tooBig.stderr)")
        #expect(tooBig.stderr.contains("--max-bytes 10"), "the refusal names the limit: \(tooBig.stderr)")
        #expect(tooBig.stdout.isEmpty)
    }

    @Test func aSummaryEndsARunOfSeveralMessagesOrSources() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let good = try folder.file("good.eml", Self.message)
        let garbage = try folder.file("garbage.txt", "no header here\n")
        // Two sources: each failure has its line, then the summary, with the first failure's status.
        let two = try InboxProcess.run("--container", container, "import", garbage, folder.path + "/missing.eml", good)
        #expect(two.status == 65)
        let lines = Self.stderrLines(two)
        #expect(lines.count == 3, "\(two.stderr)")
        #expect(lines.first?.contains("not a message") == true)
        #expect(lines.dropFirst().first?.contains("missing.eml") == true)
        #expect(
            lines.last
                == "inbox: imported 2 messages: 3 attachments, 0 duplicates, 1 refused; 1 of 3 sources failed (see above)"
        )
        // One mbox of several messages is several too.
        let mbox = try folder.file(
            "two.mbox",
            "From a@example.org Mon Jan  1 00:00:00 2024\nno header here\n\n"
                + "From b@example.org Mon Jan  1 00:00:01 2024\n" + Self.message)
        let several = try InboxProcess.run("--container", container, "import", mbox)
        #expect(several.status == 65)
        #expect(Self.stderrLines(several).count == 2, "\(several.stderr)")
        #expect(several.stderr.hasSuffix("1 duplicate, 1 refused (see above)\n"), "\(several.stderr)")
        // A run without failure says nothing on stderr when it is not a terminal.
        let quiet = try InboxProcess.run("--container", container, "import", good, good)
        #expect(quiet.status == 0)
        #expect(quiet.stderr.isEmpty, "\(quiet.stderr)")
        // On a terminal, such a run ends with its summary.
        let shown = try InboxProcess.run(
            ["--container", container, "import", good, good].map { Array($0.utf8) }, stderrIsTerminal: true)
        #expect(shown.status == 0)
        #expect(
            shown.stderr.split(separator: "\r\n").last
                == "inbox: imported 2 messages: 0 attachments, 2 duplicates, 0 refused",
            "\(shown.stderr)")
    }
}
