import AppContainer
import Glibc
import InboxKit

struct CleanCommand: Command {
    static let name = "clean"
    static let abstract = "Apply the cleanup policy to the Inbox, tmp and Library/Caches; prints each deletion."
    static let usage =
        "clean [--dry-run] [--json] [--inbox-max-age DURATION] [--inbox-max-bytes SIZE] [--tmp-max-age DURATION]"
        + " [--caches-max-bytes SIZE]"
    static let options = [
        ("--dry-run", "print the plan, exactly as a real clean would, and delete nothing"),
        ("--json", "print a JSON array of {path, reason, deleted}"),
        ("--inbox-max-age DURATION", "delete Inbox items older than this (preference inboxMaxAge, default 30d)"),
        ("--inbox-max-bytes SIZE", "then the oldest while the Inbox holds more (inboxMaxBytes, default 1G)"),
        ("--tmp-max-age DURATION", "delete older tmp entries; all of tmp when no watcher runs (tmpMaxAge, 3d)"),
        ("--caches-max-bytes SIZE", "trim Library/Caches, least recently used first (cachesMaxBytes, 512M)"),
        ("DURATION, SIZE", "seconds or bytes, or with a unit: 45s, 10m, 12h, 30d, 2w; 64K, 512M, 1G, 2T"),
    ]
    static let spec = Arguments.Spec(
        flags: ["--dry-run", "--json"],
        valued: ["--inbox-max-age", "--inbox-max-bytes", "--tmp-max-age", "--caches-max-bytes"])

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let overrides = try policyOverrides(arguments)
        let container = try Container.open(at: containerPath)
        if !arguments.flags.contains("--dry-run") { try container.requireSingleHost() }
        var policy = try Preferences.load(container)
        for (keyPath, value) in overrides { policy[keyPath: keyPath] = value }
        let plan = CleanupPlan(container: container, policy: policy)
        let log = try EventLog(container: container)
        let progress = ProgressLine.standardError()
        // The progress line is erased before a line of output only where that line would land on it.
        let outputIsTerminal = isatty(STDOUT_FILENO) == 1
        var json = arguments.flags.contains("--json") ? JSONArrayPrinter() : nil
        let waiting = { Output.problem("another clean of this container is under way; waiting for it to end") }
        let checked = { (count: Int) in progress.draw("cleaning… \(ProgressLine.grouped(count)) entries checked") }
        let summary: CleanupSummary
        do {
            summary = try plan.execute(
                dryRun: arguments.flags.contains("--dry-run"), log: log, progress: checked, waiting: waiting
            ) { outcome in
                if outputIsTerminal { progress.clear() }
                if json != nil {
                    json?.print(outcome.json)
                } else {
                    Output.line(names: outcome.line)
                }
                switch outcome.result {
                case .failed(let error):
                    progress.clear()
                    Output.problem(error.message)
                case .changed:
                    progress.clear()
                    Output.problem("kept '\(outcome.shownPath)': it changed since it was planned")
                case .planned, .deleted, .gone: break
                }
            }
        } catch {
            progress.clear()
            json?.finish()
            throw error
        }
        progress.clear()
        json?.finish()
        if let unread = summary.firstUnreadable {
            Output.problem("kept \(summary.unreadable) entries that could not be read: \(unread.message)")
        }
        if let failure = summary.firstFailure {
            let entries = summary.failed == 1 ? "1 entry" : "\(summary.failed) entries"
            throw ContainerError(failure.code, "\(entries) could not be deleted", cause: failure.cause)
        }
    }

    /// The policy values the flags set; a value that is not a duration or a size is a usage error.
    private static func policyOverrides(_ arguments: Arguments) throws(ContainerError)
        -> [(WritableKeyPath<Preferences, Int64>, Int64)]
    {
        let flags: [(String, WritableKeyPath<Preferences, Int64>, Bool)] = [
            ("--inbox-max-age", \.inboxMaxAge, true), ("--inbox-max-bytes", \.inboxMaxBytes, false),
            ("--tmp-max-age", \.tmpMaxAge, true), ("--caches-max-bytes", \.cachesMaxBytes, false),
        ]
        var overrides: [(WritableKeyPath<Preferences, Int64>, Int64)] = []
        for (flag, keyPath, isDuration) in flags {
            guard let text = arguments.string(flag) else { continue }
            let value = isDuration ? Quantity.seconds(from: text) : Quantity.bytes(from: text)
            guard let value else {
                let example = isDuration ? "seconds, or 30d, 12h, 10m, 45s" : "bytes, or 512M, 1G, 64K"
                throw ContainerError(.usage, "'\(flag)' needs \(example), not '\(text)'")
            }
            overrides.append((keyPath, value))
        }
        return overrides
    }
}

extension CleanupOutcome {
    /// The path as text, for messages.
    var shownPath: String { String(decoding: path, as: UTF8.self) }
}
