import Foundation
import TestSupport
import Testing

/// `inbox import` of one message that delivers nothing says why on a terminal, in one line: a duplicate names what
/// it duplicates as the import index knows it, a message without attachments says so (issue 49). Elsewhere the
/// output stays what scripts read (DESIGN §12): nothing.
@Suite struct ImportNothingDeliveredTests {
    private func importing(_ container: String, _ source: String, input: String = "") throws -> InboxProcess.Result {
        try InboxProcess.run(
            ["--container", container, "import", source].map { Array($0.utf8) }, input: Array(input.utf8),
            stderrIsTerminal: true)
    }

    @Test func aDuplicateNamesItsOriginalOnATerminal() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let mail = try folder.file("report.eml", ImportCommandTests.message)
        let first = try importing(container, mail)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.lines.count == 3, "\(first.stdoutText)")
        #expect(first.stderr.isEmpty, "a message that delivered says nothing more: \(first.stderr)")

        let again = try importing(container, mail)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.isEmpty)
        #expect(
            again.stderr == "inbox: duplicate of <report-1@example.org>, imported before with 3 attachments: nothing "
                + "delivered from '\(mail)'\r\n")
        let piped = try InboxProcess.run("--container", container, "import", mail)
        #expect(piped.status == 0 && piped.stdout.isEmpty && piped.stderr.isEmpty, "not on a terminal: \(piped.stderr)")

        let standardInput = try importing(container, "-", input: ImportCommandTests.message)
        #expect(standardInput.status == 0, "\(standardInput.stderr)")
        #expect(standardInput.stderr.hasSuffix("nothing delivered from standard input\r\n"), "\(standardInput.stderr)")
    }

    @Test func aMessageWithoutAttachmentsSaysSoOnATerminal() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let mail = try folder.file("note.eml", "From: a@example.org\nSubject: hello\n\nJust text.\n")
        let shown = try importing(container, mail)
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.isEmpty)
        #expect(shown.stderr == "inbox: no attachments in '\(mail)'\r\n")
        let again = try importing(container, mail)
        #expect(
            again.stderr == "inbox: duplicate of the message with message_sha256 "
                + "\(try #require(logRecords(container, event: "imported").first?["message_sha256"] as? String)), "
                + "imported before with 0 attachments: nothing delivered from '\(mail)'\r\n")
        let piped = try InboxProcess.run("--container", container, "import", mail)
        #expect(piped.status == 0 && piped.stdout.isEmpty && piped.stderr.isEmpty, "not on a terminal: \(piped.stderr)")
    }
}
