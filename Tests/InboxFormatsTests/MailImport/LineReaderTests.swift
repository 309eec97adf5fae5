import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxFormats

/// `LineReader` hands over a range's lines as a plain split of its bytes does, whatever the range's length (its
/// buffer is sized to it) and wherever long lines fall.
@Suite struct LineReaderTests {
    struct Line: Equatable {
        let head: [UInt8]
        let truncated: Bool
        let restIsWhitespace: Bool
        let length: Int
    }

    /// Lines short and long (past `headLimit`, with and without only blanks after the head), the last without `\n`.
    static func text() -> [UInt8] {
        let limit = LineReader.headLimit
        var lines: [[UInt8]] = [Array("From: a@example.org\r".utf8), [], Array("short".utf8)]
        lines.append(pattern(limit + 5_000, seed: 1).map { $0 == 0x0A ? 0x41 : $0 })
        lines.append(Array(repeating: 0x42, count: limit) + Array(" \t\r ".utf8))
        lines.append(Array(repeating: 0x43, count: 3 * limit))
        lines += (0..<300).map { Array("line \($0) ".utf8) + Array(repeating: 0x44, count: $0 * 7) }
        lines.append(Array("no newline at the end".utf8))
        return Array(lines.map { $0 + [0x0A] }.joined().dropLast())
    }

    /// The lines of `bytes`, each whole and cut to its head: the reader may hand a line longer than `headLimit`
    /// over either way (whole when it is in the buffer at once).
    static func split(_ bytes: ArraySlice<UInt8>) -> [(whole: Line, cut: Line)] {
        var lines: [(Line, Line)] = []
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let newline = bytes[start...].firstIndex(of: 0x0A)
            let stop = newline ?? bytes.endIndex
            let line = bytes[start..<stop]
            let length = stop - start + (newline == nil ? 0 : 1)
            let whole = Line(head: Array(line), truncated: false, restIsWhitespace: true, length: length)
            let cut = Line(
                head: Array(line.prefix(LineReader.headLimit)), truncated: true,
                restIsWhitespace: line.dropFirst(LineReader.headLimit).allSatisfy(LineReader.isWhitespace),
                length: length)
            lines.append((whole, line.count > LineReader.headLimit ? cut : whole))
            start = stop + 1
        }
        return lines
    }

    @Test func linesAreAPlainSplitWhateverTheRangesLength() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let text = Self.text()
        let path = scratch.path + "/lines"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text)))
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        let ranges: [(Int, Int?)] = [
            (0, nil), (0, text.count), (0, 40), (3, 25_000), (21, 70_000), (100, 300_000), (60_000, nil),
            (text.count - 10, text.count),
        ]
        for (start, end) in ranges {
            var got: [Line] = []
            try LineReader(fd: fd, start: Int64(start), end: end.map(Int64.init)).forEachLine { line in
                got.append(
                    Line(
                        head: Array(line.head), truncated: line.truncated, restIsWhitespace: line.restIsWhitespace,
                        length: line.length))
                return true
            }
            let expected = Self.split(text[start..<Swift.min(end ?? text.count, text.count)])
            let range = "range \(start)..<\(String(describing: end))"
            #expect(got.count == expected.count, "\(range)")
            let wrong = zip(got, expected).enumerated().first { $1.0 != $1.1.whole && $1.0 != $1.1.cut }
            #expect(wrong == nil, "\(range): line \(wrong?.offset ?? -1) differs")
        }
    }
}
