import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox watch --verbose`, `--format` and `-0`: a line per arrival and per disposition, piped or on a terminal,
/// and a reader that leaves (ARCHITECTURE.md, "The command line").
@Suite struct WatchOutputTests {
    /// Whether `text` is a time as the log writes it: RFC 3339, UTC, milliseconds.
    private func isLogTime(_ text: Substring) -> Bool {
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return text.count == 24 && text.hasSuffix("Z") && parser.date(from: String(text)) != nil
    }

    @Test func verbosePrintsTheArrivalAndTheMoveAsTheyHappen() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let watcher = try WatchProcess(container, ["--verbose", "--on-arrival", "move"])
        #expect(
            try InboxProcess.run("--container", container, "deliver", try folder.file("plain.txt", "hi")).status == 0)
        let text = watcher.child.readStdout(until: { $0.split(separator: "\n").count >= 2 })
        let lines = text.split(separator: "\n")
        #expect(lines.count == 2, "\(text)")
        let fields = lines.map { $0.split(separator: " ", maxSplits: 2) }
        #expect(fields.allSatisfy { $0.count == 3 && isLogTime($0[0]) }, "\(text)")
        #expect(
            fields.map { $0.dropFirst().joined(separator: " ") } == [
                "arrived \(container)/Documents/Inbox/plain.txt", "moved \(container)/Documents/plain.txt",
            ])
        let stopped = try watcher.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(stopped.stdout.isEmpty, "nothing more was printed")
    }

    @Test func formatDirectivesGiveEachField() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let format = "%e|%f|%p|%a|%d|%s|%y|%i|%%|%t"
        let kept = try WatchProcess(container, ["--format", format])
        #expect(
            try InboxProcess.run("--container", container, "deliver", try folder.file("note.txt", "hello")).status == 0)
        let text = kept.child.readStdout(until: { $0.split(separator: "\n").count >= 2 })
        #expect(try kept.stop().status == 0)
        let id = try #require(logRecords(container, event: "arrived").first?["id"] as? String)
        let lines = text.split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false) }
        #expect(lines.count == 2, "\(text)")
        let inbox = "note.txt|Documents/Inbox/note.txt|\(container)/Documents/Inbox/note.txt|keep|5|text|\(id)|%"
        #expect(lines.map { $0.dropLast().joined(separator: "|") } == ["arrived|" + inbox, "kept|" + inbox])
        #expect(lines.allSatisfy { $0.last.map(isLogTime) == true }, "\(text)")

        // A hook's answer: deleted.
        let deleting = try WatchProcess(container, ["--format", "%e %d %p", "--exec", "echo delete"])
        #expect(try InboxProcess.run("--container", container, "deliver", try folder.file("gone.txt", "x")).status == 0)
        let answered = deleting.child.readStdout(until: { $0.split(separator: "\n").count >= 2 })
        #expect(try deleting.stop().status == 0)
        #expect(
            answered.split(separator: "\n") == [
                "arrived delete Documents/Inbox/gone.txt", "deleted delete Documents/Inbox/gone.txt",
            ])
    }

    @Test func namesAreEscapedOnATerminalExactInAPipeAndNULTerminatedWithZero() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let deliver = { (name: String) throws in
            let source = try folder.file(name, "x")
            let result = try InboxProcess.run(["--container", container, "deliver", source].map { Array($0.utf8) })
            #expect(result.status == 0, "\(result.stderr)")
        }

        let terminal = try WatchProcess(container, ["--format", "%e %f"], terminalColumns: 80)
        try deliver("red\u{1B}[31m\nback\\slash.txt")
        let onTerminal = terminal.child.readStdout(until: { $0.components(separatedBy: "\r\n").count >= 3 })
        #expect(try terminal.stop().status == 0)
        let shown = #"red\x1b[31m\nback\\slash.txt"#
        #expect(onTerminal == "arrived \(shown)\r\nkept \(shown)\r\n")

        let piped = try WatchProcess(container, ["--format", "%e %f"])
        let name = "pipe\u{1B}[0m\ntwo.txt"
        try deliver(name)
        let exact = piped.child.readStdout(until: { $0.hasSuffix("kept \(name)\n") })
        #expect(try piped.stop().status == 0)
        #expect(exact == "arrived \(name)\nkept \(name)\n", "exact bytes in a pipe")

        let nul = try WatchProcess(container, ["-0", "--on-arrival", "move"], terminalColumns: 80)
        let raw = "nul\u{1B}[0m\nthree.txt"
        try deliver(raw)
        let terminated = nul.child.readStdout(until: { $0.filter { $0 == "\u{0}" }.count >= 2 })
        #expect(try nul.stop().status == 0)
        let records = terminated.split(separator: "\u{0}", omittingEmptySubsequences: false)
        #expect(records.count == 3 && records.last?.isEmpty == true, "\(terminated.debugDescription)")
        // Never escaped, even on a terminal (whose line discipline turns the name's newline into \r\n).
        let rawOnTerminal = raw.replacingOccurrences(of: "\n", with: "\r\n")
        #expect(records.first?.hasSuffix(" arrived \(container)/Documents/Inbox/\(rawOnTerminal)") == true)
        #expect(records.dropFirst().first?.hasSuffix(" moved \(container)/Documents/\(rawOnTerminal)") == true)
    }

    @Test(arguments: [
        (["--format", "%q"], "inbox: '--format' has an unknown directive '%q'"),
        (["--format", "%e%"], "inbox: '--format' ends with a lone '%'"),
        (["--format", "%e", "--verbose"], "inbox: '--verbose' and '--format' are two formats"),
    ])
    func aBadFormatIsAUsageError(arguments: [String], message: String) throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let result = try InboxProcess.run((["--container", container, "watch"] + arguments).map { Array($0.utf8) })
        #expect(result.status == 64)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.first?.hasPrefix(message) == true, "\(result.stderr)")
        #expect(lines.filter { $0.hasPrefix("inbox:") }.count == 1, "one error line: \(result.stderr)")
        #expect(logRecords(container, event: "watch-started").isEmpty, "refused before it watched")
    }

    /// `inbox watch --verbose | head -1`: once the reader is gone the watcher finishes the batch in hand, logs
    /// `watch-stopped` and exits 0; every file is handled once, then or by the next watcher.
    @Test func aReaderThatLeavesStopsTheWatcherAndNoFileIsLost() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try writeFiles(2_000, in: folder.path + "/staging", prefix: "burst")
        let watcher = try WatchProcess(container, ["--verbose", "--on-arrival", "move"])
        #expect(
            try InboxProcess.run("--container", container, "deliver", try folder.file("first.txt", "1")).status == 0)
        let first = watcher.child.readStdout(until: { $0.contains("\n") })
        #expect(first.contains(" arrived \(container)/Documents/Inbox/first.txt\n"), "\(first)")
        // The burst lands while the reader leaves: some of it is handled before the watcher stops, the rest not.
        try renameAll(from: folder.path + "/staging", into: container + "/Documents/Inbox")
        watcher.child.closeStdout()
        let status = watcher.child.exitStatus(within: 60)
        if status == nil { watcher.kill9() }
        #expect(status == 0, "the watcher ended by itself, with status 0")
        #expect(logRecords(container, event: "watch-stopped").count == 1)

        let next = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(next.status == 0, "\(next.stderr)")
        let arrived = logRecords(container, event: "arrived").compactMap { $0["path"] as? String }
        #expect(arrived.count == 2_001, "each file arrived once")
        #expect(Set(arrived).count == 2_001)
        #expect(logRecords(container, event: "moved").count == 2_001)
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").isEmpty)
        let documents = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents")
        #expect(documents.filter { $0 != "Inbox" }.count == 2_001)
    }
}
