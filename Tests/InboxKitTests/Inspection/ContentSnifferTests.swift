import AppContainer
import InboxKit
import TestSupport
import Testing

@Suite struct ContentSnifferTests {
    static let bom: [UInt8] = [0xEF, 0xBB, 0xBF]

    static func sniff(_ bytes: [UInt8]) -> ContentSniffer.Sniffed? {
        bytes.withUnsafeBytes { ContentSniffer.sniff($0) }
    }

    static func sniff(_ text: String) -> ContentSniffer.Sniffed? { sniff(Array(text.utf8)) }

    // MARK: - Signatures

    @Test func binarySignaturesNameTheirType() {
        let cases: [(bytes: [UInt8], type: String, mime: String)] = [
            ([], "empty", "application/x-empty"),
            (Array("%PDF-1.7\n%\u{E2}\u{E3}".utf8) + [0x00, 0xFF], "pdf", "application/pdf"),
            ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00], "png", "image/png"),
            ([0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10], "jpeg", "image/jpeg"),
            (Array("GIF87a".utf8) + [0x01, 0x00], "gif", "image/gif"),
            (Array("GIF89a".utf8) + [0x01, 0x00], "gif", "image/gif"),
            ([0x50, 0x4B, 0x03, 0x04, 0x14], "zip", "application/zip"),
        ]
        for entry in cases {
            #expect(Self.sniff(entry.bytes) == .init(type: entry.type, mime: entry.mime), "\(entry.bytes.prefix(8))")
        }
    }

    @Test func binaryWithASignatureLaterIsLeftToLibmagic() throws {
        let bytes: [UInt8] = [0x00, 0x01, 0x02, 0x7F] + Array("junk %PDF-1.4 GIF89a".utf8) + [0x00, 0xFF]
        #expect(Self.sniff(bytes) == nil)
        #expect(Self.sniff([UInt8](repeating: 0, count: 4_096)) == nil)
        try ContentInspectorTests.withFolder { folder in
            let inspector = try ContentInspector()
            for (name, content) in [("pdf-later.bin", bytes), ("nuls.bin", [UInt8](repeating: 0, count: 4_096))] {
                let path = try ContentInspectorTests.write(content, to: folder + "/" + name)
                let inspection = try ContentInspectorTests.inspect(path, with: inspector)
                #expect(inspection.type == "other", "\(name): libmagic said \(inspection.mime)")
            }
        }
    }

    // MARK: - Zip

    @Test func officeZipsGetTheirMIMETypeFromTheEntries() {
        let zip = ContentInspectorTests.storedZip
        let cases: [(bytes: [UInt8], type: String, mime: String)] = [
            (
                zip(["[Content_Types].xml": "<Types/>", "_rels/.rels": "<r/>", "word/document.xml": "<w/>"]),
                "office", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
            ),
            (
                zip(["[Content_Types].xml": "<Types/>", "xl/workbook.xml": "<w/>"]),
                "office", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
            ),
            (
                zip(["[Content_Types].xml": "<Types/>", "ppt/presentation.xml": "<p/>"]),
                "office", "application/vnd.openxmlformats-officedocument.presentationml.presentation"
            ),
            (zip(["[Content_Types].xml": "<Types/>", "other.xml": "<o/>"]), "office", "application/zip"),
            (
                zip(["mimetype": "application/vnd.oasis.opendocument.text", "content.xml": "<c/>"]),
                "office", "application/vnd.oasis.opendocument.text"
            ),
            (zip(["mimetype": "not a type", "content.xml": "<c/>"]), "office", "application/zip"),
            (zip(["notes.txt": "hello", "word/document.xml": "<w/>"]), "zip", "application/zip"),
        ]
        for entry in cases {
            #expect(Self.sniff(entry.bytes) == .init(type: entry.type, mime: entry.mime), "\(entry.mime)")
        }
    }

    @Test func entriesWithSizesAfterTheirDataAreFoundBySignature() {
        // Bit 3: the sizes are zero in the local header and follow the data in a descriptor.
        func entry(_ name: String, _ data: String) -> [UInt8] {
            let name = Array(name.utf8)
            let header: [UInt8] = [0x50, 0x4B, 0x03, 0x04, 20, 0, 0x08, 0, 8, 0] + [UInt8](repeating: 0, count: 16)
            return header + [UInt8(name.count), 0, 0, 0] + name + Array(data.utf8) + [0x50, 0x4B, 0x07, 0x08]
        }
        let bytes = entry("[Content_Types].xml", "deflated") + entry("_rels/.rels", "x") + entry("xl/a.xml", "y")
        let mime = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
        #expect(Self.sniff(bytes) == .init(type: "office", mime: mime))
    }

    @Test func aZipCutBeforeItsFirstNameIsAZip() {
        let full = ContentInspectorTests.storedZip(["[Content_Types].xml": "<Types/>"])
        #expect(Self.sniff(Array(full.prefix(40))) == .init(type: "zip", mime: "application/zip"))
        #expect(Self.sniff(Array(full.prefix(49))) == .init(type: "office", mime: "application/zip"))
    }

    // MARK: - Text

    @Test func textTypesByTheirFirstLines() {
        let cases: [(text: String, type: String, mime: String)] = [
            ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n", "calendar", "text/calendar"),
            ("\n  begin:vcalendar\nend:vcalendar\n", "calendar", "text/calendar"),
            ("BEGIN:VCARD\r\nVERSION:3.0\r\nEND:VCARD\r\n", "vcard", "text/vcard"),
            ("<!DOCTYPE html>\n<html><body>Hi, there</body></html>\n", "text", "text/html"),
            ("Just a line of text.\n", "text", "text/plain"),
            (
                "Tab\tand form feed\u{0C} are text; a bell \u{07} and an \u{1B}[1mescape\u{1B}[0m now and then, too.\n"
                    + String(repeating: "More text on the next line.\n", count: 8), "text", "text/plain"
            ),
            ("Ångström résumé, 日本語, emoji 🎉\n", "text", "text/plain"),
            ("x", "text", "text/plain"),
        ]
        for entry in cases {
            #expect(Self.sniff(entry.text) == .init(type: entry.type, mime: entry.mime), "\(entry.text)")
        }
    }

    @Test func byteOrderMarkIsSkipped() {
        #expect(Self.sniff(Self.bom + Array("BEGIN:VCARD\r\nFN:Jane\r\n".utf8))?.type == "vcard")
        #expect(Self.sniff(Self.bom + Array("From: jane@example.com\r\n\r\nHi\r\n".utf8))?.type == "eml")
        #expect(Self.sniff(Self.bom + Array("a,b\r\n1,2\r\n".utf8))?.type == "csv")
        #expect(Self.sniff(Self.bom + Array("Notes\n".utf8)) == .init(type: "text", mime: "text/plain"))
        #expect(Self.sniff(Self.bom) == .init(type: "text", mime: "text/plain"))
    }

    @Test(arguments: [
        "From: jane@example.com\nTo: omar@example.com\n\nHi\n",
        "received: from a by b\r\n\r\nHi\r\n",
        "Return-Path: <jane@example.com>\r\n", "Delivered-To: omar@example.com\n",
        "Message-ID: <1@example.com>\nFrom: jane\n\nHi\n",
        "MIME-Version: 1.0\r\nContent-Type: text/plain\r\n\r\nHi\r\n",
        "Date: Sun, 01 Nov 2026 09:00:00 +0000\r\nTo: omar\r\nSubject: Venue\r\n\r\nHi\r\n",
        "Subject: Venue\nX-Long: folded\n  on two lines\nDate: Sun, 01 Nov 2026\n\nHi\n",
    ])
    func mailHeadersFirstMakeAnEml(text: String) {
        #expect(Self.sniff(text) == .init(type: "eml", mime: "message/rfc822"))
    }

    @Test(arguments: [
        "To: the team\nFrom: me\n", "Date: Tuesday\n\nMeeting notes, Subject: budget\n",
        "Subject: budget\nNot a header line\nDate: Tuesday\n", "Weekly sync\nDate: Tuesday\nSubject: budget\n",
        "Date: Tuesday\n\nSubject: budget\n",
    ])
    func headerLikeNotesStayText(text: String) {
        #expect(Self.sniff(text) == .init(type: "text", mime: "text/plain"))
    }

    @Test func csvNeedsTwoLinesWithTheSameCommasOutsideQuotes() {
        let cases: [(text: String, type: String)] = [
            ("name,amount\nJane,3\n", "csv"),
            ("name,amount\r\nJane,3\r\nOmar,4\r\n", "csv"),
            ("name,amount\nJane,3", "csv"),
            ("\"Doe, Jane\",3\n\"Haddad, Omar\",4\n", "csv"),
            ("note,amount\n\"two\nlines, quoted\",3\n", "csv"),
            ("a,\"say \"\"hi, there\"\"\"\n1,2\n", "csv"),
            ("Hello, world\nthis is plain text\n", "text"),
            ("Hello, world\n", "text"),
            ("a,b\n1,2\n3,4,5\n", "text"),
            ("a,b\n\n1,2\n", "text"),
            ("a;b\n1;2\n", "text"),
            (String(repeating: "a,b\n", count: 10) + "a,b,c,d\n", "csv"),
        ]
        for entry in cases {
            #expect(Self.sniff(entry.text)?.type == entry.type, "\(entry.text)")
        }
        #expect(Self.sniff("a,b\n1,2\n")?.mime == "text/csv")
    }

    @Test(arguments: [
        "{\"a\": 1}\n", "[1, 2]\n", "  <?xml version=\"1.0\"?>\n<svg/>\n", "<svg xmlns=\"x\"/>\n",
        "%!PS-Adobe-3.0\n", "-----BEGIN PGP MESSAGE-----\n",
    ])
    func formatsLibmagicNamesBetterAreLeftToIt(text: String) {
        #expect(Self.sniff(text) == nil)
    }

    // MARK: - UTF-8 and control characters

    @Test func sequenceCutByTheEndOfTheChunkIsText() {
        for character in ["é", "€", "🎉"] {
            let bytes = Array(("Prices in " + character).utf8)
            for cut in 1..<character.utf8.count {
                #expect(Self.sniff(Array(bytes.dropLast(cut)))?.type == "text", "\(character) less \(cut) bytes")
            }
        }
    }

    @Test(
        arguments: [
            [0xC3, 0x41], [0xE9, 0x20], [0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80],
            [0xF0, 0x80, 0x80, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xE2, 0x82, 0x41],
        ] as [[UInt8]])
    func invalidUTF8IsLeftToLibmagic(sequence: [UInt8]) {
        #expect(Self.sniff(Array("Latin-1 or broken: ".utf8) + sequence + Array(" and more text\n".utf8)) == nil)
    }

    /// Each control byte at each place of a 16-byte stretch, so that every byte of the 8-byte checks is tried.
    @Test func controlBytesAnywhere() {
        let base = Array("0123456789abcdef0123456789abcdef".utf8)
        for byte in UInt8(0)...0x7F where byte < 0x20 || byte == 0x7F {
            let expected: String? =
                switch byte {
                case 0x09, 0x0A, 0x0C, 0x0D: "text"
                case 0x07, 0x08, 0x0B, 0x1B: nil  // allowed, but a few only: one in 32 bytes is too many
                default: nil
                }
            for place in 0..<17 {
                var bytes = base
                bytes[place] = byte
                #expect(Self.sniff(bytes)?.type == expected, "byte \(byte) at \(place)")
            }
        }
        let fewEscapes = Array(String(repeating: "plain text ", count: 12).utf8) + [0x1B] + Array("[0m\n".utf8)
        #expect(Self.sniff(fewEscapes)?.type == "text")
    }

    @Test func chunkEndingInsideACharacterIsStillText() throws {
        // The first chunk ends after the first byte of "é": the sniffer sees a cut sequence.
        let bytes = [UInt8](repeating: UInt8(ascii: "a"), count: ContentInspector.chunkSize - 1) + Array("é\n".utf8)
        try ContentInspectorTests.withFolder { folder in
            let path = try ContentInspectorTests.write(bytes, to: folder + "/long.txt")
            let inspection = try ContentInspectorTests.inspect(path, with: ContentInspector())
            #expect(inspection.type == "text")
            #expect(inspection.mime == "text/plain")
            #expect(inspection.sha256 == (try ContentInspectorTests.sha256sum(path)))
        }
    }
}
