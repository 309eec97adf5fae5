import TestSupport
import Testing

@testable import InboxFormats

/// `ContentTypeReading` answers without GMime only where GMime would answer the same (ARCHITECTURE.md, "Mail
/// import"): a value that plainly starts with a type other than a multipart or a message, outside a digest.
@Suite struct ContentTypeReadingTests {
    static let spellings = [
        "text/plain", " TEXT/PLAIN; charset=utf-8", "\tapplication/pdf; name=\"a.pdf\"", "image/png;\r\n name=b.png",
        "multipart/mixed; boundary=x", "Multipart/Alternative; boundary=\"y\"", "MESSAGE/rfc822", "message/partial",
        "message/global", "text/", "/plain", "x-y/z", "text/plain (a comment)", "text/plain;", "a/b/c", "text /plain",
        "text\r\n /plain", "(c)multipart/mixed; boundary=z", "=?utf-8?q?multipart?=/mixed; boundary=z", "multi part/x",
        "multipart-x/y", "messages/rfc822", "1/2", "-/-", "text/plain\u{0}multipart/mixed", "", " ", "text",
        "application/ms-tnef", "text/plain, multipart/mixed; boundary=q",
    ]

    @Test func aPlainTypeIsALeafExactlyWhenGMimeSaysSo() {
        let reading = ContentTypeReading()
        var plain = 0
        for spelling in Self.spellings + Self.generated() {
            let field = Array("Content-Type:\(spelling)\r\n".utf8)
            let raw = ContentTypeReading.value(field) ?? []
            let byGMime = reading.kindByGMime(raw, transferEncoding: nil, inDigest: false)
            #expect(reading.kind(contentType: field, transferEncoding: nil, inDigest: false) == byGMime, "\(spelling)")
            if let media = ContentTypeReading.plainMediaType(raw), media != "multipart", media != "message" {
                plain += 1
                #expect(byGMime == .leaf, "\(spelling)")
            }
            // In a digest a part GMime cannot read is a message: always GMime's answer there.
            #expect(
                reading.kind(contentType: field, transferEncoding: nil, inDigest: true)
                    == reading.kindByGMime(raw, transferEncoding: nil, inDigest: true), "\(spelling)")
        }
        #expect(plain > 100)
    }

    /// Types and parameters put together from pieces, odd ones among them.
    static func generated() -> [String] {
        let media = [
            "text", "TEXT", "Multipart", "message", "application", "x-foo", "image", "", "multipart ", "tex t",
        ]
        let subtypes = ["plain", "mixed", "rfc822", "", "octet-stream", "(c)", "digest", "x/y"]
        let rests = ["", "; boundary=b", "; charset=\"utf-8\"", " ; name=a", "\r\n\t; x=1", ";;", " (note)"]
        let noise = pattern(600, seed: 42)
        return (0..<200).map { index in
            let lead = noise[3 * index] % 3 == 0 ? " " : ""
            return lead + media[Int(noise[3 * index]) % media.count] + "/"
                + subtypes[Int(noise[3 * index + 1]) % subtypes.count] + rests[Int(noise[3 * index + 2]) % rests.count]
        }
    }
}
