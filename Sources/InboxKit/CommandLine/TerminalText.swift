/// Names as a person's terminal should show them (ARCHITECTURE.md, "The command line"): a name from mail may
/// hold a newline or an escape sequence, which must not move the cursor or recolour the screen.
package enum TerminalText {
    /// `bytes` with every control character (C0, DEL, C1) and every byte that is not part of valid UTF-8 written
    /// as `\n`, `\t`, `\r` or `\xHH`, and a backslash as `\\`, so what is shown reads back to one exact name.
    package static func escaped(_ bytes: [UInt8]) -> [UInt8] {
        escape(bytes, backslash: true, quote: false)
    }

    /// A message for a person (`inbox: …` on stderr): its control characters (C0, DEL, C1) escaped as `escaped`
    /// writes them, so that it stays one line and moves no cursor; a backslash is left as it is, for a message
    /// may hold a name already escaped.
    package static func escapedControls(in text: String) -> String {
        String(decoding: escape(Array(text.utf8), backslash: false, quote: false), as: UTF8.self)
    }

    /// `text` between double quotes, escaped as `escaped` writes it and a double quote as `\"` (`inbox log`'s
    /// values).
    package static func quoted(_ text: String) -> String {
        "\"" + String(decoding: escape(Array(text.utf8), backslash: true, quote: true), as: UTF8.self) + "\""
    }

    private static func escape(_ bytes: [UInt8], backslash: Bool, quote: Bool) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let length = validSequenceLength(bytes, at: index)
            guard length > 0 else {
                appendHex(bytes[index], to: &output)
                index += 1
                continue
            }
            let sequence = bytes[index..<index + length]
            let scalar = String(decoding: sequence, as: UTF8.self).unicodeScalars.first?.value ?? 0xFFFD
            switch scalar {
            case 0x0A: output += Array(#"\n"#.utf8)
            case 0x09: output += Array(#"\t"#.utf8)
            case 0x0D: output += Array(#"\r"#.utf8)
            case 0x5C where backslash: output += Array(#"\\"#.utf8)
            case 0x22 where quote: output += Array(#"\""#.utf8)
            case 0..<0x20, 0x7F: appendHex(UInt8(scalar), to: &output)
            case 0x80...0x9F: for byte in sequence { appendHex(byte, to: &output) }
            default: output += sequence
            }
            index += length
        }
        return output
    }

    private static func appendHex(_ byte: UInt8, to output: inout [UInt8]) {
        let digits = Array("0123456789abcdef".utf8)
        output += [UInt8(ascii: "\\"), UInt8(ascii: "x"), digits[Int(byte >> 4)], digits[Int(byte & 0xF)]]
    }

    /// How many bytes the valid UTF-8 sequence at `index` takes; 0 when the byte there does not start one.
    private static func validSequenceLength(_ bytes: [UInt8], at index: Int) -> Int {
        let lead = bytes[index]
        let length: Int
        switch lead {
        case 0..<0x80: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0...0xEF: length = 3
        case 0xF0...0xF4: length = 4
        default: return 0
        }
        guard index + length <= bytes.count else { return 0 }
        return String(validating: bytes[index..<index + length], as: UTF8.self) != nil ? length : 0
    }
}
