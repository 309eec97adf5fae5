import FoundationEssentials

/// Any JSON value, as `JSONDecoder` reads it and `JSONEncoder` writes it: what a log line holds beyond the
/// fields this package writes (ARCHITECTURE.md, "The event log"), and the report of `inbox status --json`.
enum JSONValue: Codable, Equatable {
    case string(String)
    case integer(Int64)
    /// An integer above `Int64.max`.
    case unsigned(UInt64)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    /// Tries the kinds the log holds most first: a string, an integer.
    init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer()
        if value.decodeNil() {
            self = .null
        } else if let text = try? value.decode(String.self) {
            self = .string(text)
        } else if let integer = try? value.decode(Int64.self) {
            self = .integer(integer)
        } else if let flag = try? value.decode(Bool.self) {
            self = .bool(flag)
        } else if let integer = try? value.decode(UInt64.self) {
            self = .unsigned(integer)
        } else if let number = try? value.decode(Double.self) {
            self = .number(number)
        } else if let array = try? value.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try value.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var value = encoder.singleValueContainer()
        switch self {
        case .string(let text): try value.encode(text)
        case .integer(let integer): try value.encode(integer)
        case .unsigned(let integer): try value.encode(integer)
        case .number(let number): try value.encode(number)
        case .bool(let flag): try value.encode(flag)
        case .null: try value.encodeNil()
        case .array(let array): try value.encode(array)
        case .object(let object): try value.encode(object)
        }
    }

    /// The value as text: strings as they are, numbers and booleans printed, `null`, arrays and objects as compact
    /// JSON with sorted keys.
    var text: String {
        switch self {
        case .string(let text): return text
        case .integer(let integer): return String(integer)
        case .unsigned(let integer): return String(integer)
        case .number(let number): return String(number)
        case .bool(let flag): return flag ? "true" : "false"
        case .null: return "null"
        case .array, .object: return json(escapingSlashes: true)
        }
    }

    /// Compact JSON with sorted keys; `/` written as `\/` when `escapingSlashes`.
    func json(escapingSlashes: Bool) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = escapingSlashes ? [.sortedKeys] : [.sortedKeys, .withoutEscapingSlashes]
        // Every value here can be encoded: no non-finite number comes out of `JSONDecoder`, nor is put in one.
        guard let data = try? encoder.encode(self) else { return "null" }
        return String(decoding: data, as: UTF8.self)
    }
}

extension JSONValue {
    /// The members of a one-level object of unescaped strings, integers, booleans and nulls, with no white space and
    /// no key twice: the lines `EventEncoding` writes, read as `JSONDecoder` reads them without the cost of a thrown
    /// error per number. Nil for anything else (an escape, a nested value, a fraction), which `JSONDecoder` reads.
    static func flatObject(_ line: ArraySlice<UInt8>) -> [String: JSONValue]? {
        var index = line.startIndex
        func take(_ byte: UInt8) -> Bool {
            guard index < line.endIndex, line[index] == byte else { return false }
            index += 1
            return true
        }
        /// An unescaped string of valid UTF-8 without control characters, after its opening quote.
        func string() -> String? {
            let start = index
            while index < line.endIndex, line[index] != UInt8(ascii: "\"") {
                guard line[index] >= 0x20, line[index] != UInt8(ascii: "\\") else { return nil }
                index += 1
            }
            guard index < line.endIndex else { return nil }
            defer { index += 1 }
            return String(validating: line[start..<index], as: UTF8.self)
        }
        guard take(UInt8(ascii: "{")) else { return nil }
        var members: [String: JSONValue] = [:]
        if take(UInt8(ascii: "}")) { return index == line.endIndex ? members : nil }
        repeat {
            guard take(UInt8(ascii: "\"")), let key = string(), members[key] == nil, take(UInt8(ascii: ":")),
                index < line.endIndex
            else { return nil }
            switch line[index] {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = string() else { return nil }
                members[key] = .string(text)
            case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "n"):
                let rest = line[index...]
                if rest.starts(with: "true".utf8) {
                    members[key] = .bool(true)
                    index += 4
                } else if rest.starts(with: "false".utf8) {
                    members[key] = .bool(false)
                    index += 5
                } else if rest.starts(with: "null".utf8) {
                    members[key] = .null
                    index += 4
                } else {
                    return nil
                }
            default:
                let start = index
                _ = take(UInt8(ascii: "-"))
                let digits = index
                while index < line.endIndex, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(line[index]) {
                    index += 1
                }
                // No digit, a leading zero, or more than Int64 holds: left to JSONDecoder.
                guard index > digits, line[digits] != UInt8(ascii: "0") || index == digits + 1,
                    let number = Int64(String(decoding: line[start..<index], as: UTF8.self))
                else { return nil }
                members[key] = .integer(number)
            }
        } while take(UInt8(ascii: ","))
        guard take(UInt8(ascii: "}")), index == line.endIndex else { return nil }
        return members
    }
}
