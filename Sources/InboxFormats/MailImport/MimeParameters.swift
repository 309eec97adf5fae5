import CGMime
import InboxKit

/// What GMime's parser makes of a header block, by its last Content-Type field and its first
/// Content-Transfer-Encoding field (ARCHITECTURE.md, "Mail import").
enum PartKind: Equatable {
    case leaf
    /// A message of its own: `message/rfc822`, `rfc2822`, `global` or `news`, not base64, quoted-printable or
    /// uuencoded; a part without a readable Content-Type inside a `multipart/digest`.
    case message
    /// `boundary` as GMime follows it (nil: none, and GMime reads the whole body as the preamble).
    case multipart(boundary: [UInt8]?, isDigest: Bool)
}

/// Reads header blocks' types with GMime's own functions, the ones its parser calls, so the structure scan and
/// GMime agree on every spelling (comments, encoded words, folding, case, quoting): the type by
/// `g_mime_content_type_parse` on the raw value, the boundary from the value unfolded and decoded, as the
/// part's own Content-Type is (ARCHITECTURE.md, "Mail import").
final class ContentTypeReading {
    private let options: OpaquePointer
    /// Set by GMime's warning callback when a raw value is no content type at all.
    private let invalid = UnsafeMutablePointer<Bool>.allocate(capacity: 1)

    init() {
        GMimeLibrary.ensureInitialised()
        options = g_mime_parser_options_new()
        invalid.initialize(to: false)
        g_mime_parser_options_set_warning_callback(
            options,
            { _, code, _, flag in
                if code == GMIME_WARN_INVALID_CONTENT_TYPE { flag?.assumingMemoryBound(to: Bool.self).pointee = true }
            }, invalid)
    }

    deinit {
        g_mime_parser_options_free(options)
        invalid.deallocate()
    }

    /// The kind of part whose header block has these fields (each whole: name, `:`, value, line ends).
    func kind(contentType: [UInt8]?, transferEncoding: [UInt8]?, inDigest: Bool) -> PartKind {
        guard let type = contentType.flatMap(Self.value).map(parsed) else { return inDigest ? .message : .leaf }
        defer { g_object_unref(type.pointer) }
        if type.invalid { return inDigest ? .message : .leaf }
        let media = GMimeLibrary.text(g_mime_content_type_get_media_type(type.pointer))?.lowercased() ?? ""
        let subtype = GMimeLibrary.text(g_mime_content_type_get_media_subtype(type.pointer))?.lowercased() ?? ""
        if media == "multipart" {
            return multipart(contentType.flatMap(Self.value) ?? [])
        }
        guard media == "message", ["rfc822", "rfc2822", "global", "news"].contains(subtype) else { return .leaf }
        if let encoding = transferEncoding.flatMap(Self.value) {
            let cString = encoding.map { CChar(bitPattern: $0) } + [0]
            switch g_mime_content_encoding_from_string(cString) {
            case GMIME_CONTENT_ENCODING_BASE64, GMIME_CONTENT_ENCODING_QUOTEDPRINTABLE, GMIME_CONTENT_ENCODING_UUENCODE:
                return .leaf
            default: break
            }
        }
        return .message
    }

    /// The multipart's own Content-Type, as GMime sets it on the part: the value unfolded, encoded words decoded.
    private func multipart(_ raw: [UInt8]) -> PartKind {
        let cString = raw.map { CChar(bitPattern: $0) } + [0]
        guard let unfolded = g_mime_utils_header_unfold(cString) else { return .multipart(boundary: nil, isDigest: false) }
        defer { g_free(unfolded) }
        guard let decoded = g_mime_utils_header_decode_text(options, unfolded) else {
            return .multipart(boundary: nil, isDigest: false)
        }
        defer { g_free(decoded) }
        guard let type = g_mime_content_type_parse(options, decoded) else {
            return .multipart(boundary: nil, isDigest: false)
        }
        defer { g_object_unref(type) }
        let boundary = GMimeLibrary.bytes(g_mime_content_type_get_parameter(type, "boundary"))
        return .multipart(boundary: boundary, isDigest: g_mime_content_type_is_type(type, "multipart", "digest") != 0)
    }

    private func parsed(_ raw: [UInt8]) -> (pointer: UnsafeMutablePointer<GMimeContentType>, invalid: Bool) {
        invalid.pointee = false
        let cString = raw.map { CChar(bitPattern: $0) } + [0]
        return (g_mime_content_type_parse(options, cString), invalid.pointee)
    }

    /// A field's raw value as GMime's parser keeps it: what follows the `:`, up to a NUL (a C string); nil when
    /// GMime does not read the line as a field (a control character or a space inside the name).
    static func value(_ field: [UInt8]) -> [UInt8]? {
        var index = 0
        var blank = false
        while index < field.count, field[index] != UInt8(ascii: ":") {
            let byte = field[index]
            if byte == 0x20 || byte == 0x09 {
                blank = true
            } else if blank || byte < 0x20 || byte == 0x7F {
                return nil
            }
            index += 1
        }
        guard index < field.count else { return nil }
        return Array(field[(index + 1)...].prefix { $0 != 0 })
    }
}

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
                    let high = MimeParameters.hexValue(text[index + 1]), let low = MimeParameters.hexValue(text[index + 2])
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
                    position <= chunk.count ? alphabet[Int(value >> (18 - 6 * UInt32(position)) & 0x3F)] : UInt8(ascii: "="))
            }
            index += 3
        }
        return String(decoding: text, as: UTF8.self)
    }
}
