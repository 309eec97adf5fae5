import Foundation
import TestSupport
import Testing

/// The command-line contract of ARCHITECTURE.md, "The command line", checked against the built binary.
@Suite struct CommandLineTests {
    static let commands = ["init", "deliver", "move", "ls", "log"]

    @Test(arguments: commands)
    func helpPrintsUsageAndExitsZero(command: String) throws {
        for flag in ["--help", "-h"] {
            let result = try InboxProcess.run(command, flag)
            #expect(result.status == 0)
            #expect(result.stdoutText.contains("USAGE: inbox [--container DIR] \(command)"))
            #expect(result.stdoutText.contains("OPTIONS:"))
            #expect(result.stderr.isEmpty)
        }
    }

    @Test func topLevelHelpListsEveryCommand() throws {
        let result = try InboxProcess.run("--help")
        #expect(result.status == 0)
        for command in Self.commands { #expect(result.stdoutText.contains("  \(command) ")) }
    }

    @Test(arguments: [
        ["frobnicate"], [], ["move"], ["move", "a", "--bogus"], ["ls", "--bogus"], ["ls", "attic"],
        ["log", "--since", "abc"], ["log", "--event", "exploded"], ["deliver", "-"], ["init", "--app"],
    ])
    func usageErrorsExit64WithOneLineAndHint(arguments: [String]) throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let result = try InboxProcess.run(
            (["--container", container] + arguments).map { Array($0.utf8) })
        #expect(result.status == 64)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.first?.hasPrefix("inbox: ") == true)
        #expect(lines.last?.hasPrefix("See 'inbox") == true)
        #expect(result.stdout.isEmpty)
    }

    @Test func initIsIdempotentAndPrintsTheRoot() throws {
        let folder = try Scratch()
        let root = folder.path + "/c"
        for _ in 0..<2 {
            let result = try InboxProcess.run("--container", root, "init", "--app", "Mail")
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.lines == [root])
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: root)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        for place in ["Mail.app", "Documents/Inbox", "Library/Application Support", "Library/Caches", "tmp"] {
            var isFolder: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: root + "/" + place, isDirectory: &isFolder))
            #expect(isFolder.boolValue)
        }
        let clash = try InboxProcess.run("--container", root, "init", "--app", "Other")
        #expect(clash.status == 77)
    }

    @Test func commandsOnAMissingContainerExit73() throws {
        let folder = try Scratch()
        for arguments in [["ls"], ["move", "x"], ["log"], ["deliver", try folder.file("a.txt", "a")]] {
            let result = try InboxProcess.run(
                (["--container", folder.path + "/none"] + arguments).map { Array($0.utf8) })
            #expect(result.status == 73, "\(arguments)")
            #expect(result.stderr.contains("inbox init"))
        }
    }

    @Test func initWhereNothingCanBeCreatedExit73() throws {
        let folder = try Scratch()
        let file = try folder.file("plain-file", "not a folder")
        for root in [file + "/container", "/proc/self/inbox-test"] {
            let result = try InboxProcess.run("--container", root, "init")
            #expect(result.status == 73, "\(root): \(result.stderr)")
            #expect(result.stderr.hasPrefix("inbox: cannot create"))
        }
    }

    @Test func theContainerComesFromTheEnvironment() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let file = try folder.file("env.txt", "from the environment")
        let result = try InboxProcess.run("deliver", file, environment: ["INBOX_CONTAINER": container])
        #expect(result.status == 0)
        #expect(result.lines == [container + "/Documents/Inbox/env.txt"])
    }

    @Test func deliverPrintsEachInboxPathAndMakesNamesUnique() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let first = try folder.file("a/report.pdf", "one")
        let second = try folder.file("b/report.pdf", "two")
        let result = try InboxProcess.run("--container", container, "deliver", first, second)
        #expect(result.status == 0, "\(result.stderr)")
        let inbox = container + "/Documents/Inbox/"
        #expect(result.lines == [inbox + "report.pdf", inbox + "report-1.pdf"])
        #expect(try String(contentsOfFile: inbox + "report-1.pdf", encoding: .utf8) == "two")
        let mode = try FileManager.default.attributesOfItem(atPath: inbox + "report.pdf")[.posixPermissions] as? Int
        #expect(mode == 0o444)
    }

    @Test func deliverFromStandardInputUsesTheSanitisedName() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let result = try InboxProcess.run(
            "--container", container, "deliver", "-", "--as", "../../notes.txt", input: "piped in")
        #expect(result.status == 0, "\(result.stderr)")
        let path = try #require(result.lines.first)
        #expect(path.hasPrefix(container + "/Documents/Inbox/"))
        #expect(!path.dropFirst((container + "/Documents/Inbox/").count).contains("/"))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "piped in")
    }

    @Test func deliverErrors() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let missing = try InboxProcess.run("--container", container, "deliver", folder.path + "/nope.pdf")
        #expect(missing.status == 66)
        #expect(missing.stderr.hasPrefix("inbox: ") && missing.stderr.contains("nope.pdf"))
        let directory = try InboxProcess.run("--container", container, "deliver", folder.path)
        #expect(directory.status == 66)
        let two = try InboxProcess.run(
            "--container", container, "deliver", try folder.file("x", "x"), try folder.file("y", "y"), "--as", "z")
        #expect(two.status == 64)
        let inbox = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox")
        #expect(inbox.isEmpty, "nothing, not even staging, is left behind: \(inbox)")
    }

    @Test func moveByNameAndByPath() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let file = try folder.file("report.pdf", "%PDF-1.4")
        _ = try InboxProcess.run("--container", container, "deliver", file, file)
        let byName = try InboxProcess.run("--container", container, "move", "report.pdf")
        #expect(byName.status == 0, "\(byName.stderr)")
        #expect(byName.lines == [container + "/Documents/report.pdf"])
        let byPath = try InboxProcess.run(
            "--container", container, "move", container + "/Documents/Inbox/report-1.pdf")
        #expect(byPath.status == 0, "\(byPath.stderr)")
        #expect(byPath.lines == [container + "/Documents/report-1.pdf"])
        _ = try InboxProcess.run("--container", container, "deliver", file)
        let relative = try InboxProcess.run("--container", container, "move", "./report.pdf")
        #expect(relative.status == 77, "a relative path is taken from the working folder, outside the container")
        let clash = try InboxProcess.run("--container", container, "move", "report.pdf")
        #expect(clash.lines == [container + "/Documents/report 2.pdf"], "a clash in Documents gets ' 2'")
        let mode =
            try FileManager.default.attributesOfItem(atPath: container + "/Documents/report 2.pdf")[
                .posixPermissions] as? Int
        #expect((mode ?? 0) & 0o200 != 0, "the owner's write bit is restored")
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").isEmpty)
    }

    @Test func moveErrors() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let missing = try InboxProcess.run("--container", container, "move", "nothing.pdf")
        #expect(missing.status == 66)
        #expect(missing.stderr.hasPrefix("inbox: "))
        for outside in ["/etc/passwd", container + "/Documents/Inbox/../../Library/x", container + "/tmp/x"] {
            let result = try InboxProcess.run("--container", container, "move", outside)
            #expect(result.status == 77, "\(outside): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1)
        }
    }

    /// Several items in one `move`: each tried in turn, each failure one line, the rest moved, the first failure's
    /// status; a folder moves whole.
    @Test func moveTakesSeveralItemsAndFolders() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let file = try folder.file("a.txt", "a")
        _ = try InboxProcess.run("--container", container, "deliver", file, file)
        try FileManager.default.createDirectory(
            atPath: container + "/Documents/Inbox/scans/2026", withIntermediateDirectories: true)

        let all = try InboxProcess.run("--container", container, "move", "a.txt", "scans", "a-1.txt")
        #expect(all.status == 0, "\(all.stderr)")
        #expect(all.lines == ["a.txt", "scans", "a-1.txt"].map { container + "/Documents/" + $0 })
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/scans/2026"))

        _ = try InboxProcess.run("--container", container, "deliver", file)
        let some = try InboxProcess.run("--container", container, "move", "gone.txt", "a.txt", "/etc/passwd")
        #expect(some.status == 66, "the first failure's status: \(some.stderr)")
        #expect(some.lines == [container + "/Documents/a 2.txt"], "the item between the failures is moved")
        let errors = some.stderr.split(separator: "\n")
        #expect(errors.count == 3 && errors.allSatisfy { $0.hasPrefix("inbox: ") }, "\(some.stderr)")
        #expect(errors.last == "inbox: 2 of 3 items not moved")
    }

    @Test func moveNeverFollowsASymbolicLink() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let target = try folder.file("secret.txt", "do not touch")
        try FileManager.default.createSymbolicLink(
            atPath: container + "/Documents/Inbox/link.txt", withDestinationPath: target)
        let result = try InboxProcess.run("--container", container, "move", "link.txt")
        #expect(result.status == 77)
        #expect(result.stderr.contains("symbolic link"))
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "do not touch")
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: container + "/Documents/Inbox/link.txt") == target
        )
        #expect(!FileManager.default.fileExists(atPath: container + "/Documents/link.txt"))
    }

    @Test func moveCopiesAFileWithAnotherHardLink() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let outside = try folder.file("shared.txt", "shared bytes")
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: outside)
        try FileManager.default.linkItem(atPath: outside, toPath: container + "/Documents/Inbox/shared.txt")
        let before = try FileManager.default.attributesOfItem(atPath: outside)
        let result = try InboxProcess.run("--container", container, "move", "shared.txt")
        #expect(result.status == 0, "\(result.stderr)")
        let moved = container + "/Documents/shared.txt"
        let after = try FileManager.default.attributesOfItem(atPath: outside)
        let copy = try FileManager.default.attributesOfItem(atPath: moved)
        #expect(copy[.systemFileNumber] as? Int != before[.systemFileNumber] as? Int, "copied, not renamed")
        #expect(after[.systemFileNumber] as? Int == before[.systemFileNumber] as? Int)
        #expect(after[.posixPermissions] as? Int == 0o640, "the outside file keeps its mode")
        #expect(after[.referenceCount] as? Int == 1, "the Inbox link is gone")
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == "shared bytes")
        #expect(try String(contentsOfFile: moved, encoding: .utf8) == "shared bytes")
    }

    @Test func listShowsSizeAndDateAsTextAndJSON() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        _ = try InboxProcess.run("--container", container, "deliver", try folder.file("a.txt", "12345"))
        let text = try InboxProcess.run("--container", container, "ls")
        #expect(text.status == 0)
        let columns = try #require(text.lines.first).split(separator: " ", omittingEmptySubsequences: true)
        #expect(columns.first == "5")
        #expect(columns.last == "a.txt")
        #expect(columns.dropFirst().first?.hasSuffix("Z") == true)
        let json = try InboxProcess.run("--container", container, "ls", "inbox", "--json")
        let items = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]])
        #expect(items.count == 1)
        #expect(items.first?["name"] as? String == "a.txt")
        #expect(items.first?["path"] as? String == container + "/Documents/Inbox/a.txt")
        #expect(items.first?["size"] as? Int == 5)
        let modified = try #require(items.first?["modified"] as? String)
        #expect(
            ISO8601DateFormatter().date(
                from: modified.replacingOccurrences(of: #"\.\d+"#, with: "", options: .regularExpression)) != nil)
        _ = try InboxProcess.run("--container", container, "move", "a.txt")
        let documents = try InboxProcess.run("--container", container, "ls", "documents", "--json")
        let moved = try #require(try JSONSerialization.jsonObject(with: Data(documents.stdout)) as? [[String: Any]])
        #expect(moved.map { $0["name"] as? String } == ["a.txt"])
    }
}

@Suite struct DemoTests {
    @Test func theDemoDeliversWatchesAndMovesEverySample() throws {
        let folder = try Scratch()
        let samples = TestPaths.samples
        let container = folder.path + "/demo"
        let result = try InboxProcess.run("--container", container, "demo", "--samples", samples)
        #expect(result.status == 0, "\(result.stderr)")
        let sampleCount = try FileManager.default.subpathsOfDirectory(atPath: samples).filter {
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: samples + "/" + $0, isDirectory: &isFolder)
            return !isFolder.boolValue && !$0.hasSuffix(".py") && !$0.hasSuffix(".md") && !$0.hasPrefix("mail/")
        }.count
        #expect(sampleCount >= 12)
        // The sample mail carries three attachments, one of them in a forwarded message.
        let imported = logRecords(container, event: "imported")
        #expect(imported.map { $0["attachments"] as? Int } == [3])
        #expect(logRecords(container, event: "moved").count == sampleCount + 3)
        #expect(logRecords(container, event: "arrived").count == sampleCount + 3)
        let documents = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents")
        #expect(documents.filter { $0.hasPrefix("team-offsite") }.count == 2, "delivered, and imported from the mail")
        #expect(result.stdoutText.contains("watch-started"))
        #expect(result.stdoutText.contains("Documents/page 2.pdf"), "the two page.pdf files both arrive")
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").isEmpty)
        let again = try InboxProcess.run("--container", container, "demo", "--samples", samples)
        #expect(again.status == 73, "the demo wants a fresh folder")
    }

    /// What a newcomer reads: the same lines in the same order every time, a line a sample with its `delivered`,
    /// `arrived`, `handled` and `moved` in that order, no blank or repeated line, and a last hint that runs as
    /// printed.
    @Test func theDemoReadsTheSameEveryTimeAndItsHintWorks() throws {
        let folder = try Scratch()
        let samples = TestPaths.samples
        var outputs: [[String]] = []
        for run in 0..<2 {
            let container = folder.path + "/demo\(run)"
            let result = try InboxProcess.run("--container", container, "demo", "--samples", samples)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdoutText.hasSuffix("\n"))
            let lines = result.stdoutText.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                .map(String.init)
            #expect(!lines.contains { $0.trimmingCharacters(in: .whitespaces).isEmpty }, "no blank line")
            #expect(Set(lines).count == lines.count, "no line twice")
            // A line a sample: its records in the log's order, `delivered` first.
            let told = lines.filter { $0.contains(" delivered, ") }
            #expect(told.count == 17, "\(lines)")
            for line in told {
                let story = #/^  .+?  +delivered, arrived \([a-z]+, \d+ bytes\), handled: move, moved to Documents/.+$/#
                #expect(line.wholeMatch(of: story) != nil, "\(line)")
            }
            // The hint, run as printed by a shell.
            let hint = try #require(lines.last)
            #expect(hint.hasPrefix("Read the whole log with: '/"), "the binary's path: \(hint)")
            #expect(!hint.contains("inbox-formats"), "inbox, as the user ran it: \(hint)")
            let shell = try runProgram("/bin/sh", ["-c", String(hint.dropFirst("Read the whole log with: ".count))])
            let logged = shell.stdoutText
            #expect(shell.status == 0)
            #expect(logged.contains("watch-stopped"), "\(logged)")
            outputs.append(
                lines.map {
                    $0.replacingOccurrences(of: container, with: "CONTAINER")
                        .replacing(#/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/#, with: "TIME")
                })
        }
        #expect(outputs[0] == outputs[1], "the same lines in the same order")
    }
}
