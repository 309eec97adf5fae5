import Foundation
import Glibc
import TestSupport
import Testing

/// On a terminal, a long `inbox import` shows how far it is (bytes of an mbox read of its size, entries of a Maildir
/// done of its count) and ends with one summary line; elsewhere it says nothing of it (ARCHITECTURE.md, "Mail
/// import").
@Suite struct ImportProgressTests {
    /// `count` messages, each with one attachment of its own.
    static func messages(_ count: Int) -> [String] {
        (0..<count).map { number in
            ImportCommandTests.message.replacingOccurrences(of: "report-1@", with: "report-\(number)@")
                .replacingOccurrences(of: "AAECAwQFBgc=", with: Data("attachment \(number)".utf8).base64EncodedString())
        }
    }

    @Test func anMboxShowsTheShareOfItsBytesReadAndEndsWithASummary() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let mbox = try folder.file(
            "many.mbox",
            Self.messages(400).map { "From a@example.org Mon Jan  1 00:00:00 2024\n" + $0 + "\n" }.joined())
        let shown = try InboxProcess.run(
            ["--container", container, "import", mbox].map { Array($0.utf8) }, stderrIsTerminal: true)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.lines.count == 1_200)
        let drawn = shown.stderr.split(separator: "\r").filter { $0.hasPrefix("inbox: importing… ") }
        #expect(!drawn.isEmpty, "a progress line: \(shown.stderr)")
        for line in drawn {
            #expect(line.contains("% of "), "\(line)")
            #expect(line.contains("KiB: ") || line.contains("MiB: "), "\(line)")
        }
        #expect(
            shown.stderr.hasSuffix("inbox: imported 400 messages: 1,200 attachments, 0 duplicates, 0 refused\r\n"),
            "\(shown.stderr.suffix(200))")
        // Not on a terminal: silent.
        let again = try InboxProcess.run("--container", container, "import", mbox)
        #expect(again.status == 0)
        #expect(again.stderr.isEmpty, "\(again.stderr)")
    }

    @Test func aMaildirShowsItsEntriesDoneOfItsCount() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let maildir = folder.path + "/Maildir"
        for name in ["cur", "new", "tmp"] {
            try FileManager.default.createDirectory(atPath: maildir + "/" + name, withIntermediateDirectories: true)
        }
        for (number, message) in Self.messages(300).enumerated() {
            try Data(message.utf8).write(to: URL(fileURLWithPath: maildir + "/cur/\(number):2,S"))
        }
        let shown = try InboxProcess.run(
            ["--container", container, "import", maildir].map { Array($0.utf8) }, stderrIsTerminal: true)
        #expect(shown.status == 0, "\(shown.stderr)")
        let drawn = shown.stderr.split(separator: "\r").filter { $0.hasPrefix("inbox: importing… ") }
        #expect(!drawn.isEmpty, "a progress line: \(shown.stderr)")
        for line in drawn { #expect(line.contains(" of 300 entries: "), "\(line)") }
        #expect(shown.stderr.hasSuffix("inbox: imported 300 messages: 900 attachments, 0 duplicates, 0 refused\r\n"))
    }
}
