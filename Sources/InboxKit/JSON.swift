import AppContainer
import Foundation

/// Hand-written JSON for output whose key order must stay stable.
enum JSON {
    /// `text` as a JSON string literal, quotes included.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case let c where c.value < 0x20:
                let hex = String(c.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }

    /// `"key":"<text>"` for a path, plus `"key_b64":"<exact bytes>"` when the bytes are not valid UTF-8.
    static func pathMember(_ key: String, _ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        var member = quoted(key) + ":" + quoted(text)
        if String(validating: bytes, as: UTF8.self) == nil {
            member += "," + quoted(key + "_b64") + ":" + quoted(Data(bytes).base64EncodedString())
        }
        return member
    }
}

extension ListedItem {
    /// `{"name":…,"path":…,"size":…,"modified":…}` as `ls --json` prints it (DESIGN §7).
    public var json: String {
        "{" + JSON.pathMember("name", name.bytes) + "," + JSON.pathMember("path", path) + ",\"size\":\(size),"
            + "\"modified\":" + JSON.quoted(modified.rfc3339) + "}"
    }
}
