/// `inbox(1)` in roff, generated from the commands' definitions (ARCHITECTURE.md, "The command line").
public enum ManPage {
    /// The exit statuses, as the README's table gives them.
    static let exitStatuses = [
        ("0", "done"), ("1", "other failure"), ("64", "usage error"),
        ("65", "bad data (a broken bundle seal; refused entries in a restore)"),
        ("66", "no such item"), ("73", "cannot create (no container: run inbox init; a read-only filesystem)"),
        ("74", "I/O error (disk full)"), ("75", "busy, try again"),
        ("77", "refused by a container rule (a path outside the Inbox, .., a symbolic link, the sealed bundle)"),
    ]

    /// The man page of `inbox` with `commands`, each with its usage, abstract and options, and `version` in its header.
    public static func roff(commands: [CommandDescription], version: String) -> String {
        var lines = [
            #".TH INBOX 1 "" "inbox \#(version)" "User Commands""#,
            ".SH NAME",
            #"inbox \- hand files to an app through its Inbox, the iOS container rules on Linux"#,
            ".SH SYNOPSIS",
            ".B inbox",
            text("[--container DIR] COMMAND ..."),
            ".SH DESCRIPTION",
            text(
                "Files are delivered atomically into Documents/Inbox; a watcher sees each arrive, seals it read-only, hands it to read-only handlers and moves it into Documents before anything edits it. Every step is written to a durable event log."
            ),
            ".SH OPTIONS",
            ".TP", #".BI \-\-container " DIR""#,
            text("the container (default: $INBOX_CONTAINER, else $XDG_DATA_HOME/inbox/default)"),
            ".TP", #".BR \-h ", " \-\-help"#, text("show the help of inbox or of a command"),
            ".TP", #".B \-\-version"#, text("print the version"),
            ".SH COMMANDS",
        ]
        for command in commands {
            lines += [".TP", ".B " + text(command.usage), text(command.abstract)]
            guard !command.options.isEmpty else { continue }
            lines.append(".RS")
            for (option, help) in command.options { lines += [".TP", ".B " + text(option), text(help)] }
            lines.append(".RE")
        }
        lines.append(".SH EXIT STATUS")
        for (status, meaning) in exitStatuses { lines += [".TP", ".B " + status, text(meaning)] }
        lines += [
            ".SH ENVIRONMENT",
            ".TP", ".B INBOX_CONTAINER", text("the container when --container is not given"),
            ".TP", ".B COLUMNS", text("the width help is wrapped to (else the terminal's, else 80)"),
            ".SH FILES",
            ".TP", ".I <container>/Library/Application Support/inbox/events.jsonl", text("the event log"),
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// `text` safe on a roff line: backslashes and hyphens escaped, a leading `.` or `'` kept literal.
    static func text(_ text: String) -> String {
        var escaped = text.replacingEvery("\\", with: #"\e"#).replacingEvery("-", with: #"\-"#)
        escaped = escaped.replacingEvery("\n", with: " ")
        if escaped.hasPrefix(".") || escaped.hasPrefix("'") { escaped = #"\&"# + escaped }
        return escaped
    }
}
