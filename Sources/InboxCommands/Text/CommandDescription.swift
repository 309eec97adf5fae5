/// One command as its `--help` describes it, for the generated completions and man page (ARCHITECTURE.md, "The
/// command line").
package struct CommandDescription: Sendable {
    /// The subcommand's name, as typed after `inbox`.
    package var name: String
    /// One sentence: what the command does.
    package var abstract: String
    /// The usage line after `inbox`, e.g. `move FILE [--json|-0]`.
    package var usage: String
    /// Help rows, (option or argument, what it does).
    package var options: [(String, String)]
    /// Options that take no value.
    package var flags: [String]
    /// Options that take a value, each with what completes its value.
    package var valued: [(option: String, completion: ArgumentCompletion)]
    /// What completes its positional arguments: `.nothing` when it takes none.
    package var positionals: ArgumentCompletion

    /// A command as its definition in the `inbox` executable gives it.
    package init(
        name: String, abstract: String, usage: String, options: [(String, String)], flags: [String],
        valued: [(option: String, completion: ArgumentCompletion)], positionals: ArgumentCompletion
    ) {
        self.name = name
        self.abstract = abstract
        self.usage = usage
        self.options = options
        self.flags = flags
        self.valued = valued
        self.positionals = positionals
    }

    /// The help row of `option` (`--app` in the row `--app NAME`), split at its first space: ("--app", "NAME").
    private func row(for option: String) -> (words: [Substring], help: String)? {
        options.lazy.map { row in (row.0.split(separator: " "), row.1) }.first { row in
            row.0.first.map { $0.split(separator: ",").contains(Substring(option)) } ?? false
        }
    }

    /// The help text of `option`, or "".
    func help(for option: String) -> String {
        row(for: option)?.help ?? ""
    }

    /// What the help calls `option`'s value (`NAME` in the row `--app NAME`), or "value".
    func valueName(for option: String) -> String {
        row(for: option).flatMap { $0.words.dropFirst().first.map(String.init) } ?? "value"
    }
}

/// What completes an argument or an option's value in the generated completion scripts (ARCHITECTURE.md, "The
/// command line").
package enum ArgumentCompletion: Sendable, Equatable {
    /// Files and folders.
    case files
    /// Folders.
    case folders
    /// One of these words.
    case words([String])
    /// A name in the Inbox of the container the command line names (`--container`, else `$INBOX_CONTAINER`, else
    /// the default), but for the hidden staging names.
    case inboxNames
    /// A command's name.
    case command
    /// Nothing: a number, a size, a duration, a format or a name of the user's choosing.
    case nothing
}
