import Foundation
import Testing

/// `inbox completions bash|zsh|fish` and `inbox man`, made from the commands' definitions (ARCHITECTURE.md, "The
/// command line").
@Suite struct CompletionsAndManTests {
    /// Runs `program ARGS…` to its end: status and standard output (standard error appended).
    private func runProgram(_ program: String, _ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    private func writeScript(_ shell: String, in folder: TemporaryFolder) throws -> String {
        let result = try InboxProcess.run("completions", shell)
        #expect(result.status == 0, "\(result.stderr)")
        return try folder.file("inbox.\(shell)", result.stdoutText)
    }

    /// What bash's `_inbox` offers for the words typed so far, the last one being completed.
    private func complete(_ script: String, _ words: [String]) throws -> [String] {
        let array = words.map { "'\($0)'" }.joined(separator: " ")
        let (status, output) = try runProgram(
            "/bin/bash",
            [
                "-c",
                "source '\(script)'; COMP_WORDS=(inbox \(array)); COMP_CWORD=\(words.count); _inbox; printf '%s\\n' \"${COMPREPLY[@]}\"",
            ])
        #expect(status == 0, "\(output)")
        return output.split(separator: "\n").map(String.init)
    }

    @Test func theBashScriptParsesAndCompletesCommandsOptionsAndWords() throws {
        let folder = try TemporaryFolder()
        let script = try writeScript("bash", in: folder)
        let (status, output) = try runProgram("/bin/bash", ["-n", script])
        #expect(status == 0, "bash -n: \(output)")
        #expect(try complete(script, ["mo"]) == ["move"])
        #expect(try complete(script, ["ba"]).sorted() == ["backup", "backup-plan"])
        #expect(try complete(script, ["--ver"]) == ["--version"])
        #expect(try complete(script, ["log", "--fo"]) == ["--follow"])
        #expect(try complete(script, ["log", "--"]).contains("--until"))
        #expect(try complete(script, ["--container", "/tmp", "ls", ""]).sorted() == ["documents", "inbox"])
        #expect(try complete(script, ["help", "exc"]) == ["exclude-from-backup"])
        #expect(try complete(script, ["completions", "f"]) == ["fish"])
        // Every command of the overview is offered.
        let overview = try InboxProcess.run("help").stdoutText
        let table = try #require(
            overview.components(separatedBy: "COMMANDS:\n").last?.components(separatedBy: "\n\n").first)
        let offered = Set(try complete(script, [""]))
        for line in table.split(separator: "\n") where line.hasPrefix("  ") && !line.hasPrefix("   ") {
            let name = String(line.dropFirst(2).prefix { $0 != " " })
            #expect(offered.contains(name), "\(name)")
        }
    }

    @Test func zshAndFishScriptsNameEveryCommand() throws {
        for shell in ["zsh", "fish"] {
            let result = try InboxProcess.run("completions", shell)
            #expect(result.status == 0)
            for command in ["deliver", "move", "log", "exclude-from-backup", "completions"] {
                #expect(result.stdoutText.contains(command), "\(shell): \(command)")
            }
        }
        let unknown = try InboxProcess.run("completions", "tcsh")
        #expect(unknown.status == 64)
        #expect(unknown.stderr.hasPrefix("inbox: 'tcsh' is not a shell"))
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/man"), "needs man"))
    func theManPageRendersWithEveryCommandAndExitStatus() throws {
        let folder = try TemporaryFolder()
        let page = try InboxProcess.run("man")
        #expect(page.status == 0)
        #expect(page.stdoutText.hasPrefix(".TH INBOX 1"))
        let file = try folder.file("inbox.1", page.stdoutText)
        let (status, rendered) = try runProgram("/usr/bin/env", ["MANWIDTH=100", "man", "-l", file])
        #expect(status == 0, "\(rendered)")
        #expect(!rendered.contains("warning"), "\(rendered)")
        for text in ["NAME", "SYNOPSIS", "EXIT STATUS", "deliver FILE... [--as NAME]", "--follow", "77"] {
            #expect(rendered.contains(text), "\(text)")
        }
    }
}
