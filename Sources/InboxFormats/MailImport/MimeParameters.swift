import InboxKit

/// A raw header made safe for GMime's C strings (ARCHITECTURE.md, "Mail import").
enum MimeParameters {
    /// `raw` (a header's value as the file holds it) with every NUL, however it is written, made `_`: GMime hands
    /// names over as C strings, where a NUL would silently cut the name short. A raw NUL byte, an RFC 2231 `%00`, and
    /// an RFC 2047 encoded word (Q or B, in any charset) that decodes to a NUL, which is written again as UTF-8.
    static func withoutNul(_ raw: [UInt8]) -> [UInt8] {
        withoutEncodedWordNul(withoutPercentNul(raw.map { $0 == 0 ? UInt8(ascii: "_") : $0 }))
    }

    /// `raw` with each `%00` of an RFC 2231 extended value (after `name*=` or `name*N*=`) written `%5F` (`_`).
    private static func withoutPercentNul(_ raw: [UInt8]) -> [UInt8] {
        var result = raw
        var quoted = false
        var extended = false
        var index = 0
        while index < result.count {
            let byte = result[index]
            if byte == UInt8(ascii: "\"") {
                quoted.toggle()
            } else if !quoted && byte == UInt8(ascii: ";") {
                extended = false
            } else if !quoted && byte == UInt8(ascii: "=") && index > 0 && result[index - 1] == UInt8(ascii: "*") {
                extended = true
            } else if extended && byte == UInt8(ascii: "%") && index + 2 < result.count
                && result[index + 1] == UInt8(ascii: "0") && result[index + 2] == UInt8(ascii: "0")
            {
                result[index + 1] = UInt8(ascii: "5")
                result[index + 2] = UInt8(ascii: "F")
            }
            index += 1
        }
        return result
    }

    /// `raw` with each RFC 2047 encoded word whose text holds a NUL written again as UTF-8 with `_` for it.
    private static func withoutEncodedWordNul(_ raw: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index < raw.count {
            if raw[index] == UInt8(ascii: "="), let (word, end) = EncodedWord.parse(raw, at: index),
                let safe = word.withoutNul()
            {
                result += safe
                index = end
            } else {
                result.append(raw[index])
                index += 1
            }
        }
        return result
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }

    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }
}
