import AppContainer
import InboxKit

/// `inbox(1)` in roff, generated from the commands' definitions (ARCHITECTURE.md, "The command line").
package enum ManPage {
    /// The exit statuses, as the README's table gives them.
    static let exitStatuses = [
        ("0", "done"), ("1", "other failure"), ("64", "usage error"),
        ("65", "bad data (a broken bundle seal; refused entries in a restore)"),
        ("66", "no such item"), ("73", "cannot create (no container: run inbox init; a read-only filesystem)"),
        ("74", "I/O error (disk full)"), ("75", "busy, try again"),
        ("77", "refused by a container rule (a path outside the Inbox, .., a symbolic link, the sealed bundle)"),
    ]

    /// The man page of `inbox` with `commands`, each with its usage, abstract and options, and `version` in its header.
    package static func roff(commands: [CommandDescription], version: String) -> String {
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
        lines += [".SH ENVIRONMENT"] + rows(environment)
        lines += files
        lines.append(".SH EXAMPLES")
        for (description, commandLines) in examples {
            lines += [".PP", text(description), ".RS 4", ".nf"] + commandLines.map(text) + [".fi", ".RE"]
        }
        lines += [
            ".SH SEE ALSO",
            ".BR inotifywait (1),", ".BR systemd.service (5),", ".BR procmail (1),", ".BR local (8)",
            text("(Postfix's local delivery agent); README.md and docs/reference.md in inbox's source."),
        ]
        return lines.joined(separator: "\n") + "\n"
    }

    /// `.TP` paragraphs: each (tag, text) with its tag in bold.
    static func rows(_ rows: [(String, String)]) -> [String] {
        rows.flatMap { [".TP", ".B " + text($0.0), text($0.1)] }
    }

    /// The variables inbox reads, and those a hook is given.
    static let environment = [
        ("INBOX_CONTAINER", "the container when --container is not given"),
        (
            "XDG_DATA_HOME",
            "the default container is $XDG_DATA_HOME/inbox/default, or $HOME/.local/share/inbox/default when it is unset or empty; inbox-watch-all.service watches every container in $XDG_DATA_HOME/inbox (the same rule), and lmtp serves them without --root"
        ),
        ("COLUMNS", "the width help is wrapped to (else the terminal's, else 80)"),
        (
            "NOTIFY_SOCKET",
            "set by systemd for a Type=notify service: watch sends READY=1 to it once the Inbox is watched"
        ),
        (
            "TMPDIR",
            "where import copies a message it reads from standard input or another pipe, and lmtp each message it is sent, in a file with no name (default /tmp)"
        ),
        (
            "LISTEN_FDS, LISTEN_PID",
            "set by systemd for a socket-activated service (inbox-lmtp.socket): lmtp serves those sockets when --listen is not given"
        ),
        (
            "INBOX_FILE, INBOX_NAME, INBOX_CONTAINER",
            "in the environment of a watch --exec command: the arrival's absolute path, its name in the Inbox, and the container's root"
        ),
    ]

    /// The FILES section: the container's places, the service's state folder and the preferences.
    static var files: [String] {
        var lines = [".SH FILES", text("Paths are relative to the container, whose places are:")]
        lines += rows(Place.allCases.map { ($0.relativePath(appName: "NAME") + "/", placeDescription($0)) })
        lines += [".PP", text("The service's state, in \(Container.stateRelativePath)/:")]
        let rotation =
            "a rotated log: events.jsonl once past logMaxBytes (default \(EventLog.defaultMaxBytes >> 20) MiB), renamed with its last seq in 20 digits; the logKeepRotated newest (default: the \(EventLog.defaultKeepRotated) newest) are kept, older ones deleted, and inbox log reads across them"
        lines += rows([
            ("events.jsonl", "the event log: one JSON object a line, each with its seq, time and event"),
            ("events.<last seq>.jsonl", rotation),
            (
                "import.sqlite",
                "the import index (SQLite): each message imported, by the SHA-256 of its bytes, and its attachments delivered, so that a message is imported once"
            ),
            (
                "events.lock, watch.lock, setup.lock, cleanup.lock, bundle.lock, import.lock",
                "locks (flock): one appender of the log at a time, one watcher per container (status names its pid), one setup, one clean, one bundle install and one import at a time; import - and deliver wait at most \(LockWait.deliveryBound.components.seconds) s for events.lock or import.lock while another holds it, then exit 75 naming its pid (lmtp answers 451)"
            ),
            (
                "arrived.checkpoint, cleanup.intent, journal/",
                "work in progress of the watcher, clean and move, finished or undone at the next start"
            ),
        ])
        lines += [
            ".PP",
            text(
                "The preferences, Library/Preferences/inbox.plist: an XML property list of whole numbers and one truth value, written with the defaults by inbox init; a missing key takes its default, a value out of range is an error (65). The clean options override the first four:"
            ),
        ]
        let defaults = Preferences()
        let days = { (seconds: Int64) in "\(seconds), \(seconds / 86400) days" }
        let mebibytes = { (bytes: Int64) in "\(bytes), \(bytes >> 20) MiB" }
        lines += rows([
            ("inboxMaxAge", "Inbox items are deleted after this many seconds (default \(days(defaults.inboxMaxAge)))"),
            (
                "inboxMaxBytes",
                "Inbox items are deleted, oldest first, while the Inbox holds more bytes than this (default \(mebibytes(defaults.inboxMaxBytes)))"
            ),
            ("tmpMaxAge", "tmp entries are deleted after this many seconds (default \(days(defaults.tmpMaxAge)))"),
            (
                "cachesMaxBytes",
                "Library/Caches is trimmed to this many bytes, least recently used first (default \(mebibytes(defaults.cachesMaxBytes)))"
            ),
            (
                "logMaxBytes",
                "the event log is rotated once past this many bytes, at least 65536, by every command that writes it (default \(mebibytes(defaults.logMaxBytes)))"
            ),
            (
                "logKeepRotated",
                "how many rotated logs are kept, the newest, at least 1 (default \(defaults.logKeepRotated))"
            ),
            (
                "singleHost",
                "true once inbox init --single-host declared that no other host or path writes to the container: needed before anything writes to it on FUSE, or on NFS with nolock or local_lock (default false)"
            ),
        ])
        return lines
    }

    static func placeDescription(_ place: Place) -> String {
        switch place {
        case .bundle: "the app's bundle, sealed and read-only (inbox init --app NAME --bundle DIR)"
        case .documents: "the user's files, where move puts Inbox items"
        case .inbox: "where deliver, import and other apps hand files over; only a delivery writes here"
        case .library: "the app's library"
        case .applicationSupport: "the app's data and the service's state (below)"
        case .caches: "not backed up; trimmed by clean"
        case .preferences: "preferences, inbox.plist among them"
        case .tmp: "not backed up; old entries deleted by clean"
        }
    }

    /// What a newcomer types, each with what it does.
    static let examples = [
        ("Make the default container and print its root:", ["inbox init"]),
        (
            "Deliver files, one of them from standard input; each one's path in the Inbox is printed:",
            ["inbox deliver ~/Downloads/report.pdf scan.png", "date | inbox deliver - --as today.txt"]
        ),
        (
            "Watch every container under $XDG_DATA_HOME/inbox as a user service, even with nobody logged in:",
            ["systemctl --user enable --now inbox-watch-all.service", "loginctl enable-linger"]
        ),
        (
            "Watch one container in the foreground, a line for each arrival; a hook moves PDFs into Documents:",
            [#"inbox watch --verbose --exec 'case "$INBOX_NAME" in *.pdf) echo move ;; *) echo keep ;; esac'"#]
        ),
        (
            "Import the attachments of a mailbox; and of each message an MTA hands over, in ~/.forward+inbox for Postfix's local(8):",
            [
                "inbox --container ~/mail-app import ~/Mail/archive.mbox",
                #""|/usr/local/bin/inbox --container /home/me/mail-app import -""#,
            ]
        ),
        (
            "Serve Postfix over LMTP, as the account inbox, each recipient NAME+inbox@... delivered into /var/lib/inbox/NAME:",
            ["systemctl enable --now inbox-lmtp.socket"]
        ),
        (
            "Move an Inbox file and a folder item into Documents; each new path is printed:",
            ["inbox move 'quarterly report.pdf' photos"]
        ),
    ]

    /// `text` safe on a roff line: backslashes and hyphens escaped, a leading `.` or `'` kept literal.
    static func text(_ text: String) -> String {
        var escaped = text.replacingEvery("\\", with: #"\e"#).replacingEvery("-", with: #"\-"#)
        escaped = escaped.replacingEvery("\n", with: " ")
        if escaped.hasPrefix(".") || escaped.hasPrefix("'") { escaped = #"\&"# + escaped }
        return escaped
    }
}
