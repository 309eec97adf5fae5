import AppContainer
import InboxKit

/// The arguments of one command, parsed by hand: flags, options with values, and positionals (raw bytes).
package struct Arguments {
    package var flags: Set<String> = []
    /// Each option's value; the last one when it is given more than once (`repeated` has them all).
    var values: [String: [UInt8]] = [:]
    /// Every value of each option, in order.
    var repeated: [String: [[UInt8]]] = [:]
    package var positionals: [[UInt8]] = []

    /// What a command accepts.
    struct Spec {
        var flags: Set<String> = []
        var valued: Set<String> = []
        var positionals: ClosedRange<Int> = 0...0
    }

    /// Parses `words` against `spec`; a word not in the spec is a usage error (exit 64).
    init(_ words: ArraySlice<[UInt8]>, spec: Spec) throws(ContainerError) {
        var rest = words[...]
        var onlyPositionals = false
        while let word = rest.popFirst() {
            let text = String(decoding: word, as: UTF8.self)
            if onlyPositionals || !text.hasPrefix("-") || text == "-" {
                positionals.append(word)
                continue
            }
            if text == "--" {
                onlyPositionals = true
                continue
            }
            let (key, inline) = Arguments.split(word, valued: spec.valued)
            if spec.flags.contains(key) {
                guard inline == nil else { throw ContainerError(.usage, "'\(key)' takes no value") }
                flags.insert(key)
            } else if spec.valued.contains(key) {
                guard let value = inline ?? rest.popFirst() else {
                    throw ContainerError(.usage, "'\(key)' needs a value")
                }
                values[key] = value
                repeated[key, default: []].append(value)
            } else {
                throw Arguments.unknownOption(key, among: spec.flags.union(spec.valued).union(["--help"]).sorted())
            }
        }
        if positionals.count < spec.positionals.lowerBound {
            throw ContainerError(.usage, "missing argument")
        }
        if positionals.count > spec.positionals.upperBound {
            let extra = String(decoding: positionals[spec.positionals.upperBound], as: UTF8.self)
            throw ContainerError(.usage, "unexpected argument '\(extra)'")
        }
    }

    /// A usage error for an option not in `known`, suggesting the nearest one (ARCHITECTURE.md, "The command
    /// line").
    static func unknownOption(_ option: String, among known: [String]) -> ContainerError {
        guard let near = Suggestion.closest(to: option, among: known) else {
            return ContainerError(.usage, "unknown option '\(option)'")
        }
        return ContainerError(.usage, "unknown option '\(option)'; did you mean '\(near)'?")
    }

    /// `--key=value` as ("--key", value); `-n5`, for a short option `-n` that takes a value, as ("-n", "5");
    /// `--key` as ("--key", nil).
    private static func split(_ word: [UInt8], valued: Set<String>) -> (String, [UInt8]?) {
        if word.starts(with: [0x2D, 0x2D]), let equals = word.firstIndex(of: 0x3D) {
            return (String(decoding: word[..<equals], as: UTF8.self), Array(word[(equals + 1)...]))
        }
        let short = String(decoding: word.prefix(2), as: UTF8.self)
        if word.count > 2, word[1] != 0x2D, valued.contains(short) {
            return (short, Array(word[2...]))
        }
        return (String(decoding: word, as: UTF8.self), nil)
    }

    /// Every value given to `key`, in order, each once, exact to the byte: paths (ARCHITECTURE.md, "Paths are
    /// bytes").
    package func paths(_ key: String) -> [[UInt8]] {
        var seen: Set<[UInt8]> = []
        return (repeated[key] ?? []).filter { seen.insert($0).inserted }
    }

    /// An option's value exact to the byte: a path (ARCHITECTURE.md, "Paths are bytes").
    package func path(_ key: String) -> [UInt8]? { values[key] }

    package func string(_ key: String) -> String? {
        values[key].map { String(decoding: $0, as: UTF8.self) }
    }

    /// An option's value as a whole number; a usage error when it is not one.
    package func integer(_ key: String) throws(ContainerError) -> UInt64? {
        guard let text = string(key) else { return nil }
        guard let value = UInt64(text) else {
            throw ContainerError(.usage, "'\(key)' needs a whole number, not '\(text)'")
        }
        return value
    }

    /// The value of `key` as seconds above zero, a fraction allowed (`0.5`); nil when absent.
    func seconds(_ key: String) throws(ContainerError) -> Duration? {
        guard let text = string(key) else { return nil }
        guard let value = Double(text), value.isFinite, value > 0, value <= 86_400, text.first?.isNumber == true else {
            throw ContainerError(.usage, "'\(key)' needs a number of seconds above 0 (at most 86400), not '\(text)'")
        }
        return .nanoseconds(Int64((value * 1e9).rounded()))
    }
}
