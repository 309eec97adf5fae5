import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox import`'s stdout holds only its documented output, whatever a library prints (ARCHITECTURE.md, "Two
/// executables").
@Suite struct ImportOutputTests {
    static let tnefGenerator = TestPaths.oracle("make_tnef.py")

    @Test func whatLibytnefPrintsOnADamagedWinmailDatStaysOffStdout() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let content = try folder.file("first", "hello from Outlook\n")
        let python = try runProgram(
            "/usr/bin/python3", [Self.tnefGenerator, folder.path + "/winmail.dat", "report.txt=\(content)"])
        try #require(python.status == 0)
        // Cut inside an attribute's data: libytnef prints "ERROR: Unable to read data." on stdout.
        let broken = try Data(contentsOf: URL(fileURLWithPath: folder.path + "/winmail.dat")).prefix(60)
        let path = try folder.file(
            "broken.eml",
            """
            From: a@example.com
            Subject: damaged
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="b"

            --b
            Content-Type: application/ms-tnef; name="winmail.dat"
            Content-Transfer-Encoding: base64

            \(broken.base64EncodedString())
            --b--

            """)

        let result = try InboxProcess.run("--container", container, "import", "--json", path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("ERROR"), "libytnef printed, to stderr: \(result.stderr)")
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]])
        #expect(objects.count == 1)
        let attachments = try #require(objects.first?["attachments"] as? [[String: Any]])
        #expect(attachments.map { $0["name"] as? String } == ["winmail.dat"], "delivered as it is")
        #expect(attachments.first?["size"] as? Int == broken.count)
    }
}
