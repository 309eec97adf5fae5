/// The quantities the command line takes: durations and sizes, each a number with at most one unit (`clean
/// --inbox-max-age 30d`, `import --max-bytes 512M`).
package enum Quantity {
    /// Seconds from plain `3600` or a number with one unit: `45s`, `10m`, `12h`, `30d`, `2w`.
    /// Nil for anything else, a negative number, or a value past `Int64.max`.
    package static func seconds(from text: String) -> Int64? {
        parse(text, units: ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800])
    }

    /// Bytes from plain `1048576` or a number with a binary unit: `64K`, `512M`, `1G`, `2T` (also `512MiB`,
    /// lower case allowed). Nil for anything else, a negative number, or a value past `Int64.max`.
    package static func bytes(from text: String) -> Int64? {
        let units: [Character: Int64] = ["k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40]
        var text = Substring(text.lowercased())
        if text.hasSuffix("ib") {
            text = text.dropLast(2)
            guard let unit = text.last, units[unit] != nil else { return nil }
        }
        return parse(text, units: units)
    }

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
