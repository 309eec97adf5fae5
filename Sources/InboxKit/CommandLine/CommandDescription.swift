/// One command as its `--help` describes it, for the generated completions and man page (ARCHITECTURE.md, "The
/// command line").
public struct CommandDescription: Sendable {
    /// The subcommand's name, as typed after `inbox`.
    public var name: String
    /// One sentence: what the command does.
    public var abstract: String
    /// The usage line after `inbox`, e.g. `move FILE [--json|-0]`.
    public var usage: String
    /// Help rows, (option or argument, what it does).
    public var options: [(String, String)]
    /// Options that take no value.
    public var flags: [String]
    /// Options that take a value.
    public var valued: [String]
    /// The words its positional arguments are chosen from; empty when they are files.
    public var words: [String]

    /// A command as its definition in the `inbox` executable gives it.
    public init(
        name: String, abstract: String, usage: String, options: [(String, String)], flags: [String],
        valued: [String], words: [String] = []
    ) {
        self.name = name
        self.abstract = abstract
        self.usage = usage
        self.options = options
        self.flags = flags
        self.valued = valued
        self.words = words
    }

    /// The help text of `option` (`--app` in the row `--app NAME`), or "".
    func help(for option: String) -> String {
        options.first { row in
            row.0.split(separator: " ").first.map { $0.split(separator: ",").contains(Substring(option)) } ?? false
        }?.1 ?? ""
    }
}
