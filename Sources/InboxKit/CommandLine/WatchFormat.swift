import AppContainer

/// What `inbox watch --verbose` and `--format FMT` print (ARCHITECTURE.md, "The command line"): for each arrival a
/// line when it arrives and a line for what became of it, made from a format in the manner of inotifywait's.
package struct WatchFormat: Sendable {
    /// The format of `--verbose`: `2026-11-29T16:37:38.123Z moved /home/me/app/Documents/report.pdf`.
    package static let verbose = "%t %e %a"

    /// The directives, as `--help` lists them.
    package static let directives: [(String, String)] = [
        ("%e", "the event: arrived, then kept, moved, deleted, failed (tried again later) or gone"),
        ("%a", "the absolute path (in Documents once moved)"),
        ("%p", "the path from the container, as the log gives it"),
        ("%f", "the file name"),
        ("%t", "the time, RFC 3339 in UTC with milliseconds"),
        ("%d", "the disposition decided: keep, move or delete"),
        ("%s", "the size in bytes"),
        ("%y", "the type sniffed from the contents (pdf, png, text, ...)"),
        ("%i", "the item's identity, as the log's id"),
        ("%%", "a %"),
    ]

    private enum Piece {
        case literal([UInt8])
        case directive(UInt8)
    }

    private let pieces: [Piece]

    /// Parses `format`; an unknown directive, or a `%` at the end, is a usage error (exit status 64).
    package init(_ format: [UInt8]) throws(ContainerError) {
        let known = Set(Self.directives.map { Array($0.0.utf8)[1] })
        var pieces: [Piece] = []
        var literal: [UInt8] = []
        var index = 0
        while index < format.count {
            guard format[index] == UInt8(ascii: "%") else {
                literal.append(format[index])
                index += 1
                continue
            }
            guard index + 1 < format.count else {
                throw ContainerError(.usage, "'--format' ends with a lone '%': write '%%' for a %")
            }
            let letter = format[index + 1]
            guard known.contains(letter) else {
                let shown = String(decoding: TerminalText.escaped([UInt8(ascii: "%"), letter]), as: UTF8.self)
                let list = Self.directives.map(\.0).joined(separator: " ")
                throw ContainerError(.usage, "'--format' has an unknown directive '\(shown)' (known: \(list))")
            }
            if letter == UInt8(ascii: "%") {
                literal.append(letter)
            } else {
                if !literal.isEmpty { pieces.append(.literal(literal)) }
                literal = []
                pieces.append(.directive(letter))
            }
            index += 2
        }
        if !literal.isEmpty { pieces.append(.literal(literal)) }
        self.pieces = pieces
    }

    /// The lines for a batch of settled arrivals, two each, at `time`. Names and paths are escaped by
    /// `TerminalText` when `escaped` (stdout is a terminal), else exact bytes; each line ends with `terminator`
    /// (a newline, or a NUL for `-0`).
    package func lines(_ arrivals: [Arrival], time: Timestamp, escaped: Bool, terminator: UInt8) -> [UInt8] {
        let now = Array(time.rfc3339.utf8)
        var output: [UInt8] = []
        for arrival in arrivals {
            for line in Self.events(of: arrival) {
                for piece in pieces {
                    switch piece {
                    case .literal(let bytes): output += bytes
                    case .directive(let letter): output += value(letter, line, arrival, now: now, escaped: escaped)
                    }
                }
                output.append(terminator)
            }
        }
        return output
    }

    /// One line's event and where the item is at that moment.
    private struct Line {
        let event: String
        let place: Place
        let name: FileName
    }

    /// `arrived`, then what applying the disposition did.
    private static func events(of arrival: Arrival) -> [Line] {
        let name = arrival.item.name
        let arrived = Line(event: "arrived", place: .inbox, name: name)
        switch arrival.outcome {
        case .moved(let moved): return [arrived, Line(event: "moved", place: .documents, name: moved)]
        case .deleted: return [arrived, Line(event: "deleted", place: .inbox, name: name)]
        case .failed: return [arrived, Line(event: "failed", place: .inbox, name: name)]
        case .stayed:
            // Kept; or decided on and found gone, or replaced by another file (which arrives itself).
            let kept = (arrival.disposition ?? .keep) == .keep
            return [arrived, Line(event: kept ? "kept" : "gone", place: .inbox, name: name)]
        }
    }

    private func value(_ letter: UInt8, _ line: Line, _ arrival: Arrival, now: [UInt8], escaped: Bool) -> [UInt8] {
        let container = arrival.item.inbox.container
        let shown = { (bytes: [UInt8]) in escaped ? TerminalText.escaped(bytes) : bytes }
        switch letter {
        case UInt8(ascii: "e"): return Array(line.event.utf8)
        case UInt8(ascii: "a"): return shown(Array(container.path(line.place).utf8) + [0x2F] + line.name.bytes)
        case UInt8(ascii: "p"):
            return shown(Array(line.place.relativePath(appName: container.appName).utf8) + [0x2F] + line.name.bytes)
        case UInt8(ascii: "f"): return shown(line.name.bytes)
        case UInt8(ascii: "t"): return now
        case UInt8(ascii: "d"): return Array((arrival.disposition ?? .keep).rawValue.utf8)
        case UInt8(ascii: "s"): return Array(String(arrival.item.size).utf8)
        case UInt8(ascii: "y"): return Array(arrival.type.utf8)
        case UInt8(ascii: "i"): return Array(Identity(arrival.item.status).text.utf8)
        default: return []
        }
    }
}
