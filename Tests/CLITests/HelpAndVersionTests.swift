import Foundation
import TestSupport
import Testing

/// `--version`, `inbox help`, "did you mean" and help fitted to the terminal (ARCHITECTURE.md, "The command line").
@Suite struct HelpAndVersionTests {
    @Test func versionPrintsTheVersionAndExitsZero() throws {
        let result = try InboxProcess.run("--version")
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty)
        let line = try #require(result.lines.first)
        #expect(result.lines.count == 1)
        #expect(line.wholeMatch(of: /inbox \d+\.\d+\.\d+/) != nil, "\(line)")
    }

    @Test(arguments: ["deliver", "log", "watch", "exclude-from-backup", "help"])
    func helpCommandPrintsWhatDashDashHelpPrints(command: String) throws {
        let viaHelp = try InboxProcess.run("help", command)
        let viaFlag = try InboxProcess.run(command, "--help")
        #expect(viaHelp.status == 0)
        #expect(viaHelp.stderr.isEmpty)
        #expect(viaHelp.stdoutText.contains("USAGE: inbox [--container DIR] \(command)"))
        #expect(viaHelp.stdout == viaFlag.stdout)
    }

    @Test func helpAlonePrintsTheOverview() throws {
        let result = try InboxProcess.run("help")
        #expect(result.status == 0)
        #expect(result.stdout == (try InboxProcess.run("--help")).stdout)
        #expect(result.stdoutText.contains("COMMANDS:"))
        #expect(result.stdoutText.contains("  help "))
    }

    @Test(arguments: [
        (["mvoe"], "unknown command 'mvoe'; did you mean 'move'?"),
        (["stauts"], "unknown command 'stauts'; did you mean 'status'?"),
        (["help", "delivr"], "unknown command 'delivr'; did you mean 'deliver'?"),
        (["ls", "--jsno"], "unknown option '--jsno'; did you mean '--json'?"),
        (["log", "--folow"], "unknown option '--folow'; did you mean '--follow'?"),
        (["--versoin"], "unknown option '--versoin'; did you mean '--version'?"),
        (["ls", "inbx"], "'inbx' is not a place to list: use inbox or documents; did you mean 'inbox'?"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["ls", "--bogus"], "unknown option '--bogus'"),
    ])
    func aTypoGetsOneLineWithTheNearestNameAndTheHint(arguments: [String], message: String) throws {
        let result = try InboxProcess.run(arguments.map { Array($0.utf8) })
        #expect(result.status == 64)
        #expect(result.stdout.isEmpty)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.first == "inbox: " + message)
        #expect(lines.dropFirst().first?.hasPrefix("Usage: inbox") == true)
        #expect(lines.last?.hasPrefix("See 'inbox") == true)
        #expect(lines.count == 3)
    }

    @Test(arguments: ["--help", "watch --help", "log --help", "import --help"])
    func helpIsWrappedToColumns(arguments: String) throws {
        for columns in [40, 60, 100] {
            let result = try InboxProcess.run(
                arguments.split(separator: " ").map { Array($0.utf8) }, environment: ["COLUMNS": "\(columns)"])
            #expect(result.status == 0)
            // A single word longer than the width (a path in the text) may stand alone on its line.
            let long = result.lines.filter {
                $0.count > columns && $0.trimmingCharacters(in: .whitespaces).contains(" ")
            }
            #expect(long.isEmpty, "\(columns) columns: \(long)")
        }
        let narrow = try InboxProcess.run(
            arguments.split(separator: " ").map { Array($0.utf8) }, environment: ["COLUMNS": "40"])
        let wide = try InboxProcess.run(
            arguments.split(separator: " ").map { Array($0.utf8) }, environment: ["COLUMNS": "200"])
        #expect(narrow.lines.count > wide.lines.count, "a narrow terminal gets more, shorter lines")
    }

    @Test func helpFitsTheTerminalOnStdoutAnd80ColumnsOtherwise() throws {
        let onTerminal = try InboxProcess.run(
            [Array("watch".utf8), Array("--help".utf8)], environment: ["COLUMNS": ""], terminalColumns: 50)
        #expect(onTerminal.status == 0)
        let lines = onTerminal.stdoutText.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n")
        #expect(lines.allSatisfy { $0.count <= 50 }, "\(lines.filter { $0.count > 50 }.map { Array($0.utf8) })")
        #expect(lines.contains { $0.count > 40 }, "the width is used, not a smaller one")
        let piped = try InboxProcess.run("watch", "--help", environment: ["COLUMNS": ""])
        #expect(piped.lines.allSatisfy { $0.count <= 80 })
        #expect(piped.lines.contains { $0.count > 70 }, "80 columns when stdout is not a terminal")
    }
}
