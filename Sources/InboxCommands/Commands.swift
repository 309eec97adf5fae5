import AppContainer
import FoundationEssentials
import Glibc
import InboxKit

struct InitCommand: Command {
    static let name = "init"
    static let abstract = "Create the container layout (idempotent), seal a bundle, run one-time setup."
    static let usage = "init [--app NAME] [--bundle DIR] [--single-host]"
    static let options = [
        ("--app NAME", "the app's name: the bundle is NAME.app (default: App)"),
        ("--bundle DIR", "install DIR as NAME.app and seal it (once per container; again only if identical)"),
        (
            "--single-host",
            "declare that no other host or path writes to the container (kept in its preferences): needed before"
                + " anything writes to it on FUSE, or on NFS with nolock or local_lock"
        ),
    ]
    static let spec = Arguments.Spec(flags: ["--single-host"], valued: ["--app", "--bundle"])

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let container = try Container.create(at: containerPath, appName: arguments.string("--app"))
        if arguments.flags.contains("--single-host") {
            try Preferences.declareSingleHost(container)
        } else {
            let filesystem = try container.filesystem()
            if let reason = filesystem.localLockReason, try !Preferences.load(container).singleHost {
                Output.problem(container.singleHostAdvice(filesystem, reason: reason, refusing: false))
            }
        }
        if let bundle = arguments.path("--bundle") { try AppBundle(container: container).install(from: bundle) }
        let inbox = try Inbox(container: container)
        try inbox.sweepAbandonedStaging()
        try inbox.runSetup()
        Output.name(container.rootBytes)
    }
}

struct DeliverCommand: Command {
    static let name = "deliver"
    static let abstract = "Deliver files into the Inbox atomically; prints each one's path in the Inbox."
    static let usage = "deliver FILE... [--as NAME] [--json|-0]"
    static let options = [
        ("FILE", "a file to deliver, or - for standard input (with --as)"),
        ("--as NAME", "the name to deliver one FILE under (sanitised; made unique)"),
        ("--json", "print a JSON array of {name, path, size}"),
        ("-0", "end each path with a NUL instead of a newline, never escaped"),
    ]
    static let spec = Arguments.Spec(flags: ["--json", "-0"], valued: ["--as"], positionals: 1...Int.max)

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let suggested = arguments.values["--as"].map(Inbox.sanitizedName)
        if suggested != nil && arguments.positionals.count > 1 {
            throw ContainerError(.usage, "'--as' names one file; deliver the others separately")
        }
        var sources: [DeliverySource] = []
        for file in arguments.positionals {
            if file == [0x2D] {
                guard let suggested else { throw ContainerError(.usage, "'-' (standard input) needs '--as NAME'") }
                sources.append(.standardInput(name: suggested))
            } else {
                sources.append(.file(path: file, name: suggested))
            }
        }
        let format = try ResultFormat(arguments)
        let container = try Container.open(at: containerPath)
        try container.requireSingleHost()
        // What a script or an MTA hands over: no lock is waited for longer than a delivery allows (ARCHITECTURE.md,
        // "Nothing blocks an MTA").
        let inbox = try Inbox(container: container, lockWait: .delivery)
        // What was delivered is printed even when a later file fails: those stay delivered.
        let outcome = inbox.deliverReporting(sources)
        if format == .json {
            Output.line("[" + outcome.delivered.map(\.json).joined(separator: ",") + "]")
        } else {
            for item in outcome.delivered { Output.name(item.path, nulTerminated: format == .nulTerminated) }
        }
        if let error = outcome.error { throw error }
    }
}

struct MoveCommand: Command {
    static let name = "move"
    static let abstract = "Move Inbox items (files or folders) into Documents; prints each one's new path."
    static let usage = "move FILE... [--json|-0]"
    static let options = [
        ("FILE", "a name in the Inbox, or a path to an item inside it; a folder moves whole"),
        ("--json", "print a JSON object {name, path} a line, one for each item moved"),
        ("-0", "end each path with a NUL instead of a newline, never escaped"),
    ]
    static let spec = Arguments.Spec(flags: ["--json", "-0"], positionals: 1...Int.max)

    /// Each item is tried in turn. With one, its failure is the command's; with several, each failure is a line on
    /// stderr, the rest go on, and the command then fails with the first one's status.
    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let format = try ResultFormat(arguments)
        let container = try Container.open(at: containerPath)
        try container.requireSingleHost()
        let inbox = try Inbox(container: container)
        let items = arguments.positionals
        var failures: [ContainerError] = []
        for item in items {
            do {
                let name = try inbox.container.inboxItemName(forUserPath: item)
                let document = try inbox.moveToDocuments(name, reason: "move")
                if format == .json {
                    Output.line(document.json)
                } else {
                    Output.name(document.path, nulTerminated: format == .nulTerminated)
                }
            } catch {
                guard items.count > 1 else { throw error }
                Output.problem(error.message)
                failures.append(error)
            }
        }
        if let first = failures.first {
            throw ContainerError(
                first.code, "\(failures.count) of \(items.count) items not moved", cause: first.cause)
        }
    }
}

struct ListCommand: Command {
    static let name = "ls"
    static let abstract = "List the Inbox (or Documents) with each item's size and modification date."
    static let usage = "ls [inbox|documents] [--json]"
    static let options = [
        ("--json", "print a JSON array of {name, path, kind, size, modified}; kind is file, folder, link or other")
    ]
    static let spec = Arguments.Spec(flags: ["--json"], positionals: 0...1)

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let place: Place
        switch arguments.positionals.first.map({ String(decoding: $0, as: UTF8.self) }) {
        case nil, "inbox": place = .inbox
        case "documents": place = .documents
        case let other?:
            let near = Suggestion.closest(to: other, among: ["inbox", "documents"]).map { "; did you mean '\($0)'?" }
            throw ContainerError(.usage, "'\(other)' is not a place to list: use inbox or documents" + (near ?? ""))
        }
        let items = try Container.open(at: containerPath).list(place)
        if arguments.flags.contains("--json") {
            Output.line("[" + items.map(\.json).joined(separator: ",") + "]")
            return
        }
        for item in items {
            let size = String(item.size)
            let padded = String(repeating: " ", count: max(0, 10 - size.count)) + size
            let mark: [UInt8] = item.status.kind == .directory ? [0x2F] : []
            Output.line(names: Array("\(padded)  \(item.modified.rfc3339)  ".utf8) + item.name.bytes + mark)
        }
    }
}

/// How a command that prints paths prints them: lines, NUL-terminated (`-0`) or JSON (`--json`).
package enum ResultFormat {
    case lines, nulTerminated, json

    package init(_ arguments: Arguments) throws(ContainerError) {
        switch (arguments.flags.contains("--json"), arguments.flags.contains("-0")) {
        case (true, true): throw ContainerError(.usage, "'--json' and '-0' are two outputs: choose one")
        case (true, false): self = .json
        case (false, true): self = .nulTerminated
        case (false, false): self = .lines
        }
    }
}

struct DemoCommand: Command {
    static let name = "demo"
    static let abstract = "Run the main job on a fresh container: sample attachments delivered, moved, listed, logged."
    static let usage = "demo [--samples DIR]"
    static let options = [
        ("--samples DIR", "the attachments to deliver (default: ./SampleAttachments)"),
        ("--container DIR", "where to make the fresh container (default: a new folder in /tmp)"),
    ]
    static let spec = Arguments.Spec(valued: ["--samples"])

    static let needsFormats = true

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        try FormatsCommands.run(\.demo, arguments, containerPath: containerPath)
    }

    /// A new empty folder in the temporary folder.
    static func defaultContainerPath() throws(ContainerError) -> [UInt8] {
        var template = Array("/tmp/inbox-demo.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw ContainerError(.cannotCreate, "cannot create a folder for the demo in /tmp")
        }
        return Array(UnsafeRawBufferPointer(start: made, count: strlen(made)))
    }
}

struct WatchCommand: Command {
    static let name = "watch"
    static let abstract = "Watch the Inbox: seal, log and hand over each arrival (one watcher per container)."
    static let usage =
        "watch [--root DIR] [--on-arrival keep|move] [--exec CMD] [--hook-timeout SECONDS] [--jobs N] [--once]"
        + " [--no-clean] [--poll-interval SECONDS] [--settle SECONDS] [--single-host] [--verbose|--format FMT] [-0]"
    static let options = [
        (
            "--root DIR",
            "watch every container under DIR (each folder in it), in one process, picking up containers made or removed while it runs"
        ),
        (
            "--container DIR ...",
            "given more than once, or with --root: watch each container named, in one process"
        ),
        ("--on-arrival keep|move", "keep arrivals in the Inbox (default) or move each into Documents"),
        (
            "--exec CMD",
            "run CMD (with sh -c) for each arrival: the file on stdin, INBOX_FILE, INBOX_NAME and INBOX_CONTAINER in its environment. The first word it prints on stdout decides: keep, move or delete (in any case); nothing printed leaves it to --on-arrival; any other word keeps the item, with an error record and a line on stderr. A CMD that exits non-zero or times out keeps the item too"
        ),
        ("--hook-timeout SECONDS", "kill CMD after this long (default 60)"),
        ("--jobs N", "run at most N commands at once (default 2)"),
        (
            "--once",
            "handle what is in the Inbox, then exit; with --root or several --container, each container's in turn, the exit status the worst"
        ),
        ("--no-clean", "never apply the cleanup policy (by default at the start, then hourly; see inbox clean)"),
        (
            "--poll-interval SECONDS",
            "on a network or FUSE filesystem (NFS, SMB, bindfs, ...), where another host's writes raise no inotify event, scan the Inbox this often (default 2, backing off to 30 after 5 idle minutes); a local filesystem is never polled"
        ),
        (
            "--settle SECONDS",
            "a polled file arrives once its size and times held still this long (default 2), or at once when renamed in from a dot-name"
        ),
        (
            "--single-host",
            "for this run, declare that no other host or path writes to the container, as init --single-host does for good (FUSE, NFS with nolock or local_lock)"
        ),
        (
            "--verbose",
            "print a line when each arrival arrives and one when its disposition is applied, as --format '\(WatchFormat.verbose)'; ends when the reader of stdout is gone. Each line a --exec command writes on stderr is printed on stderr too, as 'hook for NAME: LINE'"
        ),
        ("--format FMT", "print those lines in FMT, its directives below"),
        ("-0", "end each line with a NUL instead of a newline, names never escaped (implies --verbose)"),
        ("FMT", WatchFormat.directives.map { "\($0.0) \($0.1)" }.joined(separator: "; ")),
    ]
    static let spec = Arguments.Spec(
        flags: ["--once", "--no-clean", "--single-host", "--verbose", "-0"],
        valued: [
            "--root", "--on-arrival", "--exec", "--hook-timeout", "--jobs", "--format", "--poll-interval", "--settle",
        ])
    static let servesSeveralContainers = true

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        var options = WatchOptions()
        if let value = arguments.string("--on-arrival") {
            guard let disposition = Disposition(rawValue: value), disposition != .delete else {
                throw ContainerError(.usage, "'--on-arrival' takes keep or move, not '\(value)'")
            }
            options.onArrival = disposition
        }
        options.exec = arguments.string("--exec")
        if let seconds = try arguments.integer("--hook-timeout") { options.hookTimeout = .seconds(seconds) }
        if let jobs = try arguments.integer("--jobs") {
            guard jobs > 0 else { throw ContainerError(.usage, "'--jobs' needs at least 1") }
            options.jobs = Int(jobs)
        }
        options.once = arguments.flags.contains("--once")
        if arguments.flags.contains("--no-clean") { options.cleanInterval = nil }
        if let interval = try arguments.seconds("--poll-interval") { options.pollInterval = interval }
        if let settle = try arguments.seconds("--settle") { options.settle = settle }
        options.singleHost = arguments.flags.contains("--single-host")
        options.report = { Output.problem($0) }
        options.reportsHookStderr = arguments.flags.contains("--verbose")
        options.streamsArrivals = false  // the lines of --format come from onSettled
        let lines = try lineFormat(arguments)
        if let lines {
            // A reader that leaves ends the watcher after the batch in hand (status 0), not SIGPIPE mid-batch.
            signal(SIGPIPE, SIG_IGN)
            let nulTerminated = arguments.flags.contains("-0")
            let escaped = !nulTerminated && Terminal.stdoutIsTerminal
            options.onSettled = { arrivals in
                Output.bytes(
                    lines.lines(arrivals, time: .now(), escaped: escaped, terminator: nulTerminated ? 0 : 0x0A))
            }
        }
        let root = arguments.path("--root")
        let named = arguments.paths("--container")
        if root != nil || named.count > 1 {
            let fleet = WatcherFleet(root: root, containers: named, options: options)
            try serve(
                lines: lines != nil, stop: fleet.stop, catchSignals: fleet.stopOnTerminationSignals,
                run: options.once ? fleet.runOnce : fleet.run)
            return
        }
        let watcher = Watcher(inbox: try Inbox(containerPath: containerPath), options: options)
        try serve(
            lines: lines != nil, stop: watcher.stop, catchSignals: watcher.stopOnTerminationSignals,
            run: watcher.runBlocking)
    }

    /// Runs a watcher or a fleet until SIGTERM or SIGINT, or, with `lines`, until the reader of stdout is gone.
    private static func serve(
        lines: Bool, stop: @escaping @Sendable () -> Void, catchSignals: () throws(ContainerError) -> Void,
        run: () throws(ContainerError) -> Void
    ) throws(ContainerError) {
        if lines {
            // While nothing arrives, no write would find the reader gone.
            do throws(Errno) {
                try startDetachedThread {
                    Output.waitUntilReaderIsGone()
                    stop()
                }
            } catch {
                throw error.failure("start a thread for", "the watcher's output")
            }
        }
        try catchSignals()
        try run()
    }

    /// The format of the lines asked for by `--format`, `--verbose` or `-0`; nil when none is.
    private static func lineFormat(_ arguments: Arguments) throws(ContainerError) -> WatchFormat? {
        if let format = arguments.values["--format"] {
            guard !arguments.flags.contains("--verbose") else {
                throw ContainerError(.usage, "'--verbose' and '--format' are two formats: choose one")
            }
            return try WatchFormat(format)
        }
        guard arguments.flags.contains("--verbose") || arguments.flags.contains("-0") else { return nil }
        return try WatchFormat(Array(WatchFormat.verbose.utf8))
    }
}

struct StatusCommand: Command {
    static let name = "status"
    static let abstract = "Is a watcher running? Counts and sizes per place, overflows, last scan, inotify limits."
    static let usage = "status [--json]"
    static let options = [("--json", "print one JSON object")]
    static let spec = Arguments.Spec(flags: ["--json"])

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let status = try ContainerStatus.read(try Container.open(at: containerPath))
        guard !arguments.flags.contains("--json") else { return Output.line(status.json) }
        for line in status.lines { Output.line(names: line) }
    }
}
