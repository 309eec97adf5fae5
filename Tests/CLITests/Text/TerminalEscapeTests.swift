import Foundation
import Glibc
import TestSupport
import Testing

/// Every command that prints a name prints it escaped to a terminal, C0, DEL and C1 controls alike (issue 49;
/// ARCHITECTURE.md, "The command line"): the container's path and an item's name hold an ESC sequence, an OSC one
/// (`ESC ] 0;title BEL`, which sets a terminal's title) and U+009B (CSI in C1), and none of them reaches the terminal.
@Suite struct TerminalEscapeTests {
    static let hostile = "esc\u{1B}[31m osc\u{1B}]0;title\u{07} csi\u{9B}2J"
    /// How `TerminalText` shows it.
    static let shown = #"esc\x1b[31m osc\x1b]0;title\x07 csi\xc2\x9b2J"#

    /// What must never reach a terminal: the raw sequences (a progress line's own `ESC [K` may).
    private func expectNoRawSequence(
        _ bytes: [UInt8], _ what: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for raw in [[0x1B, 0x5B, 0x33, 0x31], [0x1B, 0x5D], [0x07], [0xC2, 0x9B]] as [[UInt8]] {
            let found = bytes.indices.contains { bytes[$0...].starts(with: raw) }
            #expect(
                !found, "\(what): raw \(raw) in \(String(decoding: bytes, as: UTF8.self))",
                sourceLocation: sourceLocation)
        }
    }

    /// Runs `inbox --container ROOT ARGS…` with stdout and stderr on terminals; checks that nothing raw reached them
    /// and that the name was shown, escaped, on one of them.
    @discardableResult
    private func run(_ root: String, _ arguments: [String], status: Int32 = 0, showsName: Bool = true) throws
        -> InboxProcess.Result
    {
        let result = try InboxProcess.run(
            (["--container", root] + arguments).map { Array($0.utf8) }, terminalColumns: 200, stderrIsTerminal: true)
        let what = arguments.prefix(2).joined(separator: " ")
        #expect(result.status == status, "\(what): \(result.stderr)")
        expectNoRawSequence(result.stdout, what + " (stdout)")
        expectNoRawSequence(Array(result.stderr.utf8), what + " (stderr)")
        if showsName {
            #expect(
                (result.stdoutText + result.stderr).contains(Self.shown),
                "\(what): \(result.stdoutText) \(result.stderr)")
        }
        return result
    }

    @Test func noCommandPrintsANamesControlsRawToATerminal() throws {
        let folder = try Scratch()
        let root = folder.path + "/" + Self.hostile
        let name = Self.hostile + ".txt"
        let source = try folder.file(name, "hostile\n")
        try run(root, ["init"])
        try run(root, ["deliver", source])
        try run(root, ["watch", "--once", "--verbose"])
        try run(root, ["ls"])
        try run(root, ["log"])
        try run(root, ["status"])
        try run(root, ["move", name])
        try run(root, ["ls", "documents"])
        try run(root, ["move", name], status: 66)
        try Data("scratch".utf8).write(to: URL(fileURLWithPath: root + "/tmp/" + name))
        try run(root, ["clean", "--dry-run"])
        try run(root, ["clean"])
        try run(root, ["backup-plan"])
        try run(root, ["verify"], showsName: false)
        let archive = folder.path + "/" + Self.hostile + ".tar"
        try run(root, ["backup", "--to", archive])
        let restored = folder.path + "/restored " + Self.hostile
        try run(restored, ["init"])
        try run(restored, ["restore", archive])
        let message = try folder.file(
            "m.eml",
            """
            From: a@example.com\r
            MIME-Version: 1.0\r
            Content-Type: multipart/mixed; boundary=X\r
            \r
            --X\r
            Content-Type: text/plain; name="note.txt"\r
            Content-Disposition: attachment; filename="note.txt"\r
            \r
            hello\r
            --X--\r

            """)
        try run(root, ["import", message])
    }

    @Test(.enabled(if: userAttributesWork, "needs user. extended attributes"))
    func excludeFromBackupEscapesOnATerminalAndIsExactInAPipe() throws {
        let folder = try Scratch()
        let root = folder.path + "/" + Self.hostile
        try run(root, ["init"])
        let document = root + "/Documents/" + Self.hostile + ".txt"
        try Data("doc".utf8).write(to: URL(fileURLWithPath: document))
        let shown = try run(root, ["exclude-from-backup", document])
        #expect(shown.stdoutText.hasPrefix("excluded from backup: "), "\(shown.stdoutText)")
        let piped = try InboxProcess.run(
            ["--container", root, "exclude-from-backup", document, "--undo"].map { Array($0.utf8) })
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(piped.stdout == Array(("exclusion flag cleared: " + document + "\n").utf8), "exact bytes in a pipe")
    }
}
