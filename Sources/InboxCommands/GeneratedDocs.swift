import AppContainer
import InboxKit

extension Command {
    /// What the generated completions and man page know of this command (ARCHITECTURE.md, "The command line").
    static var definition: CommandDescription {
        let valued = spec.valued.sorted().map { option in
            guard let completion = valueCompletions[option] else {
                // The completion tests run every script: a new option with no completion named fails them.
                preconditionFailure("inbox \(name): what completes '\(option)'? Name it in GeneratedDocs.swift")
            }
            return (option, completion)
        }
        return CommandDescription(
            name: name, abstract: abstract, usage: usage, options: options, flags: spec.flags.sorted(),
            valued: valued, positionals: positionalCompletion)
    }

    /// Files, for a command that takes positional arguments.
    static var positionalCompletion: ArgumentCompletion { spec.positionals.upperBound > 0 ? .files : .nothing }
    static var valueCompletions: [String: ArgumentCompletion] { [:] }
}

// What completes each command's positionals (files unless said here) and each option's value.

extension InitCommand {
    static var valueCompletions: [String: ArgumentCompletion] { ["--app": .nothing, "--bundle": .folders] }
}
extension DeliverCommand { static var valueCompletions: [String: ArgumentCompletion] { ["--as": .nothing] } }
extension MoveCommand { static var positionalCompletion: ArgumentCompletion { .inboxNames } }
extension ListCommand { static var positionalCompletion: ArgumentCompletion { .words(["inbox", "documents"]) } }
extension LogCommand {
    static var valueCompletions: [String: ArgumentCompletion] {
        [
            "-n": .nothing, "--since": .nothing, "--until": .nothing, "--path": .nothing,
            "--event": .words(EventKind.allCases.map(\.rawValue)),
        ]
    }
}
extension WatchCommand {
    static var valueCompletions: [String: ArgumentCompletion] {
        [
            "--root": .folders, "--on-arrival": .words([Disposition.keep, .move].map(\.rawValue)), "--exec": .command,
            "--hook-timeout": .nothing, "--jobs": .nothing, "--format": .nothing, "--poll-interval": .nothing,
            "--settle": .nothing,
        ]
    }
}
extension DemoCommand { static var valueCompletions: [String: ArgumentCompletion] { ["--samples": .folders] } }
extension CleanCommand {
    static var valueCompletions: [String: ArgumentCompletion] {
        [
            "--inbox-max-age": .nothing, "--inbox-max-bytes": .nothing, "--tmp-max-age": .nothing,
            "--caches-max-bytes": .nothing,
        ]
    }
}
extension BackupCommand { static var valueCompletions: [String: ArgumentCompletion] { ["--to": .files] } }
extension ImportCommand { static var valueCompletions: [String: ArgumentCompletion] { ["--max-bytes": .nothing] } }
extension LMTPCommand {
    static var valueCompletions: [String: ArgumentCompletion] {
        ["--root": .folders, "--listen": .nothing, "--max-bytes": .nothing, "--sessions": .nothing]
    }
}
extension HelpCommand { static var positionalCompletion: ArgumentCompletion { .words(commands.map { $0.name }) } }
extension CompletionsCommand {
    static var positionalCompletion: ArgumentCompletion { .words(ShellCompletion.shells) }
}

struct CompletionsCommand: Command {
    static let name = "completions"
    static let abstract = "Print a completion script for bash, zsh or fish, made from these commands' definitions."
    static let usage = "completions bash|zsh|fish"
    static let options = [("bash|zsh|fish", "the shell, e.g. 'inbox completions bash > /etc/bash_completion.d/inbox'")]
    static let spec = Arguments.Spec(positionals: 1...1)

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let shell = String(decoding: arguments.positionals[0], as: UTF8.self)
        guard let script = ShellCompletion.script(for: shell, commands: commands.map { $0.definition }) else {
            throw ContainerError(.usage, "'\(shell)' is not a shell inbox completes: use bash, zsh or fish")
        }
        Output.text(script)
    }
}

struct ManCommand: Command {
    static let name = "man"
    static let abstract = "Print the manual page, inbox(1), in roff (man -l <(inbox man) shows it)."
    static let usage = "man"
    static let options: [(String, String)] = []
    static let spec = Arguments.Spec()

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        Output.text(ManPage.roff(commands: commands.map { $0.definition }, version: Inbox.version))
    }
}
