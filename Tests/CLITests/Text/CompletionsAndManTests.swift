import Foundation
import TestSupport
import Testing

/// `inbox completions bash|zsh|fish` and `inbox man`, made from the commands' definitions (ARCHITECTURE.md, "The
/// command line").
@Suite struct CompletionsAndManTests {
    /// Runs `program ARGS…` to its end: status and standard output (standard error appended).

    private func writeScript(_ shell: String, in folder: Scratch) throws -> String {
        let result = try InboxProcess.run("completions", shell)
        #expect(result.status == 0, "\(result.stderr)")
        return try folder.file("inbox.\(shell)", result.stdoutText)
    }

    /// What bash's `_inbox` offers for the words typed so far, the last one being completed, in the working folder
    /// `folder` (else the test's).
    private func complete(
        _ script: String, _ words: [String], in folder: String = ".", environment: [String: String] = [:]
    ) throws -> [String] {
        let array = words.map { "'\($0)'" }.joined(separator: " ")
        let (status, output) = try runProgram(
            "/bin/bash",
            [
                "-c",
                "cd '\(folder)' && source '\(script)'; COMP_WORDS=(inbox \(array)); COMP_CWORD=\(words.count); _inbox; printf '%s\\n' \"${COMPREPLY[@]}\"",
            ], environment: environment, mergingStderr: true
        ).statusAndOutput
        #expect(status == 0, "\(output)")
        return output.split(separator: "\n").map(String.init)
    }

    /// The Inbox items `inboxWithNames` makes, as completion offers them: the staging name is hidden.
    static let inboxNames = ["notes.txt", "photos", "quarterly report.pdf"]

    /// A container at `folder/container` whose Inbox holds a name with a space, another file, a folder item and a
    /// delivery's hidden staging name; and `folder/zz-stray.txt`, a file in the working folder that only a file's
    /// value may offer. Returns the container's path.
    @discardableResult
    private func inboxWithNames(in folder: Scratch, at path: String? = nil) throws -> String {
        let container = path ?? folder.path + "/container"
        #expect(try InboxProcess.run("--container", container, "init").status == 0)
        let file = try folder.file("attachment.pdf", "%PDF-1.4 an attachment")
        for name in ["quarterly report.pdf", "notes.txt"] {
            let delivered = try InboxProcess.run("--container", container, "deliver", file, "--as", name)
            #expect(delivered.status == 0, "\(delivered.stderr)")
        }
        let inbox = container + "/Documents/Inbox/"
        try FileManager.default.createDirectory(atPath: inbox + "photos", withIntermediateDirectories: false)
        #expect(FileManager.default.createFile(atPath: inbox + ".inbox-staging.1.2", contents: Data()))
        try folder.file("zz-stray.txt", "")
        return container
    }

    @Test func theBashScriptParsesAndCompletesCommandsOptionsAndWords() throws {
        let folder = try Scratch()
        let script = try writeScript("bash", in: folder)
        let (status, output) = try runProgram("/bin/bash", ["-n", script], mergingStderr: true).statusAndOutput
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

    /// `move` completes the names in the Inbox of the container the line names (else `$INBOX_CONTAINER`, else
    /// the default under `$XDG_DATA_HOME`), each whole with its spaces, never a hidden staging name; each option's
    /// value as its definition says: words for `--on-arrival` and `--event`, commands for `--exec`, and nothing, not
    /// the working folder's files, for a number.
    @Test func theBashScriptCompletesInboxNamesAndEachOptionsValues() throws {
        let folder = try Scratch()
        let script = try writeScript("bash", in: folder)
        let container = try inboxWithNames(in: folder)
        let here = folder.path
        #expect(try complete(script, ["--container", container, "move", ""], in: here).sorted() == Self.inboxNames)
        #expect(try complete(script, ["--container", container, "move", "qu"], in: here) == ["quarterly report.pdf"])
        #expect(try complete(script, ["--container", container, "move", "notes.txt", "p"], in: here) == ["photos"])
        #expect(try complete(script, ["--container", container, "move", "."], in: here) == [])
        #expect(try complete(script, ["move", "no"], environment: ["INBOX_CONTAINER": container]) == ["notes.txt"])
        #expect(
            try complete(script, ["--container", "~/container", "move", "no"], environment: ["HOME": folder.path])
                == ["notes.txt"])
        let data = folder.path + "/data"
        try inboxWithNames(in: folder, at: data + "/inbox/default")
        #expect(
            try complete(script, ["move", "qu"], environment: ["INBOX_CONTAINER": "", "XDG_DATA_HOME": data])
                == ["quarterly report.pdf"])

        #expect(try complete(script, ["watch", "--on-arrival", ""], in: here).sorted() == ["keep", "move"])
        #expect(try complete(script, ["watch", "--jobs", ""], in: here) == [])
        #expect(try complete(script, ["watch", "--jobs", "zz"], in: here) == [])
        #expect(try complete(script, ["clean", "--inbox-max-age", "zz"], in: here) == [])
        #expect(try complete(script, ["status", "zz"], in: here) == [])
        #expect(try complete(script, ["log", "--event", "watch-"]) == ["watch-started", "watch-stopped"])
        #expect(try complete(script, ["watch", "--exec", "sha256s"]).contains("sha256sum"))
        #expect(try complete(script, ["deliver", "zz"], in: here) == ["zz-stray.txt"])
        #expect(try complete(script, ["watch", "--root", "conta"], in: here) == ["container"])
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
        let folder = try Scratch()
        let script = try writeScript("zsh", in: folder)
        let (parsed, parseErrors) = try runProgram(zsh, ["-n", script], mergingStderr: true).statusAndOutput
        #expect(parsed == 0, "zsh -n: \(parseErrors)")
        // `source <(inbox completions zsh)` after compinit: no error, and inbox is completed by _inbox.
        let (status, output) = try runProgram(
            zsh,
            [
                "-f", "-c",
                "autoload -U compinit; compinit -u -D; source '\(script)'; print -r -- \"$_comps[inbox]\"; whence -w _inbox",
            ], mergingStderr: true
        ).statusAndOutput
        #expect(status == 0, "\(output)")
        #expect(output == "_inbox\n_inbox: function\n")

        // Installed as `_inbox` in $fpath, completed by an interactive zsh on a pseudo-terminal (zsh/zpty), in a
        // folder that holds a container with names in its Inbox and a stray file.
        try inboxWithNames(in: folder)
        try FileManager.default.createDirectory(atPath: folder.path + "/functions", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: script, toPath: folder.path + "/functions/_inbox")
        let lines = [
            "inbox mo", "inbox watch --ver", "inbox log --fo", "inbox ls d", "inbox --container container move qu",
            "inbox --container container move notes.txt p", "inbox --container container move .inb",
            "inbox watch --on-arrival k", "inbox watch --on-arrival m", "inbox watch --jobs zz", "inbox deliver zz",
        ]
        let driver = try folder.file(
            "complete.zsh",
            #"""
            zmodload zsh/zpty zsh/datetime
            zpty shell zsh -f -i
            zpty -w shell 'PS1="> "; cd \#(folder.path); fpath=(\#(folder.path)/functions $fpath); autoload -U compinit; compinit -u -D; show-line() { zle -M "LINE[$BUFFER]END" }; zle -N show-line; bindkey "^Xl" show-line; print RE""ADY'
            zpty -r shell line '*READY*'
            # Types $1 and a Tab on an empty line, then shows the line: prints it as it then stands, within ten
            # seconds.
            after_tab() {
                zpty -w -n shell $'\C-u'"$1"$'\t\C-xl'
                local out="" chunk
                local -F end=$(( EPOCHREALTIME + 10 ))
                while (( EPOCHREALTIME < end )); do
                    if zpty -r -t shell chunk; then
                        out+=$chunk
                        if [[ $out == *'LINE['*']END'* ]]; then
                            out=${out##*LINE\[}
                            print -r -- "$1 => ${out%%\]END*}"
                            return
                        fi
                    else
                        sleep 0.05
                    fi
                done
                print -r -- "$1 => no line in ${(q+)out}"
            }
            \#(lines.map { "after_tab '\($0)'" }.joined(separator: "\n"))
            zpty -d shell
            """#)
        let (ran, results) = try runProgram(zsh, ["-f", driver], mergingStderr: true).statusAndOutput
        #expect(ran == 0, "\(results)")
        #expect(
            results.split(separator: "\n") == [
                "inbox mo => inbox move ", "inbox watch --ver => inbox watch --verbose ",
                "inbox log --fo => inbox log --follow ", "inbox ls d => inbox ls documents ",
                #"inbox --container container move qu => inbox --container container move quarterly\ report.pdf "#,
                "inbox --container container move notes.txt p => inbox --container container move notes.txt photos ",
                "inbox --container container move .inb => inbox --container container move .inb",
                "inbox watch --on-arrival k => inbox watch --on-arrival keep ",
                "inbox watch --on-arrival m => inbox watch --on-arrival move ",
                "inbox watch --jobs zz => inbox watch --jobs zz", "inbox deliver zz => inbox deliver zz-stray.txt ",
            ], "\(results)")
    }

    @Test func theFishScriptLoadsAndCompletes() throws {
        let fish = try requireShell("fish")
        let folder = try Scratch()
        let script = try writeScript("fish", in: folder)
        let container = try inboxWithNames(in: folder)
        /// What fish offers for `line`, in `folder`: the first column of `complete -C`.
        func complete(_ line: String, environment: [String: String] = [:]) throws -> [String] {
            let (status, output) = try runProgram(
                fish, ["--no-config", "-c", "cd '\(folder.path)'; and source '\(script)'; and complete -C '\(line)'"],
                environment: environment, mergingStderr: true
            ).statusAndOutput
            #expect(status == 0, "\(output)")
            return output.split(separator: "\n").map { String($0.prefix { $0 != "\t" }) }
        }
        #expect(try complete("inbox --container \(container) move ").sorted() == Self.inboxNames)
        #expect(try complete("inbox --container \(container) move qu") == ["quarterly report.pdf"])
        #expect(try complete("inbox --container \(container) move notes.txt p") == ["photos"])
        #expect(try complete("inbox --container \(container) move .inb") == [])
        #expect(try complete("inbox move no", environment: ["INBOX_CONTAINER": container]) == ["notes.txt"])
        #expect(
            try complete("inbox --container ~/container move no", environment: ["HOME": folder.path]) == ["notes.txt"])
        #expect(try complete("inbox --container \(container) mo") == ["move"])
        #expect(try complete("inbox watch --on-arrival ").sorted() == ["keep", "move"])
        #expect(try complete("inbox watch --jobs ") == [])
        #expect(try complete("inbox watch --jobs zz") == [])
        #expect(try complete("inbox status zz") == [])
        #expect(try complete("inbox deliver zz") == ["zz-stray.txt"])
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
        let folder = try Scratch()
        let page = try InboxProcess.run("man")
        #expect(page.status == 0)
        #expect(page.stdoutText.hasPrefix(".TH INBOX 1"))
        let file = try folder.file("inbox.1", page.stdoutText)
        let (status, rendered) = try runProgram(
            "/usr/bin/env", ["MANWIDTH=100", "man", "-l", file], mergingStderr: true
        ).statusAndOutput
        #expect(status == 0, "\(rendered)")
        #expect(!rendered.contains("warning"), "\(rendered)")
        for text in [
            "NAME", "SYNOPSIS", "EXIT STATUS", "deliver FILE... [--as NAME]", "--follow", "77", "--verbose",
            "--format FMT",
        ] {
            #expect(rendered.contains(text), "\(text)")
        }
        // EXAMPLES, FILES (the state folder, the log's rotation, the preferences), ENVIRONMENT and SEE ALSO.
        let sections = ["ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"].map { "\n\($0)\n" }
        let positions = sections.compactMap { rendered.range(of: $0)?.lowerBound }
        #expect(positions.count == sections.count && positions == positions.sorted(), "\(sections)")
        // Justified: a phrase may be spread by more than one space.
        let flat = rendered.replacing(/\ +/, with: " ")
        for text in [
            "INBOX_CONTAINER", "XDG_DATA_HOME", "COLUMNS", "NOTIFY_SOCKET", "TMPDIR", "INBOX_FILE, INBOX_NAME",
            "Library/Application Support/inbox/", "events.jsonl", "events.<last seq>.jsonl", "16 MiB", "the 20 newest",
            "once past logMaxBytes", "the logKeepRotated newest",
            "import.sqlite", "watch.lock", "Library/Preferences/inbox.plist", "Documents/Inbox/", "inbox init",
            "inbox deliver ", "systemctl --user enable --now inbox-watch-all.service", "import -", "inbox move ",
            "inotifywait(1)", "systemd.service(5)", "procmail(1)", "local(8)", "docs/reference.md",
        ] {
            #expect(flat.contains(text), "\(text)")
        }
        // Every key of the preferences that `inbox init` writes.
        let container = try folder.initContainer()
        let plist = try Data(contentsOf: URL(fileURLWithPath: container + "/Library/Preferences/inbox.plist"))
        let keys = try #require(try PropertyListSerialization.propertyList(from: plist, format: nil) as? [String: Any])
        #expect(keys.count >= 4)
        for key in keys.keys { #expect(rendered.contains("\n       \(key)\n"), "the preference \(key)") }
    }
}
