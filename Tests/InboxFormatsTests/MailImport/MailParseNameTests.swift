import AppContainer
import Foundation
import InboxKit
import TestSupport
import Testing

/// ARCHITECTURE.md, "Mail import": hostile filenames reduced to one safe name, nameless ones numbered; checked by hand and
/// against the oracle.
@Suite struct MailParseNameTests {
    static let long = String(repeating: "é", count: 150)

    /// (the part's name headers, the name expected)
    static let cases: [(headers: String, expected: String)] = [
        ("Content-Disposition: attachment; filename=\"../../etc/passwd\"", "passwd"),
        ("Content-Disposition: attachment; filename=\"a\\\\b\\\\c.txt\"", "c.txt"),
        ("Content-Disposition: attachment; filename*=utf-8''x%5Cy%2Fz.txt", "z.txt"),
        ("Content-Disposition: attachment; filename*=utf-8''evil%1B%5B31mred%07%7F.txt", "evil_[31mred__.txt"),
        ("Content-Disposition: attachment; filename*=utf-8''csi%C2%9B2J.txt", "csi_2J.txt"),
        ("Content-Disposition: attachment; filename=\"...hidden\"", "hidden"),
        (
            "Content-Disposition: attachment; filename*=utf-8''" + long.addingPercentEncoding(
                withAllowedCharacters: .alphanumerics)! + ".txt",
            String(repeating: "é", count: 125) + ".txt"
        ),
        (
            "Content-Disposition: attachment; filename*=utf-8''" + long.addingPercentEncoding(
                withAllowedCharacters: .alphanumerics)!,
            String(repeating: "é", count: 127)
        ),
        ("Content-Disposition: attachment; filename*=utf-8''a%00b.txt", "a_b.txt"),
        (
            "Content-Disposition: attachment; filename=\"first.txt\"\nContent-Disposition: attachment; filename=\"second.txt\"",
            "first.txt"
        ),
        ("Content-Disposition: attachment; filename*0*=utf-8''%C3%A9t; filename*1=\"e.txt\"", "éte.txt"),
        ("Content-Disposition: attachment; filename=\"=?utf-8?b?w6ljb2xlLnR4dA==?=\"", "école.txt"),
        ("Content-Disposition: inline; filename=\" spaced.txt \"", "spaced.txt"),
        ("Content-Type: text/plain; name=\"ctname.txt\"", "ctname.txt"),
        ("Content-Type: application/pdf\nContent-Disposition: attachment", "attachment-1.pdf"),
        ("Content-Type: application/x-nothing-known\nContent-Disposition: attachment", "attachment-2.bin"),
        ("Content-Disposition: attachment; filename=\"..\"", "attachment-3.txt"),
        ("Content-Disposition: attachment; filename=\"folder/\"", "attachment-4.txt"),
    ]

    static func message() -> String {
        var text =
            "From: a@example.com\nSubject: names\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n"
        for (index, (headers, _)) in cases.enumerated() {
            let type = headers.contains("Content-Type:") ? "" : "Content-Type: text/plain\n"
            text += "--B\n\(type)\(headers)\n\npart \(index)\n"
        }
        text += "--B\nContent-Type: text/plain\n\nthe body, not an attachment\n--B--\n"
        return text
    }

    @Test func hostileNamesAreReducedAndNamelessOnesNumbered() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let path = try MailParse.write(Self.message(), in: folder, as: "names.eml")
        let got = try MailParse.attachments(path)
        #expect(got.map { String(decoding: $0.name, as: UTF8.self) } == Self.cases.map(\.expected))
        for attachment in got {
            #expect(attachment.name.count <= 255)
            #expect(!attachment.name.contains(0x2F) && !attachment.name.contains(0x5C) && attachment.name.first != 0x2E)
            #expect(!attachment.name.contains { $0 < 0x20 || $0 == 0x7F })
        }
        #expect(got.map(\.size) == Self.cases.indices.map { Int64("part \($0)".utf8.count) })
        #expect(got == (try MailParse.oracleAttachments([path]))[path])
    }

    /// `invoice.exe` NUL `.pdf` and other control characters, in every encoding a filename may take.
    static let controlCases: [(headers: String, expected: String)] = [
        ("Content-Disposition: attachment; filename*=utf-8''invoice.exe%00.pdf", "invoice.exe_.pdf"),
        ("Content-Disposition: attachment; filename*0*=utf-8''invoice.exe%00; filename*1=\".pdf\"", "invoice.exe_.pdf"),
        ("Content-Disposition: attachment; filename=\"=?utf-8?q?invoice.exe=00.pdf?=\"", "invoice.exe_.pdf"),
        (
            "Content-Disposition: attachment; filename=\"=?UTF-8?B?\(base64("invoice.exe\u{0}.pdf"))?=\"",
            "invoice.exe_.pdf"
        ),
        ("Content-Disposition: attachment; filename=\"invoice.exe\u{0}.pdf\"", "invoice.exe_.pdf"),
        ("Content-Disposition: attachment; filename=invoice.exe\u{0}.pdf", "invoice.exe_.pdf"),
        (
            "Content-Type: application/pdf; name=\"=?utf-8?q?invoice.exe=00.pdf?=\"\nContent-Disposition: attachment",
            "invoice.exe_.pdf"
        ),
        (
            "Content-Disposition: attachment; filename=\"=?utf-16le?b?\(base64("invoice.exe\u{0}.pdf", .utf16LittleEndian))?=\"",
            "invoice.exe_.pdf"
        ),
        ("Content-Disposition: attachment; filename=\"=?iso-8859-1?q?caf=E9=00.txt?=\"", "café_.txt"),
        ("Content-Disposition: attachment; filename=\"report=?utf-8?q?=00?=.pdf\"", "report_.pdf"),
        ("Content-Disposition: attachment; filename=\"=?utf-8?q?a=01b=09c=0Ad=1Fe=7Ff.txt?=\"", "a_b_c_d_e_f.txt"),
        (
            "Content-Disposition: attachment; filename=\"=?utf-8?b?\(base64("a\u{1}b\u{1B}c\u{7F}d.txt"))?=\"",
            "a_b_c_d.txt"
        ),
        ("Content-Disposition: attachment; filename=\"a\u{1}b\u{1F}c\u{7F}d.txt\"", "a_b_c_d.txt"),
    ]

    static func base64(_ text: String, _ encoding: String.Encoding = .utf8) -> String {
        text.data(using: encoding)!.base64EncodedString()
    }

    @Test func aNulOrControlCharacterInAnyEncodingBecomesAnUnderscoreNeverACut() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        // After an mbox `From ` line, with a preamble: names are read from the file at offsets GMime's view maps.
        var text =
            "From sender Mon Jan  1 00:00:00 2024\nFrom: a@example.com\nSubject: names\nMIME-Version: 1.0\n"
            + "Content-Type: multipart/mixed; boundary=\"B\"\n\nThis is a preamble.\n"
        for (index, (headers, _)) in Self.controlCases.enumerated() {
            let type = headers.contains("Content-Type:") ? "" : "Content-Type: text/plain\n"
            text += "--B\n\(type)\(headers)\n\npart \(index)\n"
        }
        let path = try MailParse.write(text + "--B--\n", in: folder, as: "controls.eml")
        let got = try MailParse.attachments(path)
        #expect(got.map { String(decoding: $0.name, as: UTF8.self) } == Self.controlCases.map(\.expected))
        #expect(got.map(\.size) == Self.controlCases.indices.map { Int64("part \($0)".utf8.count) })
        // Python's email package reads each name the same, NUL and all, and the oracle's reduction makes it `_`; but
        // Python leaves an encoded word inside a word (`report=?utf-8?q?=00?=.pdf`) as it is, where GMime decodes it.
        let oracle = try #require((try MailParse.oracleAttachments([path]))[path])
        let inside = try #require(Self.controlCases.firstIndex { $0.expected == "report_.pdf" })
        #expect(String(decoding: oracle[inside].name, as: UTF8.self) == "report=?utf-8?q?=00?=.pdf")
        #expect(
            got.enumerated().filter { $0.offset != inside }.map(\.element)
                == oracle.enumerated().filter { $0.offset != inside }.map(\.element))
    }
}
