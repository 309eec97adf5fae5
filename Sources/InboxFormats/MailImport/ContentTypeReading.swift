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
        guard let raw = contentType.flatMap(Self.value) else { return inDigest ? .message : .leaf }
        // Outside a digest, GMime makes a leaf of every type but a multipart or a message, and of one it cannot
        // read: a value that plainly starts with another type needs no parse.
        if !inDigest, let media = Self.plainMediaType(raw), media != "multipart", media != "message" { return .leaf }
        return kindByGMime(raw, transferEncoding: transferEncoding, inDigest: inDigest)
    }

    /// The media type a raw value starts with, lowercased, when it plainly does: blanks, then letters, digits and
    /// `-`, then `/`. Nil for anything else (a comment, an encoded word, a folded line), which GMime reads.
    static func plainMediaType(_ raw: [UInt8]) -> String? {
        guard let start = raw.firstIndex(where: { $0 != 0x20 && $0 != 0x09 }) else { return nil }
        let isTokenByte = { (byte: UInt8) in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D
        }
        guard let slash = raw[start...].firstIndex(where: { !isTokenByte($0) }), slash > start,
            raw[slash] == UInt8(ascii: "/")
        else { return nil }
        return String(decoding: raw[start..<slash].map(MimeParameters.lowercased), as: UTF8.self)
    }

    /// `kind` as GMime's own functions read the raw value.
    func kindByGMime(_ raw: [UInt8], transferEncoding: [UInt8]?, inDigest: Bool) -> PartKind {
        let type = parsed(raw)
        defer { g_object_unref(type.pointer) }
        if type.invalid { return inDigest ? .message : .leaf }
        let media = GMimeLibrary.text(g_mime_content_type_get_media_type(type.pointer))?.lowercased() ?? ""
        let subtype = GMimeLibrary.text(g_mime_content_type_get_media_subtype(type.pointer))?.lowercased() ?? ""
        if media == "multipart" { return multipart(raw) }
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
        guard let unfolded = g_mime_utils_header_unfold(cString) else {
            return .multipart(boundary: nil, isDigest: false)
        }
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
