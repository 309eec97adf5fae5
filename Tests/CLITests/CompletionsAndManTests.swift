import Foundation
import Testing

/// `inbox completions bash|zsh|fish` and `inbox man`, made from the commands' definitions (ARCHITECTURE.md, "The
/// command line").
@Suite struct CompletionsAndManTests {
    /// Runs `program ARGS…` to its end: status and standard output (standard error appended).

    private func writeScript(_ shell: String, in folder: TemporaryFolder) throws -> String {
        let result = try InboxProcess.run("completions", shell)
        #expect(result.status == 0, "\(result.stderr)")
        return try folder.file("inbox.\(shell)", result.stdoutText)
    }

    /// What bash's `_inbox` offers for the words typed so far, the last one being completed.
    private func complete(_ script: String, _ words: [String]) throws -> [String] {
        let array = words.map { "'\($0)'" }.joined(separator: " ")
        let (status, output) = try runMerged(
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
        let (status, output) = try runMerged("/bin/bash", ["-n", script])
        #expect(status == 0, "bash -n: \(output)")
        #expect(try complete(script, ["mo"]) == ["move"])
        #expect(try complete(script, ["ba"]).sorted() == ["backup", "backup-plan"])
        #expect(try complete(script, ["--ver"]) == ["--version"])
        #expect(try complete(script, ["log", "--fo"]) == ["--follow"])
        #expect(try complete(script, ["log", "--"]).contains("--until"))
        #expect(try complete(script, ["watch", "--verb"]) == ["--verbose"])
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

    /// The path of `shell`, which the tests need (`.ci/run` and `make deps` install it): a missing one fails.
    private func requireShell(_ shell: String) throws -> String {
        let path = "/usr/bin/" + shell
        try #require(
            FileManager.default.isExecutableFile(atPath: path), "\(shell) is missing: apt-get install \(shell)")
        return path
    }

    @Test func theZshScriptLoadsAutoloadedOrSourcedAndCompletes() throws {
        let zsh = try requireShell("zsh")
        let folder = try TemporaryFolder()
        let script = try writeScript("zsh", in: folder)
        let (parsed, parseErrors) = try runMerged(zsh, ["-n", script])
        #expect(parsed == 0, "zsh -n: \(parseErrors)")
        // `source <(inbox completions zsh)` after compinit: no error, and inbox is completed by _inbox.
        let (status, output) = try runMerged(
            zsh,
            [
                "-f", "-c",
                "autoload -U compinit; compinit -u -D; source '\(script)'; print -r -- \"$_comps[inbox]\"; whence -w _inbox",
            ])
        #expect(status == 0, "\(output)")
        #expect(output == "_inbox\n_inbox: function\n")

        // Installed as `_inbox` in $fpath, completed by an interactive zsh on a pseudo-terminal (zsh/zpty).
        try FileManager.default.createDirectory(atPath: folder.path + "/functions", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: script, toPath: folder.path + "/functions/_inbox")
        let driver = try folder.file(
            "complete.zsh",
            #"""
            zmodload zsh/zpty zsh/datetime
            zpty shell zsh -f -i
            zpty -w shell 'PS1="> "; fpath=(\#(folder.path)/functions $fpath); autoload -U compinit; compinit -u -D; print RE""ADY'
            zpty -r shell line '*READY*'
            # Types $1 and a Tab on an empty line; prints whether the line then shows $2, within ten seconds.
            completes() {
                zpty -w -n shell $'\C-u'"$1"$'\t'
                local out="" chunk
                local -F end=$(( EPOCHREALTIME + 10 ))
                while (( EPOCHREALTIME < end )); do
                    if zpty -r -t shell chunk; then
                        out+=$chunk
                        [[ $out == *"$2"* ]] && { print -r -- "completed: $2"; return }
                    else
                        sleep 0.05
                    fi
                done
                print -r -- "not completed: $2 in ${(q+)out}"
            }
            completes 'inbox mo' 'inbox move'
            completes 'inbox watch --ver' 'inbox watch --verbose'
            completes 'inbox log --fo' 'inbox log --follow'
            completes 'inbox ls d' 'inbox ls documents'
            zpty -d shell
            """#)
        let (ran, results) = try runMerged(zsh, ["-f", driver])
        #expect(ran == 0, "\(results)")
        #expect(
            results.split(separator: "\n") == [
                "completed: inbox move", "completed: inbox watch --verbose", "completed: inbox log --follow",
                "completed: inbox ls documents",
            ], "\(results)")
    }

    @Test func theFishScriptLoadsAndCompletes() throws {
        let fish = try requireShell("fish")
        let folder = try TemporaryFolder()
        let script = try writeScript("fish", in: folder)
        /// What fish offers for `line`: the first column of `complete -C`.
        func complete(_ line: String) throws -> [String] {
            let (status, output) = try runMerged(
                fish, ["--no-config", "-c", "source '\(script)'; and complete -C '\(line)'"])
            #expect(status == 0, "\(output)")
            return output.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
        }
        #expect(try complete("inbox mo") == ["move"])
        #expect(try complete("inbox ba").sorted() == ["backup", "backup-plan"])
        #expect(try complete("inbox watch --for") == ["--format"])
        #expect(try complete("inbox watch --ver") == ["--verbose"])
        #expect(try complete("inbox log --fo") == ["--follow"])
        #expect(try complete("inbox ls ").sorted() == ["documents", "inbox"])
        #expect(try complete("inbox completions ").sorted() == ["bash", "fish", "zsh"])
    }

    @Test func zshAndFishScriptsNameEveryCommand() throws {
        for shell in ["zsh", "fish"] {
            let result = try InboxProcess.run("completions", shell)
            #expect(result.status == 0)
            for command in ["deliver", "move", "log", "exclude-from-backup", "completions", "verbose", "format"] {
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
        let (status, rendered) = try runMerged("/usr/bin/env", ["MANWIDTH=100", "man", "-l", file])
        #expect(status == 0, "\(rendered)")
        #expect(!rendered.contains("warning"), "\(rendered)")
        for text in [
            "NAME", "SYNOPSIS", "EXIT STATUS", "deliver FILE... [--as NAME]", "--follow", "77", "--verbose",
            "--format FMT",
        ] {
            #expect(rendered.contains(text), "\(text)")
        }
    }
}
