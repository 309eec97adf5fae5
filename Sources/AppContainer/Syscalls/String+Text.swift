/// Three of Foundation's string operations, for the targets that import FoundationEssentials only (ARCHITECTURE.md,
/// "Modules"), which lacks them.
extension String {
    /// Every occurrence of `target` replaced by `replacement`, compared scalar by scalar as Foundation's
    /// `replacingOccurrences(of:with:)` compares (so a `\n` inside `\r\n` is found too).
    package func replacingEvery(_ target: String, with replacement: String) -> String {
        var result = self
        result.unicodeScalars = result.unicodeScalars.replacing(target.unicodeScalars, with: replacement.unicodeScalars)
        return result
    }

    /// Cut or padded with spaces to `width` characters, as Foundation's `padding(toLength:withPad:startingAt:)`
    /// with a pad of `" "` gives it.
    package func padded(to width: Int) -> String {
        String(prefix(width)) + String(repeating: " ", count: max(0, width - count))
    }

    /// Without the white space and newlines at either end, as Foundation's
    /// `trimmingCharacters(in: .whitespacesAndNewlines)` gives it.
    package var trimmingWhitespace: Substring {
        let start = unicodeScalars.firstIndex { !$0.properties.isWhitespace } ?? endIndex
        let end = unicodeScalars.lastIndex { !$0.properties.isWhitespace }.map { unicodeScalars.index(after: $0) }
        return self[start..<max(start, end ?? start)]
    }
}
