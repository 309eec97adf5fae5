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
