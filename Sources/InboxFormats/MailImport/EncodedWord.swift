import CGMime
import InboxKit

/// One RFC 2047 encoded word, `=?charset?encoding?text?=`.
struct EncodedWord {
    let charset: [UInt8]
    let decoded: [UInt8]

    /// The word starting at `start` of `bytes` and the index after it; nil when none starts there.
    static func parse(_ bytes: [UInt8], at start: Int) -> (EncodedWord, Int)? {
        guard start + 1 < bytes.count, bytes[start] == UInt8(ascii: "="), bytes[start + 1] == UInt8(ascii: "?")
        else { return nil }
        var fields: [[UInt8]] = [[]]
        var index = start + 2
        while index < bytes.count, fields.count <= 3 {
            let byte = bytes[index]
            if byte == UInt8(ascii: "?") {
                if fields.count == 3 {
                    guard index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "=") else { return nil }
                    return decoded(fields).map { ($0, index + 2) }
                }
                fields.append([])
            } else if MimeParameters.isSpace(byte) {
                return nil
            } else {
                fields[fields.count - 1].append(byte)
            }
            index += 1
        }
        return nil
    }

    private static func decoded(_ fields: [[UInt8]]) -> EncodedWord? {
        let charset = Array(fields[0].prefix { $0 != UInt8(ascii: "*") })  // RFC 2231's `*language` left off
        guard !charset.isEmpty, fields[1].count == 1 else { return nil }
        var output: [UInt8] = []
        switch MimeParameters.lowercased(fields[1][0]) {
        case UInt8(ascii: "b"):
            var decoder = Base64Decoder()
            fields[2].withUnsafeBytes { decoder.decode($0, into: &output) }
            decoder.finish(into: &output)
        case UInt8(ascii: "q"):
            var index = 0
            let text = fields[2]
            while index < text.count {
                if text[index] == UInt8(ascii: "="), index + 2 < text.count,
                    let high = MimeParameters.hexValue(text[index + 1]),
                    let low = MimeParameters.hexValue(text[index + 2])
                {
                    output.append(high << 4 | low)
                    index += 3
                } else {
                    output.append(text[index] == UInt8(ascii: "_") ? 0x20 : text[index])
                    index += 1
                }
            }
        default:
            return nil
        }
        return EncodedWord(charset: charset, decoded: output)
    }

    /// The word written again as `=?UTF-8?B?…?=` with each NUL character `_`; nil when it holds no NUL. A charset
    /// GMime cannot convert keeps its name, its NUL bytes made `_`.
    func withoutNul() -> [UInt8]? {
        var charsetName = String(decoding: charset, as: UTF8.self)
        var text = decoded
        if let utf8 = Self.utf8(decoded, from: charsetName) {
            charsetName = "UTF-8"
            text = utf8
        }
        guard text.contains(0) else { return nil }
        let safe = text.map { $0 == 0 ? UInt8(ascii: "_") : $0 }
        return Array("=?\(charsetName)?B?\(Self.base64(safe))?=".utf8)
    }

    /// `bytes` converted from `charset` to UTF-8 by iconv, under the name GMime gives the charset.
    private static func utf8(_ bytes: [UInt8], from charset: String) -> [UInt8]? {
        GMimeLibrary.ensureInitialised()
        guard let name = g_mime_charset_iconv_name(charset) else { return nil }
        var written: gsize = 0
        let converted = bytes.withUnsafeBytes { buffer in
            g_convert(
                buffer.baseAddress?.assumingMemoryBound(to: CChar.self), gssize(buffer.count), "UTF-8", name, nil,
                &written, nil)
        }
        guard let converted else { return nil }
        defer { g_free(converted) }
        return Array(UnsafeRawBufferPointer(start: converted, count: Int(written)))
    }

    private static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var text: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<Swift.min(index + 3, bytes.count)]
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
            for position in 0..<4 {
                text.append(
                    position <= chunk.count
                        ? alphabet[Int(value >> (18 - 6 * UInt32(position)) & 0x3F)] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: text, as: UTF8.self)
    }
}
