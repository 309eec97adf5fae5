import AppContainer
import InboxKit

extension Command {
    /// What the generated completions and man page know of this command (ARCHITECTURE.md, "The command line").
    static var definition: CommandDescription {
        CommandDescription(
            name: name, abstract: abstract, usage: usage, options: options, flags: spec.flags.sorted(),
            valued: spec.valued.sorted(), words: words)
    }

    static var words: [String] { [] }
}

extension ListCommand { static var words: [String] { ["inbox", "documents"] } }
extension HelpCommand { static var words: [String] { commands.map { $0.name } } }
extension CompletionsCommand { static var words: [String] { ShellCompletion.shells } }

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
