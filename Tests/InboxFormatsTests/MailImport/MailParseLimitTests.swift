import AppContainer
import Foundation
import Glibc
import InboxFormats
import InboxKit
import TestSupport
import Testing

/// ARCHITECTURE.md, "Mail import": parts, depth and decoded bytes; MIME bombs refused fast in bounded memory; attachments
/// streamed, never whole in memory.
@Suite struct MailParseLimitTests {
    static let header = "From: a@example.com\nSubject: limits\nMIME-Version: 1.0\n"

    /// One multipart holding `count` empty parts: the message has `count + 1` parts.
    static func wide(_ count: Int) -> String {
        header + "Content-Type: multipart/mixed; boundary=\"b\"\n\n" + String(repeating: "--b\n\n", count: count)
            + "--b--\n"
    }

    /// `levels` multiparts one inside the other, a named leaf at the bottom, at depth `levels`.
    static func deep(_ levels: Int) -> String {
        var text = header
        for level in 0..<levels { text += "Content-Type: multipart/mixed; boundary=\"b\(level)\"\n\n--b\(level)\n" }
        text += "Content-Type: text/plain; name=\"bottom.txt\"\n\nbottom\n"
        for level in (0..<levels).reversed() { text += "--b\(level)--\n" }
        return text
    }

    /// `levels` forwarded messages one inside the other.
    static func forwardedChain(_ levels: Int) -> String {
        header + String(repeating: "Content-Type: message/rfc822\n\nSubject: again\n", count: levels)
            + "Content-Type: text/plain; name=\"bottom.txt\"\n\nbottom\n"
    }

    static func isRefused(_ error: any Error) -> Bool {
        guard case MailError.refused = error else { return false }
        return true
    }

    /// The process's peak resident memory, in bytes (VmHWM).
    static func peakResident() throws -> Int {
        let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") })
        return try #require(Int(line.split(separator: " ")[1])) * 1024
    }

    @Test func partsAndDepthUpToTheLimitsAreReadAndOnePastIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        #expect(try MailParse.attachments(try MailParse.write(Self.wide(9_999), in: folder, as: "wide-ok.eml")).isEmpty)
        #expect(
            performing: {
                _ = try MailParse.attachments(try MailParse.write(Self.wide(10_000), in: folder, as: "wide.eml"))
            },
            throws: Self.isRefused)
        let bottom = try MailParse.attachments(try MailParse.write(Self.deep(64), in: folder, as: "deep-ok.eml"))
        #expect(bottom.map(\.size) == [6])
        #expect(
            performing: {
                _ = try MailParse.attachments(try MailParse.write(Self.deep(65), in: folder, as: "deep.eml"))
            },
            throws: Self.isRefused)
        // Each forwarded message's header block is its body's too: one level each.
        #expect(
            try MailParse.attachments(try MailParse.write(Self.forwardedChain(64), in: folder, as: "fwd-ok.eml")).count
                == 1)
        #expect(
            performing: {
                _ = try MailParse.attachments(try MailParse.write(Self.forwardedChain(65), in: folder, as: "fwd.eml"))
            },
            throws: Self.isRefused)
    }

    @Test func mimeBombsAreRefusedFastInBoundedMemory() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let bombs = [
            try MailParse.write(Self.wide(200_000), in: folder, as: "wide-bomb.eml"),
            try MailParse.write(Self.deep(50_000), in: folder, as: "deep-bomb.eml"),
            try MailParse.write(Self.forwardedChain(50_000), in: folder, as: "forwarded-bomb.eml"),
        ]
        let before = try Self.peakResident()
        for bomb in bombs {
            let start = ContinuousClock.now
            #expect(performing: { _ = try MailParse.open(bomb) }, throws: Self.isRefused)
            #expect(ContinuousClock.now - start < .seconds(3), "\(bomb)")
        }
        // GMime holds 200,000 empty parts in about 270 MB; the structure scan refuses them before GMime reads any.
        #expect(try Self.peakResident() - before < 64 << 20)
    }

    @Test func attachmentsDecodingToMoreThanMaxBytesAreRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        var text = Self.header + "Content-Type: multipart/mixed; boundary=\"b\"\n\n"
        for index in 0..<2 {
            text +=
                "--b\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=\"\(index).bin\"\n"
            text +=
                "Content-Transfer-Encoding: base64\n\n" + Data(pattern(600, seed: UInt64(index))).base64EncodedString()
                + "\n"
        }
        let path = try MailParse.write(text + "--b--\n", in: folder, as: "bytes.eml")
        #expect(try MailParse.attachments(path, limits: MailLimits(maxBytes: 1200)).map(\.size) == [600, 600])
        #expect(
            performing: { _ = try MailParse.attachments(path, limits: MailLimits(maxBytes: 1199)) },
            throws: Self.isRefused)
    }

    @Test(.long) func aLargeAttachmentStreamsToItsDescriptorInBoundedMemory() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let path = folder + "/large.eml"
        let size = 200 << 20
        let digest = try SHA256Digest()
        try digest.begin()
        do {
            let file = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: 0o644)
            try file.writeAll(
                Array(
                    (Self.header + "Content-Type: application/octet-stream\n"
                        + "Content-Disposition: attachment; filename=\"large.bin\"\nContent-Transfer-Encoding: base64\n\n")
                        .utf8))
            let block = 57 * 16 * 1024  // whole base64 lines
            for start in stride(from: 0, to: size, by: block) {
                let chunk = pattern(min(block, size - start), seed: UInt64(start))
                try chunk.withUnsafeBytes { try digest.update($0) }
                try file.writeAll(
                    Array(Data(chunk).base64EncodedData(options: [.lineLength76Characters, .endLineWithLineFeed])))
                try file.writeAll([0x0A])
            }
        }
        let expected = try digest.finish().map { String(format: "%02x", $0) }.joined()
        let before = try Self.peakResident()
        let got = try MailParse.attachments(path)
        #expect(got.map(\.size) == [Int64(size)])
        #expect(got.first?.sha256 == expected)
        #expect(try Self.peakResident() - before < 64 << 20)
    }

    /// Content-Type spelled every way GMime reads it, each over five named parts: `delimiter` is what GMime follows.
    static let spellings: [(contentType: String, delimiter: String)] = [
        ("Content-Type: (c) multipart/mixed; boundary=\"b\"", "--b"),
        ("Content-Type: multipart(x)/(y)mixed; boundary=(z)\"b\"", "--b"),
        ("Content-Type: multipart/mixed; boundary=\"=?us-ascii?q?zz?=\"", "--zz"),
        ("Content-Type: multipart/mixed; boundary==?us-ascii?q?zz?=", "--zz"),
        ("Content-Type: multipart/mixed;\n boundary=\n\t\"b\"", "--b"),
        ("CONTENT-TYPE: MULTIPART/MIXED; BOUNDARY=\"b\"", "--b"),
        ("Content-Type: multipart/mixed; boundary*=us-ascii''b%41", "--bA"),
        ("Content-Type: multipart/mixed; boundary*0=b; boundary*1=c", "--bc"),
        ("Content-Type: text/plain\nContent-Type: multipart/mixed; boundary=\"b\"", "--b"),
        ("Content-Type: multipart/mixed; boundary=\"b\"\nContent-Type: multipart/mixed; boundary=\"c\"", "--c"),
        ("Content-Type : multipart/mixed; boundary=b", "--b"),
        ("Content-Type: multipart/mixed; boundary=\"\"", "--"),
    ]

    static func spelled(_ contentType: String, _ delimiter: String, parts: Int) -> String {
        var text = header + contentType + "\n\n"
        for index in 0..<parts { text += "\(delimiter)\nContent-Type: text/plain; name=\"p\(index).txt\"\n\nx\n" }
        return text + delimiter + "--\n"
    }

    static func refusal(_ body: () throws -> Void) -> String? {
        do {
            try body()
        } catch MailError.refused(let why) {
            return why
        } catch {
            return "not refused: \(error)"
        }
        return nil
    }

    @Test func theStructureScanCountsThePartsGMimeBuildsHoweverContentTypeIsSpelled() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        for (index, (contentType, delimiter)) in Self.spellings.enumerated() {
            let path = try MailParse.write(
                Self.spelled(contentType, delimiter, parts: 5), in: folder, as: "spelling-\(index).eml")
            // GMime builds the multipart and its five leaves: six parts...
            #expect(try MailParse.attachments(path, limits: MailLimits(maxParts: 6)).count == 5, "\(contentType)")
            // ...and the structure scan counts all six before GMime reads any: one fewer allowed is refused at once.
            #expect(
                Self.refusal { _ = try MailParse.open(path, limits: MailLimits(maxParts: 5)) } == "more than 5 parts",
                "\(contentType)")
        }
        // A part without a Content-Type in a multipart/digest is a message of its own, walked into.
        var digest = Self.header + "Content-Type: multipart/digest; boundary=\"d\"\n\n"
        for index in 0..<3 {
            digest += "--d\n\nFrom: x@example.com\nContent-Type: multipart/mixed; boundary=\"m\(index)\"\n\n"
            digest += "--m\(index)\nContent-Type: text/plain; name=\"a\(index).txt\"\n\na\n--m\(index)--\n"
        }
        let digestPath = try MailParse.write(digest + "--d--\n", in: folder, as: "digest.eml")
        // The digest, and for each entry its message part, the message's multipart and the leaf: 10 parts, depth 3.
        #expect(try MailParse.attachments(digestPath, limits: MailLimits(maxDepth: 3, maxParts: 10)).count == 3)
        #expect(
            Self.refusal { _ = try MailParse.open(digestPath, limits: MailLimits(maxDepth: 3, maxParts: 9)) }
                == "more than 9 parts")
        #expect(
            Self.refusal { _ = try MailParse.open(digestPath, limits: MailLimits(maxDepth: 2)) }
                == "MIME parts nested deeper than 2 levels")
        // A base64 message/rfc822 part is a leaf to GMime: what it holds is not followed.
        let encoded =
            Self.header + "Content-Type: message/rfc822\nContent-Transfer-Encoding: base64\n"
            + "Content-Disposition: attachment; filename=\"fwd.eml\"\n\n"
            + Data(Self.wide(20).utf8).base64EncodedString(options: .lineLength76Characters) + "\n"
        let encodedPath = try MailParse.write(encoded, in: folder, as: "encoded-message.eml")
        #expect(try MailParse.attachments(encodedPath, limits: MailLimits(maxParts: 1)).count == 1)
    }

    /// Writes a message of `head`, `count` copies of `line` and `tail`, a chunk at a time.
    static func writeLarge(_ path: String, head: String, line: String, count: Int, tail: String) throws {
        let file = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: 0o644)
        try file.writeAll(Array(head.utf8))
        let chunk = Array(String(repeating: line, count: 1024).utf8)
        for _ in 0..<(count / 1024) { try file.writeAll(chunk) }
        try file.writeAll(Array(String(repeating: line, count: count % 1024).utf8))
        try file.writeAll(Array(tail.utf8))
    }

    @Test func hostileMessagesAreRefusedNamingTheLimitOrImportedWhole() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let bomb = { (contentType: String, delimiter: String) in
            try MailParse.write(Self.spelled(contentType, delimiter, parts: 10_000), in: folder, as: "bomb.eml")
        }
        for (contentType, delimiter) in [
            ("Content-Type: (c) multipart/mixed; boundary=\"b\"", "--b"),
            ("Content-Type: multipart/mixed; boundary=\"=?us-ascii?q?zz?=\"", "--zz"),
        ] {
            let path = try bomb(contentType, delimiter)
            #expect(Self.refusal { _ = try MailParse.open(path) } == "more than 10,000 parts", "\(contentType)")
            try FileManager.default.removeItem(atPath: path)
        }
        let wide = try MailParse.write(Self.wide(400_000), in: folder, as: "wide.eml")
        #expect(Self.refusal { _ = try MailParse.open(wide) } == "more than 10,000 parts")

        let from = folder + "/from.eml"
        try Self.writeLarge(from, head: "From: ", line: "a", count: 2 << 20, tail: "@example.com\nSubject: x\n\nbody\n")
        #expect(Self.refusal { _ = try MailParse.open(from) } == "a header block over 1 MiB")
        let partHeader = folder + "/part-header.eml"
        try Self.writeLarge(
            partHeader, head: Self.header + "Content-Type: multipart/mixed; boundary=\"b\"\n\n--b\nX-Long: ",
            line: "a", count: 1 << 20, tail: "\n\nx\n--b--\n")
        #expect(Self.refusal { _ = try MailParse.open(partHeader) } == "a header block over 1 MiB")

        let named = "--b\nContent-Type: text/plain; name=\"a.txt\"\n\nhello\n"
        let preamble = folder + "/preamble.eml"
        try Self.writeLarge(
            preamble, head: Self.header + "Content-Type: multipart/mixed; boundary=\"b\"\n\n",
            line: String(repeating: "p", count: 1023) + "\n", count: 2048, tail: named + "--b--\n")
        let epilogue = folder + "/epilogue.eml"
        try Self.writeLarge(
            epilogue, head: Self.header + "Content-Type: multipart/mixed; boundary=\"b\"\n\n" + named + "--b--\n",
            line: String(repeating: "e", count: 1023) + "\n", count: 2048, tail: "")
        for path in [preamble, epilogue] {
            let got = try MailParse.attachments(path)
            #expect(got.map { String(decoding: $0.name, as: UTF8.self) } == ["a.txt"])
            #expect(got.map(\.size) == [5])
            #expect(got == (try MailParse.oracleAttachments([path]))[path])
        }

        var text = Self.header + "Content-Type: application/octet-stream\nContent-Disposition: attachment\n\n"
        text += String(repeating: "x", count: (1 << 20) + 1)
        let big = try MailParse.write(text, in: folder, as: "big.eml")
        #expect(
            Self.refusal { _ = try MailParse.attachments(big, limits: MailLimits(maxBytes: 1 << 20)) }
                == "attachments over --max-bytes 1M")
        #expect(
            try MailParse.attachments(big, limits: MailLimits(maxBytes: (1 << 20) + 1)).map(\.size) == [(1 << 20) + 1])
    }

    @Test func aPreambleAndAnEpilogueOf200MiBPassInBoundedMemory() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let path = folder + "/faces.eml"
        let line = String(repeating: "f", count: 1023) + "\n"
        let file = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: 0o644)
        try file.writeAll(Array((Self.header + "Content-Type: multipart/mixed; boundary=\"b\"\n\n").utf8))
        let chunk = Array(String(repeating: line, count: 1024).utf8)
        for _ in 0..<200 { try file.writeAll(chunk) }
        try file.writeAll(Array("--b\nContent-Type: text/plain; name=\"a.txt\"\n\nhello\n--b--\n".utf8))
        for _ in 0..<200 { try file.writeAll(chunk) }
        let before = try Self.peakResident()
        let got = try MailParse.attachments(path)
        #expect(got.map(\.size) == [5])
        // GMime holds a multipart's preamble and epilogue in memory; it reads the message without them.
        #expect(try Self.peakResident() - before < 64 << 20)
    }

    @Test func twoHundredThousandHeaderFieldsAcrossPartsPassInBoundedMemory() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let path = folder + "/fields.eml"
        let padding = (0..<200).map { "X-Pad-\($0): " + String(repeating: "v", count: 60) + "\n" }.joined()
        do {
            let out = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: 0o644)
            try out.writeAll(Array((Self.header + "Content-Type: multipart/mixed; boundary=\"b\"\n\n").utf8))
            for index in 0..<1_000 {
                try out.writeAll(
                    Array("--b\nX-Before: 1\nContent-Type: text/plain; name=\"p\(index).txt\"\n\(padding)\nx\n".utf8))
            }
            try out.writeAll(Array("--b--\n".utf8))
        }
        let before = try Self.peakResident()
        let (file, message) = try MailParse.open(path)
        var names: [String] = []
        try message.forEachAttachment { names.append(String(decoding: $0.name.bytes, as: UTF8.self)) }
        withExtendedLifetime(file) {}
        #expect(names == (0..<1_000).map { "p\($0).txt" })
        // GMime holds every header it is given in memory (these 200,000 took 142 MiB): it is given only those read.
        #expect(try Self.peakResident() - before < 64 << 20)
    }
}
