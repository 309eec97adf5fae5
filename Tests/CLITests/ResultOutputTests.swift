import Foundation
import TestSupport
import Testing

/// What commands print for a person and for scripts: `status` counts, snake_case JSON, `ls --json` kinds,
/// `--json` and `-0` on `deliver`, `move` and `import`, names escaped on a terminal (ARCHITECTURE.md, "The command
/// line").
@Suite struct ResultOutputTests {
    private func run(_ container: String, _ arguments: [String], terminalColumns: UInt16? = nil) throws
        -> InboxProcess.Result
    {
        try InboxProcess.run(
            (["--container", container] + arguments).map { Array($0.utf8) }, terminalColumns: terminalColumns)
    }

    @Test func statusCountsInWordsAndPrintsSnakeCaseJSON() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        #expect(try run(container, ["deliver", try folder.file("one.txt", "1")]).status == 0)
        let text = try run(container, ["status"])
        #expect(text.status == 0)
        let inbox = try #require(text.lines.first { $0.hasPrefix("  Documents/Inbox ") })
        #expect(inbox.hasSuffix(" 1 file, 1 byte"), "\(inbox)")
        let tmp = try #require(text.lines.first { $0.hasPrefix("  tmp ") })
        #expect(tmp.hasSuffix(" 0 files, 0 bytes"), "\(tmp)")
        #expect(try run(container, ["deliver", try folder.file("two.txt", "22")]).status == 0)
        #expect(
            try run(container, ["status"]).lines.contains {
                $0.hasPrefix("  Documents/Inbox ") && $0.hasSuffix(" 2 files, 3 bytes")
            })

        let json = try run(container, ["status", "--json"])
        #expect(json.status == 0)
        #expect(!json.stdoutText.contains(#"\/"#), "slashes unescaped: \(json.stdoutText)")
        #expect(json.stdoutText.contains(#""container":"\#(container)""#))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any])
        var keys: [String] = []
        func collect(_ value: Any) {
            guard let dictionary = value as? [String: Any] else { return }
            for (key, inner) in dictionary {
                keys.append(key)
                collect(inner)
            }
        }
        collect(object)
        #expect(keys.allSatisfy { $0.wholeMatch(of: /[a-z0-9]+(_[a-z0-9]+)*/) != nil }, "\(keys)")
        let places = try #require(object["places"] as? [String: Any])
        #expect(places["application_support"] != nil)
        #expect((places["inbox"] as? [String: Any])?["files"] as? Int == 2)
    }

    @Test func lsJSONSaysWhatEachItemIs() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try folder.file("container/Documents/notes/a.txt", "a")
        try folder.file("container/Documents/b.txt", "b")
        #expect(symlink("b.txt", container + "/Documents/link") == 0)
        let result = try run(container, ["ls", "documents", "--json"])
        #expect(result.status == 0)
        let items = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]])
        var kinds: [String: String] = [:]
        for item in items { kinds[item["name"] as? String ?? "?"] = item["kind"] as? String }
        #expect(kinds == ["notes": "folder", "b.txt": "file", "link": "link"])
    }

    @Test func deliverAndMovePrintJSONOrNULTerminatedExactPaths() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let inbox = container + "/Documents/Inbox/"
        let odd = try folder.file("odd\nname.txt", "odd")
        let plain = try folder.file("plain.txt", "plain!")

        let nul = try run(container, ["deliver", odd, plain, "-0"])
        #expect(nul.status == 0)
        #expect(nul.stdout == Array((inbox + "odd\nname.txt\u{0}" + inbox + "plain.txt\u{0}").utf8))

        let json = try run(container, ["deliver", plain, "--json"])
        #expect(json.status == 0)
        let delivered = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]])
        #expect(delivered.count == 1)
        #expect(delivered.first?["name"] as? String == "plain-1.txt")
        #expect(delivered.first?["path"] as? String == inbox + "plain-1.txt")
        #expect(delivered.first?["size"] as? Int == 6)
        #expect(!json.stdoutText.contains(#"\/"#))

        let moved = try run(container, ["move", "odd\nname.txt", "-0"])
        #expect(moved.status == 0)
        #expect(moved.stdout == Array((container + "/Documents/odd\nname.txt\u{0}").utf8))
        let movedJSON = try run(container, ["move", "plain.txt", "--json"])
        #expect(movedJSON.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(movedJSON.stdout)) as? [String: Any])
        #expect(object["path"] as? String == container + "/Documents/plain.txt")
        #expect(object["name"] as? String == "plain.txt")

        let both = try run(container, ["move", "plain-1.txt", "--json", "-0"])
        #expect(both.status == 64)
        #expect(FileManager.default.fileExists(atPath: inbox + "plain-1.txt"), "nothing moved on a usage error")
    }

    @Test func importPrintsNULTerminatedPaths() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let message = try folder.file(
            "m.eml",
            """
            From: a@example.com\r
            Subject: note\r
            MIME-Version: 1.0\r
            Content-Type: multipart/mixed; boundary=X\r
            \r
            --X\r
            Content-Type: text/plain\r
            \r
            hi\r
            --X\r
            Content-Type: text/plain; name="note.txt"\r
            Content-Disposition: attachment; filename="note.txt"\r
            \r
            hello\r
            --X--\r

            """)
        let result = try run(container, ["import", message, "-0"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == Array((container + "/Documents/Inbox/note.txt\u{0}").utf8))
    }

    @Test func namesAreEscapedOnATerminalAndExactOtherwise() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let name = "red\u{1B}[31m\nback\\slash\u{9B}.txt"
        let shown = #"red\x1b[31m\nback\\slash\xc2\x9b.txt"#
        let source = try folder.file(name, "x")

        let delivered = try run(container, ["deliver", source], terminalColumns: 80)
        #expect(delivered.status == 0)
        #expect(delivered.stdoutText == container + "/Documents/Inbox/" + shown + "\r\n")
        let listed = try run(container, ["ls"], terminalColumns: 80)
        #expect(listed.stdoutText.hasSuffix("  " + shown + "\r\n"), "\(listed.stdoutText)")
        #expect(!listed.stdout.contains(0x1B))
        let piped = try run(container, ["ls"])
        #expect(piped.stdout.suffix(name.utf8.count + 1) == ArraySlice(Array((name + "\n").utf8)), "exact in a pipe")

        let moved = try run(container, ["move", name], terminalColumns: 80)
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(moved.stdoutText == container + "/Documents/" + shown + "\r\n")
    }

    @Test func cleanBackupPlanAndVerifyEscapeNamesOnATerminalOneLineAnItem() throws {
        let folder = try Scratch()
        let name = "red\u{1B}[31m\nback\\slash\u{9B}.txt"
        let shown = #"red\x1b[31m\nback\\slash\xc2\x9b.txt"#
        try folder.file("Source.app/Info.plist", "<plist>info</plist>\n")
        let resource = try folder.file("Source.app/Resources/" + name, "sealed")
        let container = folder.path + "/c"
        let made = try InboxProcess.run(
            ["--container", container, "init", "--bundle", folder.path + "/Source.app"].map { Array($0.utf8) })
        #expect(made.status == 0, "\(made.stderr)")
        #expect(FileManager.default.fileExists(atPath: resource))

        // backup-plan: one line an entry, the hostile one escaped.
        try Data("doc".utf8).write(to: URL(fileURLWithPath: container + "/Documents/" + name))
        let plan = try run(container, ["backup-plan"], terminalColumns: 80)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(!plan.stdout.contains(0x1B))
        let planLines = plan.stdoutText.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(planLines.contains("+ Documents/" + shown + "  (Documents: backed up)"), "\(planLines)")
        let piped = try run(container, ["backup-plan"])
        #expect(piped.stdoutText.contains("+ Documents/" + name + "  ("), "exact in a pipe")

        // clean: tmp goes whole when no watcher runs.
        try Data("tmp".utf8).write(to: URL(fileURLWithPath: container + "/tmp/" + name))
        let clean = try run(container, ["clean", "--dry-run"], terminalColumns: 80)
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(!clean.stdout.contains(0x1B))
        #expect(
            clean.stdoutText.components(separatedBy: "\r\n").filter { !$0.isEmpty } == [
                "         3  \(container)/tmp/\(shown)  (tmp: app not running)"
            ])

        // verify: the changed resource on one line, escaped.
        let sealed = container + "/App.app/Resources/" + name
        #expect(chmod(sealed, 0o644) == 0)
        try Data("changed".utf8).write(to: URL(fileURLWithPath: sealed))
        let verify = try run(container, ["verify"], terminalColumns: 80)
        #expect(verify.status == 65, "\(verify.stderr)")
        #expect(verify.stdoutText == "modified: Resources/" + shown + "\r\n")
    }
}
