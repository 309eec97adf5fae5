import InboxKit

/// uuencode (`Content-Transfer-Encoding: x-uuencode`) read a line at a time between `begin MODE NAME` and `end`,
/// as Python's `binascii.a2b_uu` reads a line: characters missing at the end of a line are spaces that a mail
/// system stripped, so a short line decodes in full (GMime 3.2.13 drops such lines). Unlike Python, a line
/// left empty by that stripping (a zero-length line, ` `) decodes to nothing, not to 42 zero bytes.
struct UUDecoder: TransferDecoder {
    private enum State {
        case seekingBegin
        case data
        case done
    }

    /// The most of a line kept: a uuencoded line is at most 1 + 84 characters; the rest is ignored.
    private static let lineLimit = 128
    private var state = State.seekingBegin
    private var line: [UInt8] = []
    private var lineOverflowed = false

    /// Whether a `begin` line was found: a part without one is not uuencoded and is delivered as it is.
    var foundBegin: Bool { if case .seekingBegin = state { false } else { true } }

    mutating func decode(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) {
        for byte in input {
            if byte == 0x0A {
                takeLine(into: &output)
            } else if line.count < Self.lineLimit {
                line.append(byte)
            } else {
                lineOverflowed = true
            }
        }
    }

    mutating func finish(into output: inout [UInt8]) {
        if !line.isEmpty || lineOverflowed { takeLine(into: &output) }
    }

    private mutating func takeLine(into output: inout [UInt8]) {
        defer {
            line.removeAll(keepingCapacity: true)
            lineOverflowed = false
        }
        switch state {
        case .seekingBegin:
            if Self.isBegin(line) { state = .data }
        case .data:
            var trimmed = line[...]
            while let last = trimmed.last, [0x20, 0x09, 0x0D, 0x0C].contains(last) { trimmed = trimmed.dropLast() }
            while let first = trimmed.first, [0x20, 0x09, 0x0D, 0x0C].contains(first) { trimmed = trimmed.dropFirst() }
            if trimmed.elementsEqual("end".utf8) {
                state = .done
            } else {
                Self.decodeLine(line, into: &output)
            }
        case .done:
            break
        }
    }

    /// `begin`, a space, an octal mode, a space, then the name.
    private static func isBegin(_ line: [UInt8]) -> Bool {
        let fields = line.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0].elementsEqual("begin".utf8), !fields[1].isEmpty else { return false }
        return fields[1].allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "7") }
    }

    /// The first character says how many bytes the line holds; each further character holds 6 bits.
    private static func decodeLine(_ line: [UInt8], into output: inout [UInt8]) {
        guard let first = line.first, first != 0x0D else { return }
        var remaining = Int((first &- 0x20) & 0x3F)
        var bits: UInt32 = 0
        var bitCount = 0
        var index = 1
        while remaining > 0 {
            let character = index < line.count ? line[index] : 0x20
            let value = character == 0x0D ? 0 : UInt32((character &- 0x20) & 0x3F)
            index += 1
            bits = (bits << 6 | value) & 0xFFFFFF
            bitCount += 6
            if bitCount >= 8 {
                bitCount -= 8
                output.append(UInt8(truncatingIfNeeded: bits >> UInt32(bitCount)))
                remaining -= 1
            }
        }
    }
}
