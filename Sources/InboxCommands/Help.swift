import AppContainer
import Glibc
import InboxKit

/// Every command, in the order the overview lists them; help, completions and the man page come from these
/// definitions (ARCHITECTURE.md, "The command line").
var commands: [any Command.Type] {
    [
        InitCommand.self, DeliverCommand.self, MoveCommand.self, ListCommand.self, LogCommand.self, WatchCommand.self,
        StatusCommand.self, DemoCommand.self, CleanCommand.self, BackupPlanCommand.self, ExcludeFromBackupCommand.self,
        BackupCommand.self, RestoreCommand.self, VerifyCommand.self, ImportCommand.self, LMTPCommand.self,
        HelpCommand.self,
        CompletionsCommand.self,
        ManCommand.self,
    ]
}

enum Help {
    /// The top-level help, fitted to the terminal.
    static var overview: String {
        let width = Terminal.columns
        var lines = TextWrapping.wrap(
            "Hand files to an app through its Inbox, the iOS container rules on Linux.", width: width,
            first: "OVERVIEW: ", rest: "  ")
        lines.append("")
        lines += TextWrapping.wrap("[--container DIR] COMMAND ...", width: width, first: "USAGE: inbox ", rest: "    ")
        lines += ["", "COMMANDS:"]
        lines += TextWrapping.table(commands.map { ($0.name, $0.abstract) }, width: width)
        lines.append("")
        lines += TextWrapping.wrap(
            "See 'inbox help COMMAND' or 'inbox COMMAND --help' for a command's options, and 'inbox --version' for the version.",
            width: width)
        return TextWrapping.joined(lines)
    }

    /// The command named `name`, or a usage error that suggests the nearest name.
    static func command(named name: String) throws(ContainerError) -> any Command.Type {
        if let match = commands.first(where: { $0.name == name }) { return match }
        var message = "unknown command '\(name)'"
        if let near = Suggestion.closest(to: name, among: commands.map { $0.name }) {
            message += "; did you mean '\(near)'?"
        }
        throw ContainerError(.usage, message)
    }
}

struct HelpCommand: Command {
    static let name = "help"
    static let abstract = "Show the help of a command (the same as 'inbox COMMAND --help'), or this overview."
    static let usage = "help [COMMAND]"
    static let options = [("COMMAND", "the command to explain")]
    static let spec = Arguments.Spec(positionals: 0...1)

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        guard let word = arguments.positionals.first else {
            Output.line(Help.overview)
            return
        }
        Output.line(try Help.command(named: String(decoding: word, as: UTF8.self)).help)
    }
}

/// The terminal the help is fitted to (ARCHITECTURE.md, "The command line").
enum Terminal {
    static var stdoutIsTerminal: Bool { isatty(Output.standardOutput) == 1 }

    /// `$COLUMNS` when it is a number, else the width of the terminal on stdout, else 80.
    static var columns: Int {
        if let text = getenv("COLUMNS").map({ String(cString: $0) }), let columns = Int(text), columns > 0 {
            return columns
        }
        if stdoutIsTerminal, let size = try? system_terminalSize(Output.standardOutput), size.ws_col > 0 {
            return Int(size.ws_col)
        }
        return 80
    }
}
