import Foundation
import TestSupport
import Testing

@testable import InboxCommands
@testable import InboxKit

/// The command line's text helpers (ARCHITECTURE.md, "The command line").
@Suite struct CommandLineTextTests {
    @Test func terminalTextEscapesControlsInvalidBytesAndBackslashesOnly() {
        let cases: [([UInt8], String)] = [
            (Array("plain é ✓.txt".utf8), "plain é ✓.txt"),
            (Array("a\nb\tc\rd".utf8), #"a\nb\tc\rd"#),
            ([0x1B, 0x5B, 0x33, 0x31, 0x6D, 0x7F, 0x00], #"\x1b[31m\x7f\x00"#),
            ([0x62, 0x61, 0x64, 0xFF, 0xC3], #"bad\xff\xc3"#),
            ([0xC2, 0x9B], #"\xc2\x9b"#),
            ([0xED, 0xA0, 0x80], #"\xed\xa0\x80"#),
            (Array(#"back\slash"#.utf8), #"back\\slash"#),
        ]
        for (bytes, shown) in cases {
            #expect(TerminalText.escaped(bytes) == Array(shown.utf8), "\(bytes)")
        }
    }

    @Test func suggestionsAreNearAndNotEverything() {
        let commands = ["init", "deliver", "move", "ls", "log", "status", "backup", "backup-plan"]
        #expect(Suggestion.closest(to: "mvoe", among: commands) == "move")
        #expect(Suggestion.closest(to: "stats", among: commands) == "status")
        #expect(Suggestion.closest(to: "backup-pln", among: commands) == "backup-plan")
        #expect(Suggestion.closest(to: "x", among: commands) == nil)
        #expect(Suggestion.closest(to: "frobnicate", among: commands) == nil)
        #expect(Suggestion.editDistance(Array("ab"), Array("ba")) == 1)
    }

    @Test func wrappedLinesFitAndKeepEveryWord() {
        let text = "the container (default: $INBOX_CONTAINER, else ~/.local/share/inbox/default) and more words here"
        for width in [20, 40, 80] {
            let lines = TextWrapping.table([("--container DIR", text), ("-h", "help")], width: width)
            #expect(lines.allSatisfy { $0.count <= width || !$0.trimmingCharacters(in: .whitespaces).contains(" ") })
            let words = lines.joined(separator: " ").split(separator: " ")
            #expect(words == ("--container DIR " + text + " -h help").split(separator: " "))
        }
    }

    @Test func wrapCountsItsPrefixesAndJoinedPutsNewlinesBetween() {
        #expect(TextWrapping.wrap("a bb ccc", width: 6, first: "X: ", rest: "  ") == ["X: a", "  bb", "  ccc"])
        #expect(TextWrapping.wrap("abcdefghij k", width: 5) == ["abcdefghij", "k"], "a long word stays whole")
        #expect(TextWrapping.wrap("é é", width: 3) == ["é é"], "columns are scalars, not bytes")
        #expect(TextWrapping.wrap("", width: 10, first: "> ") == ["> "])
        #expect(TextWrapping.joined(["a", "", "b"]) == "a\n\nb")
        #expect(TextWrapping.joined(["a"]) == "a" && TextWrapping.joined([]) == "")
    }
}
