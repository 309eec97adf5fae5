import AppContainer
import Foundation
import InboxFormats
import InboxKit
import TestSupport
import Testing

/// ARCHITECTURE.md, "Mail import": forwarded messages walked into; signatures, fragments and external bodies
/// left out; winmail.dat replaced by its files; the message's own headers.
@Suite struct MailParseStructureTests {
    static func base64(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString(options: [.lineLength76Characters, .endLineWithLineFeed])
    }

    static let forwarded = """
        From: =?utf-8?q?Ana_Mar=C3=ADa?= <ana@example.com>
        To: b@example.com
        Subject: =?utf-8?b?RndkOiBjYWbDqQ==?=
        Date: Mon, 1 Dec 2025 10:00:00 +0100
        Message-ID: <outer@example.com>
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="outer"

        --outer
        Content-Type: text/plain

        See below.
        --outer
        Content-Type: application/pdf
        Content-Disposition: attachment; filename="report.pdf"
        Content-Transfer-Encoding: base64

        \(base64(pattern(3000, seed: 7)))
        --outer
        Content-Type: message/rfc822
        Content-Disposition: attachment; filename="forwarded.eml"

        From: c@example.com
        Subject: inner
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="inner"

        --inner
        Content-Type: text/plain; name="inner.txt"

        inner text
        --inner
        Content-Type: message/rfc822

        Subject: deeper
        Content-Type: application/octet-stream
        Content-Disposition: attachment; filename="deep.bin"
        Content-Transfer-Encoding: base64

        \(base64(pattern(500, seed: 8)))
        --inner--
        --outer
        Content-Type: multipart/signed; protocol="application/pgp-signature"; boundary="signed"

        --signed
        Content-Type: text/plain; name="signed.txt"

        signed text
        --signed
        Content-Type: application/pgp-signature; name="signature.asc"
        Content-Disposition: attachment; filename="signature.asc"

        -----BEGIN PGP SIGNATURE-----
        --signed--
        --outer
        Content-Type: application/pkcs7-signature; name="smime.p7s"

        MIAGCSqGSIb3
        --outer
        Content-Type: message/partial; id="frag"; number=1; total=2
        Content-Disposition: attachment; filename="part1.eml"

        Subject: fragment
        Content-Disposition: attachment; filename="fragment.bin"

        fragment
        --outer
        Content-Type: message/external-body; access-type=URL; URL="http://example.com/x.pdf"
        Content-Disposition: attachment; filename="x.pdf"

        Content-Type: application/pdf

        --outer--

        """

    @Test func forwardedMessagesAreWalkedIntoAndSignaturesFragmentsAndExternalBodiesLeftOut() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let path = try MailParse.write(Self.forwarded, in: folder, as: "forwarded.eml")
        let got = try MailParse.attachments(path)
        #expect(
            got.map { String(decoding: $0.name, as: UTF8.self) } == [
                "report.pdf", "inner.txt", "deep.bin", "signed.txt",
            ])
        #expect(got.map(\.size) == [3000, 10, 500, 11])
        #expect(got == (try MailParse.oracleAttachments([path]))[path])

        let (file, message) = try MailParse.open(path)
        defer { withExtendedLifetime(file) {} }
        #expect(message.messageID == "outer@example.com")
        #expect(message.subject == "Fwd: café")
        #expect(message.from == "Ana María <ana@example.com>")
        #expect(message.date == "Mon, 1 Dec 2025 10:00:00 +0100")
    }

    @Test func aWinmailDatIsReplacedByTheFilesItHolds() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        let first = Array("hello from Outlook\n".utf8)
        let second = pattern(70_000, seed: 9)
        try makeFile(folder + "/first", first)
        try makeFile(folder + "/second", second)
        let (status, _, errors) = try runProgram(
            "/usr/bin/python3",
            [
                MailParse.tnefGenerator, folder + "/winmail.dat", "report.txt=\(folder)/first",
                "../x/\u{1B}pic.bin=\(folder)/second",
            ]
        ).parts
        try #require(status == 0, "\(errors)")
        let tnef = try readFile(folder + "/winmail.dat")
        let broken = Array(tnef.prefix(40))
        let text = """
            From: a@example.com
            Subject: tnef
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="B"

            --B
            Content-Type: application/ms-tnef; name="winmail.dat"
            Content-Disposition: attachment; filename="winmail.dat"
            Content-Transfer-Encoding: base64

            \(Self.base64(tnef))
            --B
            Content-Type: text/plain
            Content-Disposition: attachment; filename="after.txt"

            after
            --B
            Content-Type: application/ms-tnef; name="winmail.dat"
            Content-Transfer-Encoding: base64

            \(Self.base64(broken))
            --B--

            """
        let path = try MailParse.write(text, in: folder, as: "tnef.eml")
        let got = try MailParse.attachments(path)
        #expect(
            got.map { String(decoding: $0.name, as: UTF8.self) } == [
                "report.txt", "_pic.bin", "after.txt", "winmail.dat",
            ])
        #expect(
            got.map(\.sha256) == [
                try MailParseDecodingTests.sha256(first), try MailParseDecodingTests.sha256(second),
                try MailParseDecodingTests.sha256(Array("after".utf8)), try MailParseDecodingTests.sha256(broken),
            ])
        #expect(got.first?.contentType == "application/octet-stream")
    }

    /// A winmail.dat whose copy cannot be read (an I/O error at any `pread`) fails the message with the error, for
    /// the import to be tried again (75): never taken for a damaged stream and delivered as it is.
    @Test func aWinmailDatThatCannotBeReadIsAnErrorNotDeliveredAsItIs() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path
        try makeFile(folder + "/first", Array("hello from Outlook\n".utf8))
        let (status, _, errors) = try runProgram(
            "/usr/bin/python3", [MailParse.tnefGenerator, folder + "/winmail.dat", "report.txt=\(folder)/first"]
        ).parts
        try #require(status == 0, "\(errors)")
        let text = """
            From: a@example.com
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="B"

            --B
            Content-Type: application/ms-tnef; name="winmail.dat"
            Content-Transfer-Encoding: base64

            \(Self.base64(try readFile(folder + "/winmail.dat")))
            --B--

            """
        let path = try MailParse.write(text, in: folder, as: "tnef.eml")
        #expect(try MailParse.attachments(path).map { String(decoding: $0.name, as: UTF8.self) } == ["report.txt"])
        var failing = 1
        while true {
            let plan = SyscallFaultPlan(failing: failing, only: "pread", with: Errno.ioError)
            let outcome = plan.run { Result { try MailParse.attachments(path) } }
            guard plan.injected != nil else { break }
            switch outcome {
            case .success(let got):
                Issue.record("pread \(failing) failed, yet: \(got.map { String(decoding: $0.name, as: UTF8.self) })")
            case .failure(MailError.refused(let why)), .failure(MailError.notAMessage(let why)):
                Issue.record("pread \(failing) failed, yet the message was refused: \(why)")
            case .failure:
                break  // the error, as the import throws it: 75, tried again
            }
            failing += 1
        }
        #expect(failing > 3, "the TNEF reads are among the preads failed")
    }
}
