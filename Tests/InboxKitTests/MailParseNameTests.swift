import AppContainer
import Foundation
import InboxKit
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
        let folder = try MailParse.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
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
}
