import Foundation
import TestSupport
import Testing

/// What `watch --exec` does with what a hook prints (issue 49; README.md, "Watch an Inbox"): the first word of its
/// stdout, `keep`, `move` or `delete` in any case, decides; nothing at all leaves it to `--on-arrival`; any other
/// word keeps the item, with an `error` record and one line on stderr that names the item and the word, escaped.
@Suite struct HookAnswerTests {
    /// A container in `folder` with `names` delivered, then `watch --once --on-arrival move --exec hook` run on it.
    private func watch(_ names: [String], hook: String, in folder: Scratch) throws
        -> (container: String, result: InboxProcess.Result)
    {
        let container = try folder.initContainer()
        let sources = try names.map { try folder.file($0, $0) }
        let delivered = try InboxProcess.run((["--container", container, "deliver"] + sources).map { Array($0.utf8) })
        #expect(delivered.status == 0, "\(delivered.stderr)")
        let result = try InboxProcess.run(
            "--container", container, "watch", "--once", "--on-arrival", "move", "--exec", hook)
        return (container, result)
    }

    @Test func anAnswerThatIsNoDispositionKeepsTheItemWithAnErrorRecordAndALine() throws {
        let hook = #"case "$INBOX_NAME" in odd.txt) echo yes please;; esc.txt) printf '\033]0;x\007';; esac"#
        let folder = try Scratch()
        let (container, result) = try watch(["odd.txt", "esc.txt", "silent.txt"], hook: hook, in: folder)
        #expect(result.status == 0, "an answer kept as keep fails nothing: \(result.stderr)")
        let inbox = container + "/Documents/Inbox/"
        #expect(FileManager.default.fileExists(atPath: inbox + "odd.txt"), "not moved by --on-arrival")
        #expect(FileManager.default.fileExists(atPath: inbox + "esc.txt"))
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/silent.txt"), "nothing: --on-arrival")
        let lines = result.stderr.split(separator: "\n").filter { $0.contains("the hook answered") }.map(String.init)
        #expect(
            lines.sorted()
                == [
                    "inbox: the hook answered 'yes' for '\(inbox)odd.txt', not keep, move or delete: the item stays in the Inbox",
                    #"inbox: the hook answered '\x1b]0;x\x07' for '"# + inbox
                        + "esc.txt', not keep, move or delete: the item stays in the Inbox",
                ].sorted(), "\(result.stderr)")
        let errors = logRecords(container, event: "error")
        #expect(
            Set(errors.compactMap { $0["path"] as? String }) == ["Documents/Inbox/odd.txt", "Documents/Inbox/esc.txt"])
        #expect(errors.allSatisfy { $0["during"] as? String == "hook" && $0["errno"] as? Int == 0 })
        #expect(errors.contains { ($0["message"] as? String)?.contains("answered 'yes'") == true })
        let handled = logRecords(container, event: "handled")
        let odd = handled.first { $0["path"] as? String == "Documents/Inbox/odd.txt" }
        #expect(odd?["disposition"] as? String == "keep" && odd?["status"] as? Int == 0)
    }

    @Test func theRuleIsWrittenInTheHelpAndTheREADME() throws {
        let help = try InboxProcess.run(["help", "watch"].map { Array($0.utf8) }, environment: ["COLUMNS": "400"])
        #expect(
            help.stdoutText.contains(
                "nothing printed leaves it to --on-arrival; any other word keeps the item, with an error record"),
            "\(help.stdoutText)")
        let readme = try ReadmeListsTests.section("## Watch an Inbox").joined(separator: " ")
            .split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(readme.contains("any other word keeps it, with an `error` record (`during: hook`)"))
    }
}
