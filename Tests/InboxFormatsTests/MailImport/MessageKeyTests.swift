import AppContainer
import Foundation
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// A message's key leaves out what transport and filters add, so a redelivery is a duplicate; anything else
/// changes it. Checked against `Tests/Oracle/message_key.py`, the same rule in plain Python byte handling.
@Suite struct MessageKeyTests {
    static let bare = """
        From: Alice <alice@example.org>
        To: bob@example.org
        Subject: the report
        Message-ID: <redelivery-1@example.org>
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="b"

        --b
        Content-Type: text/plain

        From the start of a line, a body.
        >From a line quoted by its writer.
        --b
        Content-Type: application/octet-stream; name="a.bin"
        Content-Disposition: attachment; filename="a.bin"
        Content-Transfer-Encoding: base64

        AAECAwQFBgc=
        --b--

        """

    /// What Postfix's local(8) puts before a message it delivers.
    static let postfixTrace = """
        Return-Path: <alice@example.org>
        X-Original-To: bob@localhost
        Delivered-To: bob@localhost
        Received: by host.localdomain (Postfix, from userid 1000)
        \tid 4F1A2B3C4D; Fri,  4 Dec 2026 20:00:00 +0000 (UTC)

        """

    /// What spam and virus filters and a receiving MX insert, some folded.
    static let filterFields = """
        X-Spam-Status: No, score=-0.1 required=5.0 tests=ALL_TRUSTED
        \tautolearn=ham version=3.4.6
        X-Spam-Checker-Version: SpamAssassin 3.4.6
        X-Virus-Scanned: clamav-milter 1.0.3
        Authentication-Results: mx.example.org;
         dkim=pass header.d=example.org
        ARC-Seal: i=1; a=rsa-sha256; cv=none; d=example.org; s=arc; b=abc
        received: from mx.example.org by host (lowercase)
        X-RSPAMD-Score: 0.0

        """

    private let scratch: Scratch
    private var folder: String { scratch.path }

    init() throws {
        scratch = try Scratch()
    }

    /// The keys of the messages of the source at `path`, as the importer finds them.
    private func keys(_ path: String) throws -> [String] {
        var keys: [String] = []
        try MailSource.named(Array(path.utf8)).forEachMessage { keys.append(SHA256Digest.hex($0.key)) }
        return keys
    }

    /// The key of `bytes` as one message file.
    private func key(_ bytes: [UInt8]) throws -> String {
        let path = folder + "/\(UUID().uuidString).eml"
        try makeFile(path, bytes)
        return try #require(try keys(path).first)
    }

    private func key(_ text: String) throws -> String { try key(Array(text.utf8)) }

    /// What the oracle says of `paths` read as `kind` (`message`, `mbox` or `maildir`).
    private func oracle(_ kind: String, _ paths: [String]) throws -> [String] {
        let script = TestPaths.oracle("message_key.py")
        let (status, output, errors) = try runProgram("/usr/bin/python3", [script, kind] + paths).parts
        try #require(status == 0, "the oracle failed: \(errors)")
        return output.split(separator: "\n").map(String.init)
    }

    /// Our keys and the oracle's for one source.
    private func compare(_ path: String, _ comment: Comment? = nil) throws {
        let kind: String
        switch try MailSource.named(Array(path.utf8)) {
        case .mbox: kind = "mbox"
        case .maildir: kind = "maildir"
        default: kind = "message"
        }
        let ours = try keys(path)
        #expect(!ours.isEmpty)
        #expect(ours == (try oracle(kind, [path])), comment)
    }

    /// An mbox of `messages`, each `From ` line quoted as mboxrd writes it.
    private func mbox(_ messages: [String]) -> String {
        messages.map { message in
            let quoted = message.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                line.drop { $0 == ">" }.hasPrefix("From ") ? ">" + line : line
            }
            return "From alice@example.org Fri Dec  4 20:00:00 2026\n" + quoted.joined(separator: "\n") + "\n"
        }.joined()
    }

    @Test func whatTransportAndFiltersAddLeavesTheKeyAsItWas() throws {
        let bare = try key(Self.bare)
        #expect(try key(Self.postfixTrace + Self.bare) == bare, "Postfix's trace fields before it")
        let lines = Self.bare.split(separator: "\n", omittingEmptySubsequences: false)
        let filtered = (lines[..<3] + Self.filterFields.split(separator: "\n").map { $0 } + lines[3...])
            .joined(separator: "\n")
        #expect(try key(filtered) == bare, "filter fields in the middle of the header")
        #expect(try key(Self.bare.replacingOccurrences(of: "\n", with: "\r\n")) == bare, "CRLF line ends")
        let crlfTraced = (Self.postfixTrace + filtered).replacingOccurrences(of: "\n", with: "\r\n")
        #expect(try key(crlfTraced) == bare, "all of it at once")

        let path = folder + "/redelivered.mbox"
        try makeFile(path, Array(mbox([Self.bare, Self.postfixTrace + Self.bare]).utf8))
        let text = String(decoding: try readFile(path), as: UTF8.self)
        #expect(text.contains("\n>From the start") && text.contains("\n>>From a line quoted"))
        #expect(try keys(path) == [bare, bare], "an mbox entry, its >From quoting undone")
    }

    @Test func aMessageThatDiffersInWhatIsKeptHasAnotherKey() throws {
        let bare = try key(Self.bare)
        let variants = [
            Self.bare.replacingOccurrences(of: "AAECAwQFBgc=", with: "AAECAwQFBgg="),
            Self.bare.replacingOccurrences(of: "Subject: the report", with: "Subject: the report, again"),
            Self.bare.replacingOccurrences(of: "Subject:", with: "subject:"),
            Self.bare.replacingOccurrences(of: "To: bob", with: "X-Spamless: yes\nTo: bob"),
            // A trace field's name inside a part, or after the header, is content.
            Self.bare.replacingOccurrences(
                of: "Content-Type: text/plain\n", with: "Content-Type: text/plain\nReceived: x\n"),
            Self.bare + "Received: after the header\n",
            // A bare CR is not a line end; `>From ` quoting is undone in an mbox entry only.
            Self.bare.replacingOccurrences(of: "a body.\n", with: "a body.\r\r\n"),
            Self.bare.replacingOccurrences(of: "\nFrom the start", with: "\n>From the start"),
        ]
        var seen: Set<String> = [bare]
        for variant in variants {
            let variantKey = try key(variant)
            #expect(!seen.contains(variantKey), "\(variant)")
            seen.insert(variantKey)
        }
    }

    @Test func theKeyIsTheOraclesForVariedMessages() throws {
        let samples = URL(fileURLWithPath: TestPaths.samples)
        var paths = [
            samples.appendingPathComponent("mail/quarterly-mail.eml").path,
            samples.appendingPathComponent("forwarded-message.eml").path,
        ]
        let corpus = try FileManager.default.contentsOfDirectory(atPath: MailParse.pythonCorpus)
            .filter { $0.hasPrefix("msg_") && $0.hasSuffix(".txt") }.sorted()
        try #require(corpus.count >= 40, "the corpus (libpython3.11-testsuite) is missing")
        paths += corpus.map { MailParse.pythonCorpus + "/" + $0 }
        for (index, text) in [Self.bare, Self.postfixTrace + Self.bare, Self.filterFields + Self.bare].enumerated() {
            paths.append(
                try MailParse.write(text.replacingOccurrences(of: "\n", with: "\r\n"), in: folder, as: "\(index)"))
        }
        var mboxes = 0
        for path in paths {
            try compare(path, "\(path)")
            if case .mbox = try MailSource.named(Array(path.utf8)) { mboxes += 1 }
        }
        #expect(mboxes >= 1, "some of the corpus are mbox entries")
        let box = try MailParse.write(
            mbox([Self.bare, Self.postfixTrace + Self.bare, "Subject: x\n\n>>>From y\n"]), in: folder, as: "box")
        try compare(box)
    }

    @Test func hostileMessagesHaveTheOraclesKey() throws {
        let long = String(repeating: "a", count: 600_000)
        let cases: [[UInt8]] = [
            // No blank line, no final newline: all header.
            Array("Subject: x\nReceived: y".utf8),
            Array("Subject: x\n".utf8),
            // Lines longer than the reader's buffer, dropped, kept, and one with no colon.
            Array("X-Spam-Report: \(long)\n\tmore\nSubject: x\n\nbody\n".utf8),
            Array("X-Spam-\(long): x\r\nSubject: x\r\n\r\nbody\r\n".utf8),
            Array("X-Spam-\(long)\nReceived: kept, the header goes on\n\nbody\n".utf8),
            Array("Subject: x\n\n\(long)\r\n\(long)\r".utf8),
            // NUL bytes and bare CRs.
            [0x53, 0x3A, 0x00, 0x0D, 0x0A, 0x52, 0x65, 0x63, 0x65, 0x69, 0x76, 0x65, 0x64, 0x3A, 0x00, 0x0A, 0x0D]
                + Array("\r\n\r\n\0body\r\r\n".utf8),
            Array("Received\0: not a trace name\nReceived : nor this\n\n".utf8),
            // A folded line first, and CRLF lines across the buffer's end.
            Array((" folded first\nReceived: x\n\n" + String(repeating: "0123456789abcdef\r\n", count: 40_000)).utf8),
        ]
        for (index, bytes) in cases.enumerated() {
            let path = folder + "/hostile-\(index)"
            try makeFile(path, bytes)
            try compare(path, "case \(index)")
        }
        #expect(try key(Array("Subject: x\nReceived: y".utf8)) == (try key(Array("Subject: x\n".utf8))))
        #expect(try key(cases[2]) == (try key(Array("Subject: x\n\nbody\n".utf8))))
        let quotes = String(repeating: ">", count: 300_000)
        let box = try MailParse.write(
            mbox(["Subject: x\n\n\(quotes)From y\n\(quotes)x\n"]), in: folder, as: "long.mbox")
        try compare(box)
    }
}
