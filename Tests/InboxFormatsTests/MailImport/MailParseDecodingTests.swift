import AppContainer
import Foundation
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// ARCHITECTURE.md, "Mail import": attachments decoded byte for byte, including the two cases GMime 3.2.13 gets wrong.
@Suite struct MailParseDecodingTests {
    /// Bytes with runs of zeros, so many uuencoded lines end in spaces (0 encodes as a space).
    static func sparse(_ count: Int) -> [UInt8] {
        pattern(count).enumerated().map { index, byte in (index / 7) % 3 == 0 ? 0 : byte }
    }

    /// uuencode with spaces for zeros; `terminator` is the zero-length line (` ` or a backquote).
    static func uuencoded(_ data: [UInt8], terminator: String) -> String {
        var text = "begin 644 data.bin\n"
        for start in stride(from: 0, to: data.count, by: 45) {
            let line = Array(data[start..<min(start + 45, data.count)])
            var encoded = [UInt8(0x20 + line.count)]
            for group in stride(from: 0, to: line.count, by: 3) {
                let bytes = (0..<3).map { group + $0 < line.count ? UInt32(line[group + $0]) : 0 }
                let value = bytes[0] << 16 | bytes[1] << 8 | bytes[2]
                for shift in [18, 12, 6, 0] { encoded.append(UInt8(0x20 + (value >> UInt32(shift)) & 0x3F)) }
            }
            text += String(decoding: encoded, as: UTF8.self) + "\n"
        }
        return text + terminator + "\nend\n"
    }

    /// Each line with its trailing spaces stripped, as some mail systems do.
    static func stripped(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in String(line.reversed().drop { $0 == " " }.reversed()) }.joined(separator: "\n")
    }

    static func message(_ parts: [(name: String, encoding: String, body: String)]) -> String {
        var text =
            "From: a@example.com\nSubject: decoding\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n"
        for part in parts {
            text += "--B\nContent-Type: application/octet-stream\nContent-Transfer-Encoding: \(part.encoding)\n"
            text += "Content-Disposition: attachment; filename=\"\(part.name)\"\n\n\(part.body)\n"
        }
        return text + "--B--\n"
    }

    static func sha256(_ bytes: [UInt8]) throws -> String {
        let digest = try SHA256Digest()
        try digest.begin()
        try bytes.withUnsafeBytes { try digest.update($0) }
        return try digest.finish().map { String(format: "%02x", $0) }.joined()
    }

    @Test func uuencodeLinesWithTheirTrailingSpacesStrippedDecodeInFull() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let data = Self.sparse(251_141)
        let encoded = Self.uuencoded(data, terminator: "`")
        let strippedLines = Self.stripped(encoded)
        #expect(strippedLines.utf8.count < encoded.utf8.count - 5_000)
        let strippedTerminator = Self.stripped(Self.uuencoded(data, terminator: " "))
        let path = try MailParse.write(
            Self.message([
                ("stripped.bin", "x-uuencode", strippedLines),
                ("terminator-stripped.bin", "x-uuencode", strippedTerminator),
            ]), in: folder, as: "uu.eml")
        let got = try MailParse.attachments(path)
        let whole = try Self.sha256(data)
        #expect(got.map(\.size) == [251_141, 251_141])
        #expect(got.map(\.sha256) == [whole, whole])
        let python = try #require(try MailParse.oracleAttachments([path])[path])
        #expect(python.first == got.first)
        // Python stops at the empty line left of a ` ` terminator ("Truncated input") and hands the part back
        // undecoded.
        #expect(python.last?.size == Int64(strippedTerminator.utf8.count))
    }

    @Test func anImporterThatDoesNotDescribeDeliversTheSameBytesAndNamesNoHashNorHeadline() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(50_000, seed: 9)
        let body = Data(bytes).base64EncodedString(options: [.lineLength76Characters, .endLineWithLineFeed])
        let text = Self.message([("a.bin", "base64", body)])
        let hashing = try MailImporter(inbox: Inbox(container: scratch.container))
        let quiet = try MailImporter(inbox: Inbox(container: scratch.container))
        quiet.describes = false
        let hashed = try hashing.importMessage(Data(text.utf8), source: "hashed")
        let unhashed = try quiet.importMessage(Data((text + "\n").utf8), source: "unhashed")
        #expect(hashed.attachments.map(\.sha256) == [try Self.sha256(bytes)])
        #expect(hashed.json.contains("\"sha256\":\"\(try Self.sha256(bytes))\""))
        #expect(unhashed.attachments.count == 1)
        #expect(unhashed.attachments.first?.sha256 == "")
        #expect(!unhashed.json.contains("\"sha256\""))
        #expect(hashed.subject == "decoding" && hashed.from == "a@example.com")
        #expect(unhashed.subject == nil && unhashed.from == nil && unhashed.date == nil)
        #expect(unhashed.messageSHA256 != hashed.messageSHA256)
        for attachment in hashed.attachments + unhashed.attachments {
            #expect(FileManager.default.contents(atPath: attachment.item.url.path) == Data(bytes))
        }
    }

    @Test func base64WithPaddingInTheMiddleOfAPartDecodesInFull() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let chunks = [pattern(1000, seed: 1), pattern(1001, seed: 2), pattern(57, seed: 3), pattern(20_000, seed: 4)]
        let body = chunks.map { chunk in
            let encoded = Data(chunk).base64EncodedString(options: [.lineLength76Characters, .endLineWithLineFeed])
            return encoded
        }.joined(separator: "\n")
        #expect(body.contains("=\n"))
        let single = Data(pattern(5000, seed: 5)).base64EncodedString(options: [
            .lineLength64Characters, .endLineWithLineFeed,
        ])
        let path = try MailParse.write(
            Self.message([("padded.bin", "base64", body), ("plain.bin", "BASE64", single)]), in: folder, as: "b64.eml")
        let got = try MailParse.attachments(path)
        #expect(got.map(\.size) == [Int64(chunks.joined().count), 5000])
        #expect(got.first?.sha256 == (try Self.sha256(Array(chunks.joined()))))
        let python = try #require(try MailParse.oracleAttachments([path])[path])
        #expect(python.last == got.last)
        // Python's decoder, like GMime's, stops at the first padded quantum: it has only the first chunk.
        #expect(python.first?.size == 1000)
    }

    @Test func quotedPrintableMatchesPython() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let body = "caf=C3=A9 =3D ok=\nsoft break, lower =c3=a9, bad =ZZ and =4 and == too\r\ncrlf soft=\r\nend="
        let path = try MailParse.write(
            Self.message([("qp.txt", "quoted-printable", body), ("raw.txt", "8bit", "kept as it is =41\n")]),
            in: folder, as: "qp.eml")
        let got = try MailParse.attachments(path)
        #expect(got == (try MailParse.oracleAttachments([path]))[path])
        let expected = Array("café = oksoft break, lower é, bad =ZZ and =4 and = too\r\ncrlf softend".utf8)
        #expect(got.first?.sha256 == (try Self.sha256(expected)))
        #expect(got.last?.size == Int64("kept as it is =41\n".utf8.count))
    }

    @Test func quotedPrintableTransportPaddingAfterASoftBreakIsDropped() {
        // RFC 2045 §6.7: spaces after a soft break's `=` are padding (Python keeps them, and the `=`).
        #expect(
            Self.decode(QuotedPrintableDecoder(), "one= \t\ntwo=  \r\nthree", split: 1) == Array("onetwothree".utf8))
    }

    @Test func decodersGiveTheSameBytesWhereverTheInputIsSplit() {
        let base64 = Data(pattern(300)).base64EncodedString(options: .lineLength76Characters) + "\nQUJD\nRA==\nRUY="
        let qp = "a=3Db=\nc=C3=A9 ==x =\r\ny=4"
        let uu = Self.stripped(Self.uuencoded(Self.sparse(200), terminator: "`"))
        for split in [1, 2, 3, 5, 7, 64, 1000] {
            #expect(Self.decode(Base64Decoder(), base64, split: split) == pattern(300) + Array("ABCDEF".utf8))
            #expect(Self.decode(QuotedPrintableDecoder(), qp, split: split) == Array("a=bcé =x y=4".utf8))
            #expect(Self.decode(UUDecoder(), uu, split: split) == Self.sparse(200))
        }
    }

    @Test func base64DecodesAsAPlainReadingOfItsRulesDoes() {
        // Four characters of the alphabet at once between quanta, else one at a time: the same bytes as the rules
        // read a character at a time, for text with line ends, junk and `=` anywhere, in any split.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        let others = Array("\r\n =!-.\t".utf8) + [0x00, 0x80, 0xFF]
        for round in 0..<200 {
            let noise = pattern(400, seed: UInt64(round + 1))
            let length = Int(noise[0]) + Int(noise[1]) % 64
            let text: [UInt8] = (0..<length).map { index in
                let byte = noise[2 + index]
                return byte < 200 ? alphabet[Int(byte) % 64] : others[Int(byte) % others.count]
            }
            let split = 1 + Int(noise[399]) % 9
            var decoder = Base64Decoder()
            var output: [UInt8] = []
            for start in stride(from: 0, to: text.count, by: split) {
                text[start..<min(start + split, text.count)].withUnsafeBytes { decoder.decode($0, into: &output) }
            }
            decoder.finish(into: &output)
            #expect(output == Self.base64ByTheRules(text), "round \(round)")
        }
    }

    @Test func headerValuesAreTrimmedAsCharactersAre() {
        // The bytes cut at once where that is the same as dropping whitespace characters from both ends.
        let values = [
            "base64", " base64\r\n", "\t Thu, 07 Mar 2024 \u{0B}\u{0C}", "", " \r\n ", "a", " \u{301}x ", "x \u{301}",
            "\u{A0}x\u{3000}", "\u{0600} x", "x\u{0600} ", " \u{1C}x\u{1F} ", "\r\nq\r",
        ]
        for value in values {
            let characters = String(
                value.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
            #expect(MailMessage.trimmed(value) == characters, "\(Array(value.unicodeScalars))")
        }
    }

    /// Base64Decoder's rules, a character at a time: characters outside the alphabet skipped, `=` ending a quantum
    /// of 2 or 3 characters, an unpadded last one counted.
    static func base64ByTheRules(_ text: [UInt8]) -> [UInt8] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var output: [UInt8] = []
        var quantum: [UInt32] = []
        func flush() {
            let word = quantum.reduce(0) { $0 << 6 | $1 }
            if quantum.count == 2 { output.append(UInt8(truncatingIfNeeded: word >> 4)) }
            if quantum.count == 3 {
                output += [UInt8(truncatingIfNeeded: word >> 10), UInt8(truncatingIfNeeded: word >> 2)]
            }
            quantum = []
        }
        for byte in text {
            if let value = alphabet.firstIndex(of: byte) {
                quantum.append(UInt32(value))
                if quantum.count == 4 {
                    let word = quantum.reduce(0) { $0 << 6 | $1 }
                    output += [16, 8, 0].map { UInt8(truncatingIfNeeded: word >> $0) }
                    quantum = []
                }
            } else if byte == UInt8(ascii: "="), quantum.count >= 2 {
                flush()
            }
        }
        flush()
        return output
    }

    static func decode(_ decoder: some TransferDecoder, _ text: String, split: Int) -> [UInt8] {
        var decoder = decoder
        var output: [UInt8] = []
        let bytes = Array(text.utf8)
        for start in stride(from: 0, to: bytes.count, by: split) {
            bytes[start..<min(start + split, bytes.count)].withUnsafeBytes { decoder.decode($0, into: &output) }
        }
        decoder.finish(into: &output)
        return output
    }
}
