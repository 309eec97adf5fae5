import AppContainer
import Foundation
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// The structure scan leaves out of GMime's view what GMime would only scan (ARCHITECTURE.md, "Mail import"): the
/// middle of a large leaf's content, never a line that starts with `-`; and a view GMime did not read as the scan
/// expects is never used.
@Suite struct StructureScanTests {
    /// Text whose lines start with `-` here and there, none of them the boundary `B`.
    static let dashed: String = (0..<400).map { index in
        switch index % 100 {
        case 7: "-- not the boundary"
        case 60: "--B-- is not it either, nor --Bx"
        case 61: "-x"
        default: "line \(index) of the notes, long enough to make a run of them worth leaving out"
        }
    }.joined(separator: "\n")

    static let attachment = pattern(60_000, seed: 11)

    static func message() -> String {
        """
        From: a@example.com
        Subject: elision
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="B"

        --B
        Content-Type: text/plain

        hello
        --B
        Content-Type: text/plain
        Content-Disposition: attachment; filename="notes.txt"

        \(dashed)
        --B
        Content-Type: application/octet-stream
        Content-Disposition: attachment; filename="data.bin"
        Content-Transfer-Encoding: base64

        \(MailParseStructureTests.base64(attachment))
        --B--

        """
    }

    /// `text` written in `scratch` as `name` and scanned: its path, the file open, the finished scan.
    static func scanned(_ text: String, in scratch: Scratch, as name: String) throws -> (
        path: String, file: SharedDescriptor, scan: StructureScan
    ) {
        let path = try MailParse.write(text, in: scratch.path, as: name)
        let (file, _) = try MailParse.open(path)
        let end = Int64(text.utf8.count)
        return (path, file, try StructureScan.check(fd: file.rawValue, start: 0, end: end, limits: MailLimits()))
    }

    @Test func largeLeavesAreLeftOutButTheirFirstLastAndDashedLines() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let text = Array(Self.message().utf8)
        let (path, _, scan) = try Self.scanned(Self.message(), in: scratch, as: "elision.eml")
        // The notes are cut at each dashed line (eight runs between them), the attachment is one run.
        #expect(scan.elided.count == 9)
        for run in scan.elided {
            #expect(run.count >= StructureScan.elisionMinimum)
            let bytes = text[Int(run.lowerBound)..<Int(run.upperBound)]
            let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).dropLast()
            #expect(lines.allSatisfy { $0.first != UInt8(ascii: "-") }, "a dashed line left out")
            #expect(run.lowerBound == 0 || text[Int(run.lowerBound) - 1] == 0x0A)
            #expect(text[Int(run.upperBound) - 1] == 0x0A)
            // Never the first line of a content (after the blank line) nor its last (before a delimiter).
            #expect(!text[..<Int(run.lowerBound)].suffix(2).elementsEqual([0x0A, 0x0A]))
            #expect(text[Int(run.upperBound)] != UInt8(ascii: "-"))
            #expect(!scan.kept.contains { $0.overlaps(run) })
        }
        // The attachments are what Python reads, byte for byte.
        let got = try MailParse.attachments(path)
        #expect(got.map(\.size) == [Int64(Self.dashed.utf8.count), Int64(Self.attachment.count)])
        #expect(got.last?.sha256 == (try MailParseDecodingTests.sha256(Self.attachment)))
        let python = try #require(try MailParse.oracleAttachments([path])[path])
        #expect(python == got)
    }

    @Test func aViewWhoseLeftOutRunGMimeDidNotReadAsContentIsNotUsed() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let text = Array(Self.message().utf8)
        let (_, file, scan) = try Self.scanned(Self.message(), in: scratch, as: "elision.eml")
        try #require(!scan.elided.isEmpty)
        #expect(try MailMessage.parse(file.rawValue, scan.kept, elided: scan.elided).readEveryRun)
        // The first part's Content-Type field left out as if it were content: GMime reads that gap in a header block.
        let field = Array("Content-Type: text/plain\n\nhello".utf8)
        let at = Int64(try #require(text.indices.first { text[$0...].starts(with: field) }))
        let line = at..<(at + Int64("Content-Type: text/plain\n".utf8.count))
        let whole = MailMessage.merged(scan.kept, scan.elided)
        let cut = whole.flatMap { range in
            range.contains(line.lowerBound)
                ? [range.lowerBound..<line.lowerBound, line.upperBound..<range.upperBound] : [range]
        }
        #expect(try !MailMessage.parse(file.rawValue, cut, elided: [line]).readEveryRun)
        // Put back, the runs give the whole view: every byte kept or left out once, in order.
        #expect(whole.reduce(0) { $0 + $1.count } == (scan.kept + scan.elided).reduce(0) { $0 + $1.count })
        #expect(zip(whole, whole.dropFirst()).allSatisfy { $0.upperBound < $1.lowerBound })
    }

    @Test func theFieldsKeptAreTheFilesBytesAndNamesComeOutAsFromTheFile() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let longName = String(repeating: "n", count: 5000) + ".bin"
        let text =
            "From: a@example.com\r\nContent-Type: multipart/mixed;\r\n boundary=\"B\"\r\n\r\n--B\r\n"
            + "Content-Type: text/plain\r\nContent-Disposition: attachment;\r\n\tfilename=\"a\u{0}b.txt\"\r\n\r\nhi\r\n"
            + "--B\r\nContent-Type: application/octet-stream; name=\"\(longName)\"\r\n\r\nxyz\r\n--B--\r\n"
        let bytes = Array(text.utf8)
        let (path, _, scan) = try Self.scanned(text, in: scratch, as: "fields.eml")
        #expect(scan.fields.count == 4)  // the long Content-Type is read from the file when asked for
        for (start, field) in scan.fields {
            let end = Int(start) + field.count
            #expect(Array(bytes[Int(start)..<end]) == field)
            #expect(field.last == 0x0A && bytes[end] != 0x20 && bytes[end] != 0x09)
            #expect(start == 0 || bytes[Int(start) - 1] == 0x0A)
        }
        let got = try MailParse.attachments(path)
        #expect(got.count == 2 && got.first?.name == Array("a_b.txt".utf8))
        let python = try #require(try MailParse.oracleAttachments([path])[path])
        #expect(python == got)
    }

    @Test func noMoreThanTheLimitOfRunsIsLeftOut() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // A dashed line after every 40 lines of 60 bytes: more runs than the limit, each worth leaving out.
        let block = String(repeating: String(repeating: "z", count: 59) + "\n", count: 40) + "-\n"
        let notes = String(repeating: block, count: StructureScan.elisionLimit + 50)
        let text =
            "From: a@example.com\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\nContent-Type: text/plain\n"
            + "Content-Disposition: attachment; filename=\"notes.txt\"\n\n\(notes)--B--\n"
        let (path, _, scan) = try Self.scanned(text, in: scratch, as: "dashed.eml")
        #expect(scan.elided.count == StructureScan.elisionLimit)
        let got = try MailParse.attachments(path)
        #expect(got.map(\.size) == [Int64(notes.utf8.count - 1)])
        #expect(got.first?.sha256 == (try MailParseDecodingTests.sha256(Array(notes.utf8.dropLast()))))
    }
}
