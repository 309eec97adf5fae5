import AppContainer
import InboxKit

/// An attachment's name by ARCHITECTURE.md, "Mail import" (ARCHITECTURE.md, "Mail import"): the decoded filename reduced to
/// one safe name, or `attachment-N.EXT` for a nameless one. The Inbox's clash naming comes after, at delivery.
enum AttachmentName {
    /// The one safe name left of a decoded filename; nil when nothing is left (`..`, `/`, spaces).
    ///
    /// The ends are trimmed of white space (as Python's `get_filename` does); then the last path component,
    /// `/` and `\` both separating; control characters (C0, DEL, C1) each become `_`; leading dots go; a name
    /// over 255 bytes is cut at a character boundary, its extension (under 32 bytes) kept.
    static func reduced(_ filename: [UInt8]) -> FileName? {
        var scalars = Array(String(decoding: trimmed(filename), as: UTF8.self).unicodeScalars)
        let valid = String(validating: filename, as: UTF8.self) != nil
        var bytes: [UInt8]
        if valid {
            if let separator = scalars.lastIndex(where: { $0 == "/" || $0 == "\\" }) {
                scalars.removeSubrange(...separator)
            }
            bytes = Array(String(String.UnicodeScalarView(scalars.map { isControl($0) ? "_" : $0 })).utf8)
        } else {
            // Not UTF-8 (GMime could not convert it): the same rules on the bytes, C1 as bytes left as they are.
            bytes = trimmed(filename)
            if let separator = bytes.lastIndex(where: { $0 == 0x2F || $0 == 0x5C }) {
                bytes.removeSubrange(...separator)
            }
            bytes = bytes.map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: "_") : $0 }
        }
        while bytes.first == UInt8(ascii: ".") { bytes.removeFirst() }
        if bytes.count > FileName.maxLength {
            let dot = bytes.lastIndex(of: UInt8(ascii: ".")).flatMap { $0 > 0 ? $0 : nil }
            let ext = dot.map { bytes.count - $0 < 32 ? Array(bytes[$0...]) : [] } ?? []
            bytes = FileName.truncated(Array(bytes.dropLast(ext.count)), toAtMost: FileName.maxLength - ext.count) + ext
        }
        return FileName(bytes: bytes)
    }

    /// `attachment-N.EXT`: N counts the message's nameless attachments from 1, EXT is the type's usual extension.
    static func nameless(_ number: Int, contentType: String) -> FileName {
        let name = "attachment-\(number).\(MediaTypeExtensions.usual(for: contentType))"
        return FileName(name) ?? FileName("attachment").unsafelyUnwrapped
    }

    /// C0 controls, DEL and C1 controls: terminal escapes among them.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    /// Without the white space at either end that Python's `str.strip` removes.
    private static func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            var slice = bytes[...]
            while let first = slice.first, first < 0x80, isSpace(Unicode.Scalar(first)) { slice = slice.dropFirst() }
            while let last = slice.last, last < 0x80, isSpace(Unicode.Scalar(last)) { slice = slice.dropLast() }
            return Array(slice)
        }
        var scalars = text.unicodeScalars[...]
        while let first = scalars.first, isSpace(first) { scalars = scalars.dropFirst() }
        while let last = scalars.last, isSpace(last) { scalars = scalars.dropLast() }
        return Array(String(String.UnicodeScalarView(scalars)).utf8)
    }

    /// Python's `str.isspace`: ASCII white space, the separators 0x1C–0x1F, and Unicode's.
    private static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09...0x0D, 0x1C...0x20, 0x85, 0xA0: true
        case 0x80...: scalar.properties.isWhitespace
        default: false
        }
    }
}
