/// Help text fitted to a width in columns (ARCHITECTURE.md, "The command line"). Widths count Unicode scalars,
/// which is exact for the ASCII the help is written in.
package enum TextWrapping {
    /// `text` broken at spaces into lines of at most `width` columns, the first prefixed by `first` and the
    /// others by `rest`. A word longer than a line stays whole on a line of its own.
    package static func wrap(_ text: String, width: Int, first: String = "", rest: String = "") -> [String] {
        // Concrete String and Substring appends only: a generic one looks its types up by name at its first call,
        // a cost `inbox --help` paid at each start (ARCHITECTURE.md, "Start-up and memory").
        var lines: [String] = []
        var line = first
        var columns = first.unicodeScalars.count
        var lineHasWord = false
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            let length = word.unicodeScalars.count
            if lineHasWord, columns + 1 + length > width {
                lines.append(line)
                line = rest
                columns = rest.unicodeScalars.count
                lineHasWord = false
            }
            if lineHasWord {
                line.append(" ")
                columns += 1
            }
            line.append(contentsOf: word)
            columns += length
            lineHasWord = true
        }
        lines.append(line)
        return lines
    }

    /// `lines` joined by newlines, with no newline after the last.
    package static func joined(_ lines: [String]) -> String {
        var text = ""
        for (index, line) in lines.enumerated() {
            if index > 0 { text.append("\n") }
            text.append(line)
        }
        return text
    }

    /// A two-column table, `  key  what it does`, the second column wrapped and aligned. When the keys are too
    /// wide to leave 24 columns (and the longest word) beside them, each text goes below its key, indented further.
    package static func table(_ rows: [(String, String)], width: Int, indent: Int = 2) -> [String] {
        let keyWidth = rows.map { $0.0.unicodeScalars.count }.max() ?? 0
        let column = indent + keyWidth + 2
        let margin = String(repeating: " ", count: indent)
        let longestWord = rows.flatMap { $0.1.split(separator: " ") }.map { $0.unicodeScalars.count }.max() ?? 0
        var lines: [String] = []
        for (key, text) in rows {
            let length = key.unicodeScalars.count
            if width - column >= max(24, longestWord) {
                let padded = margin + key + String(repeating: " ", count: keyWidth - length + 2)
                lines += wrap(text, width: width, first: padded, rest: String(repeating: " ", count: column))
            } else {
                lines.append(margin + key)
                let deeper = String(repeating: " ", count: indent + 4)
                lines += wrap(text, width: width, first: deeper, rest: deeper)
            }
        }
        return lines
    }
}
