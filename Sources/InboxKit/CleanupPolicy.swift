import AppContainer

/// The cleanup policy's units and reasons (DESIGN §5). Its values are `Preferences`: `inboxMaxAge`,
/// `inboxMaxBytes`, `tmpMaxAge` and `cachesMaxBytes`, which `inbox clean` flags can override.
public enum CleanupPolicy {
    /// Seconds from plain `3600` or a number with one unit: `45s`, `10m`, `12h`, `30d`, `2w`.
    /// Nil for anything else, a negative number, or a value past `Int64.max`.
    public static func seconds(from text: String) -> Int64? {
        parse(text, units: ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800])
    }

    /// Bytes from plain `1048576` or a number with a binary unit: `64K`, `512M`, `1G`, `2T` (also `512MiB`,
    /// lower case allowed). Nil for anything else, a negative number, or a value past `Int64.max`.
    public static func bytes(from text: String) -> Int64? {
        let units: [Character: Int64] = ["k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40]
        var text = Substring(text.lowercased())
        if text.hasSuffix("ib") {
            text = text.dropLast(2)
            guard let unit = text.last, units[unit] != nil else { return nil }
        }
        return parse(text, units: units)
    }

    /// `30 days`, `1 day`, `12 hours`, `90 seconds`: the largest unit that divides `seconds` exactly.
    public static func describe(seconds: Int64) -> String {
        let units: [(Int64, String)] = [(604_800, "week"), (86_400, "day"), (3600, "hour"), (60, "minute")]
        for (size, name) in units where seconds != 0 && seconds % size == 0 {
            let count = seconds / size
            return "\(count) \(name)\(count == 1 ? "" : "s")"
        }
        return "\(seconds) second\(seconds == 1 ? "" : "s")"
    }

    /// Why an Inbox item or tmp entry goes: `older than 30 days`.
    static func olderThan(_ seconds: Int64) -> String { "older than \(describe(seconds: seconds))" }

    /// Why the oldest Inbox items go: `inbox over 1073741824 bytes`.
    static func inboxOver(_ bytes: Int64) -> String { "inbox over \(bytes) bytes" }

    /// Why all of tmp goes when no watcher holds the container.
    static let appNotRunning = "tmp: app not running"

    /// Why the least recently used files of Caches go: `caches over 536870912 bytes`.
    static func cachesOver(_ bytes: Int64) -> String { "caches over \(bytes) bytes" }

    /// Digits, then at most one unit from `units`.
    private static func parse(_ text: some StringProtocol, units: [Character: Int64]) -> Int64? {
        var digits = Substring(text)
        var multiplier: Int64 = 1
        if let last = digits.last, let unit = units[last] {
            multiplier = unit
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let number = Int64(digits) else {
            return nil
        }
        let (value, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : value
    }
}
