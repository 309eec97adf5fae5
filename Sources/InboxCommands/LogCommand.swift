import AppContainer
import Glibc
import InboxKit

struct LogCommand: Command {
    static let name = "log"
    static let abstract = "Read the event log, across rotated files."
    static let usage = "log [--json] [--follow] [-n N] [--since SEQ] [--until SEQ] [--event KIND] [--path GLOB]"
    static let options = [
        ("--json", "print the records as they are stored, one JSON object a line"),
        ("--follow", "keep printing records as they are appended; ends when the reader of stdout is gone"),
        ("-n N", "only the last N matching records (with --follow: then the new ones)"),
        ("--since SEQ", "only records after SEQ"),
        ("--until SEQ", "only records up to SEQ (with --follow: stop once record SEQ is read)"),
        ("--event KIND", "only records of KIND (comma-separated kinds allowed)"),
        ("--path GLOB", "only records whose path, from or to matches GLOB (fnmatch: * matches / too)"),
    ]
    static let spec = Arguments.Spec(
        flags: ["--json", "--follow"], valued: ["--since", "--until", "--event", "-n", "--path"])

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let since = try arguments.integer("--since") ?? 0
        let last = try arguments.integer("-n").map { Int(clamping: $0) }
        var kinds: Set<EventKind> = []
        for name in (arguments.string("--event") ?? "").split(separator: ",").map(String.init) {
            guard let kind = EventKind(rawValue: name) else {
                let known = EventKind.allCases.map(\.rawValue).joined(separator: ", ")
                throw ContainerError(.usage, "'\(name)' is not an event kind (known: \(known))")
            }
            kinds.insert(kind)
        }
        let filter = EventFilter(until: try arguments.integer("--until"), pathPattern: arguments.values["--path"])
        let json = arguments.flags.contains("--json")
        let log = try EventLog(reading: try Container.open(at: containerPath))
        let print = { (record: EventRecord) in Output.line(json ? record.line : record.humanReadable) }
        guard arguments.flags.contains("--follow") else {
            let records = try log.records(since: since, kinds: kinds).filter(filter.matches)
            for record in last.map({ records.suffix($0) }) ?? records[...] { print(record) }
            return
        }
        // A reader that leaves mid-write ends the follow like one that leaves while it waits: status 0, not SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        var cursor = since
        if let last {
            // The last N that are there now, then everything after the newest record read.
            let existing = try log.records(since: since)
            cursor = existing.last?.seq ?? since
            let matching = existing.filter {
                (kinds.isEmpty || $0.kind.map(kinds.contains) == true) && filter.matches($0)
            }
            for record in matching.suffix(last) { print(record) }
        }
        if let until = filter.until, cursor >= until { return }
        // Kinds are filtered here, not by the reader, so that `--until` sees every record and stops at SEQ.
        let body = { (record: EventRecord) -> Bool in
            if (kinds.isEmpty || record.kind.map(kinds.contains) == true) && filter.matches(record) { print(record) }
            return filter.until.map { record.seq < $0 } ?? true
        }
        try log.follow(since: cursor, shouldStop: { Output.readerIsGone }, body)
    }
}

extension EventRecord {
    /// `12  2026-11-29T16:37:38.123Z  moved  from="…" to="…"`, the fields in the order the record holds them, each
    /// value quoted; every control character (C0, DEL, C1) escaped by `TerminalText`, on a terminal or not.
    var humanReadable: String {
        let skip: Set<String> = ["seq", "time", "event"]
        let keys = keysInOrder.filter { !skip.contains($0) && !$0.hasSuffix("_b64") }
        let details = keys.compactMap { key in
            fields[key].map { TerminalText.escapedControls(in: key) + "=" + TerminalText.quoted($0) }
        }.joined(separator: " ")
        let shown = [time, event].map { TerminalText.escapedControls(in: $0) }
        return "\(seq)  \(shown[0])  \(shown[1])  \(details)"
    }
}
