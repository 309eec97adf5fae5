import AppContainer
import Foundation
import Glibc
import InboxFormats
import InboxKit
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
        let folder = try MailParse.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
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
        let folder = try MailParse.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
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
        let folder = try MailParse.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
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

    @Test func aLargeAttachmentStreamsToItsDescriptorInBoundedMemory() throws {
        let folder = try MailParse.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
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
}
