import AppContainer
import Foundation
import InboxFormats
import InboxKit
import TestSupport
import Testing

/// Python's own email test corpus, message by message against the oracle (`Tests/Oracle/mail_attachments.py`).
@Suite struct MailParseCorpusTests {
    @Test func everyMessageOfPythonsCorpusHasTheOraclesAttachments() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: MailParse.pythonCorpus)
            .filter { $0.hasPrefix("msg_") && $0.hasSuffix(".txt") }.sorted()
        try #require(names.count >= 40, "the corpus (libpython3.11-testsuite) is missing")
        let paths = names.map { MailParse.pythonCorpus + "/" + $0 }
        let expected = try MailParse.oracleAttachments(paths)
        var compared = 0
        var withAttachments = 0
        for (name, path) in zip(names, paths) {
            let want = try #require(expected[path])
            switch name {
            case "msg_15.txt":
                // A multipart/alternative reuses its parent's boundary. Python takes the part after the inner
                // closing delimiter for the inner multipart's epilogue and loses it; GMime (and a reader) sees the
                // outer multipart's next part: xx.gif, disposition attachment.
                #expect(want.isEmpty)
                let got = try MailParse.attachments(path)
                #expect(got.map { String(decoding: $0.name, as: UTF8.self) } == ["xx.gif"])
                #expect(got.first?.contentType == "image/gif")
            case "msg_19.txt":
                // Its first line is text, not a header field: §12's "not a message". Python reads it all as a body.
                #expect(want.isEmpty)
                #expect {
                    _ = try MailParse.attachments(path)
                } throws: { error in
                    guard case MailError.notAMessage = error else { return false }
                    return true
                }
            default:
                let got = try MailParse.attachments(path)
                #expect(got == want, "\(name)")
                compared += 1
                if !want.isEmpty { withAttachments += 1 }
            }
        }
        #expect(compared == names.count - 2)
        #expect(withAttachments >= 6)
    }
}
