import InboxKit

/// The little of a header's MIME parameters the structure scan needs before GMime reads the message: the
/// media type and the `boundary` (RFC 2045 §5.1, RFC 2231 continuations and extended values), and a raw header
/// made safe for GMime's C strings (ARCHITECTURE.md, "Mail import").
enum MimeParameters {
    /// The lowercased `type/subtype` at the start of a Content-Type value, and its parameters, names lowercased.
    static func parse(_ value: [UInt8]) -> (mediaType: [UInt8], parameters: [(name: [UInt8], value: [UInt8])]) {
        var index = 0
        var mediaType: [UInt8] = []
        while index < value.count, value[index] != UInt8(ascii: ";") {
            let byte = value[index]
            if !isSpace(byte) { mediaType.append(lowercased(byte)) }
            index += 1
        }
        var parameters: [(name: [UInt8], value: [UInt8])] = []
        while index < value.count {
            index += 1  // the ';'
            var name: [UInt8] = []
            while index < value.count, value[index] != UInt8(ascii: "="), value[index] != UInt8(ascii: ";") {
                if !isSpace(value[index]) { name.append(lowercased(value[index])) }
                index += 1
            }
            guard index < value.count, value[index] == UInt8(ascii: "=") else { continue }
            index += 1
            while index < value.count, isSpace(value[index]) { index += 1 }
            var parameter: [UInt8] = []
            if index < value.count, value[index] == UInt8(ascii: "\"") {
                index += 1
                while index < value.count, value[index] != UInt8(ascii: "\"") {
                    if value[index] == UInt8(ascii: "\\"), index + 1 < value.count { index += 1 }
                    parameter.append(value[index])
                    index += 1
                }
                while index < value.count, value[index] != UInt8(ascii: ";") { index += 1 }
            } else {
                while index < value.count, value[index] != UInt8(ascii: ";") {
                    parameter.append(value[index])
                    index += 1
                }
                while let last = parameter.last, isSpace(last) { parameter.removeLast() }
            }
            parameters.append((name, parameter))
        }
        return (mediaType, parameters)
    }

    /// The value of parameter `name`: plain, RFC 2231 extended (`name*`), or continued (`name*0`, `name*1*`…).
    static func value(of name: String, in parameters: [(name: [UInt8], value: [UInt8])]) -> [UInt8]? {
        let plain = Array(name.utf8)
        if let found = parameters.first(where: { $0.name == plain }) { return found.value }
        if let found = parameters.first(where: { $0.name == plain + [UInt8(ascii: "*")] }) {
            return percentDecoded(withoutCharset(found.value))
        }
        var joined: [UInt8] = []
        var section = 0
        while section <= parameters.count {
            let stem = plain + [UInt8(ascii: "*")] + Array(String(section).utf8)
            if let found = parameters.first(where: { $0.name == stem }) {
                joined += found.value
            } else if let found = parameters.first(where: { $0.name == stem + [UInt8(ascii: "*")] }) {
                joined += percentDecoded(section == 0 ? withoutCharset(found.value) : found.value)
            } else {
                break
            }
            section += 1
        }
        return section > 0 ? joined : nil
    }

    /// `raw` with each `%00` of an RFC 2231 extended value (after `name*=` or `name*N*=`) written `%5F` (`_`): GMime
    /// hands names over as C strings, where a NUL would silently cut the name short.
    static func withoutEncodedNul(_ raw: [UInt8]) -> [UInt8] {
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

    private static func withoutCharset(_ value: [UInt8]) -> [UInt8] {
        let quotes = value.indices.filter { value[$0] == UInt8(ascii: "'") }
        guard quotes.count >= 2 else { return value }
        return Array(value[(quotes[1] + 1)...])
    }

    private static func percentDecoded(_ value: [UInt8]) -> [UInt8] {
        var result: [UInt8] = []
        var index = 0
        while index < value.count {
            if value[index] == UInt8(ascii: "%"), index + 2 < value.count,
                let high = hexValue(value[index + 1]), let low = hexValue(value[index + 2])
            {
                result.append(high << 4 | low)
                index += 3
            } else {
                result.append(value[index])
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
