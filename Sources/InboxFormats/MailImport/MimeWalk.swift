import AppContainer
import CGMime
import InboxKit

/// A leaf MIME part of a message, and what the import makes of it.
struct MimeLeaf {
    let part: UnsafeMutablePointer<GMimePart>
    /// Lowercased `type/subtype`.
    let contentType: String
    /// The decoded filename: Content-Disposition `filename`, else Content-Type `name`.
    let filename: [UInt8]?
    /// The disposition, lowercased (`attachment`, `inline`).
    let disposition: String?

    /// ARCHITECTURE.md, "Mail import": a filename, or the disposition `attachment`.
    var isAttachment: Bool { filename != nil || disposition == "attachment" }
    /// A winmail.dat, replaced by the files it holds.
    var isTnef: Bool { contentType == "application/ms-tnef" || contentType == "application/vnd.ms-tnef" }

    /// Never attachments, nor walked into: signatures, fragments of a message, and a message kept elsewhere.
    static let skippedTypes: Set<String> = [
        "application/pgp-signature", "application/pkcs7-signature", "application/x-pkcs7-signature",
        "message/partial", "message/external-body",
    ]
}

extension MailMessage {
    /// The message's leaf parts in order, walking into multiparts and forwarded messages (`message/rfc822`,
    /// which `g_mime_message_foreach` does not), with an explicit stack: no recursion however deep the message.
    /// - Throws: `.refused` past `limits.maxParts` parts or `limits.maxDepth` levels.
    func leaves() throws(MailError) -> [MimeLeaf] {
        var leaves: [MimeLeaf] = []
        var stack: [(object: UnsafeMutablePointer<GMimeObject>, depth: Int)] = []
        if let body = g_mime_message_get_mime_part(message.pointer) { stack.append((body, 0)) }
        var parts = 0
        while let (object, depth) = stack.popLast() {
            parts += 1
            if parts > limits.maxParts { throw .refused("more than \(MailLimits.count(limits.maxParts)) parts") }
            if depth > limits.maxDepth { throw .refused("MIME parts nested deeper than \(limits.maxDepth) levels") }
            if inbox_gmime_is_multipart(object) != 0 {
                let multipart = inbox_gmime_as_multipart(object)
                let count = g_mime_multipart_get_count(multipart)
                guard count > 0 else { continue }
                for index in (0..<count).reversed() {
                    if let child = g_mime_multipart_get_part(multipart, index) { stack.append((child, depth + 1)) }
                }
            } else if inbox_gmime_is_message_part(object) != 0 {
                if let forwarded = g_mime_message_part_get_message(inbox_gmime_as_message_part(object)),
                    let body = g_mime_message_get_mime_part(forwarded)
                {
                    stack.append((body, depth + 1))
                }
            } else if inbox_gmime_is_part(object) != 0 {
                let leaf = try leaf(inbox_gmime_as_part(object), object)
                if !MimeLeaf.skippedTypes.contains(leaf.contentType) { leaves.append(leaf) }
            }
        }
        return leaves
    }

    private func leaf(_ part: UnsafeMutablePointer<GMimePart>, _ object: UnsafeMutablePointer<GMimeObject>)
        throws(MailError) -> MimeLeaf
    {
        var contentType = "application/octet-stream"
        if let type = g_mime_object_get_content_type(object) {
            let media = GMimeLibrary.text(g_mime_content_type_get_media_type(type)) ?? "application"
            let subtype = GMimeLibrary.text(g_mime_content_type_get_media_subtype(type)) ?? "octet-stream"
            contentType = "\(media)/\(subtype)".lowercased()
        }
        // The first of each header, as Python reads it (GMime keeps the last), with every NUL made `_`.
        var filename: [UInt8]?
        var disposition: String?
        if let raw = try firstHeaderInFile(object, "Content-Disposition"),
            let parsed = g_mime_content_disposition_parse(nil, MimeParameters.withoutNul(raw).cString)
        {
            disposition = GMimeLibrary.text(g_mime_content_disposition_get_disposition(parsed))?.lowercased()
            filename = GMimeLibrary.bytes(g_mime_content_disposition_get_parameter(parsed, "filename"))
            g_object_unref(parsed)
        }
        if filename == nil, let raw = try firstHeaderInFile(object, "Content-Type"),
            let parsed = g_mime_content_type_parse(nil, MimeParameters.withoutNul(raw).cString)
        {
            filename = GMimeLibrary.bytes(g_mime_content_type_get_parameter(parsed, "name"))
            g_object_unref(parsed)
        }
        return MimeLeaf(part: part, contentType: contentType, filename: filename, disposition: disposition)
    }

    /// The value of the first header called `name` as the file holds it, NUL bytes included (GMime's raw value
    /// stops at the first), folded lines and all.
    func firstHeaderInFile(_ object: UnsafeMutablePointer<GMimeObject>, _ name: String) throws(MailError) -> [UInt8]? {
        guard let headers = g_mime_object_get_header_list(object),
            let header = g_mime_header_list_get_header(headers, name)
        else { return nil }
        guard let start = fileOffset(Int64(g_mime_header_get_offset(header))) else {
            return GMimeLibrary.bytes(g_mime_header_get_raw_value(header))
        }
        // The scan's copy, when it kept one: the same bytes, up to the same end.
        var field = fields[start] ?? []
        if field.isEmpty { field = try fieldInFile(at: start) }
        guard let colon = field.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        return Array(field[(colon + 1)...])
    }

    /// The field that starts at `start` of the file (at most a header block's limit and a read more).
    private func fieldInFile(at start: Int64) throws(MailError) -> [UInt8] {
        var field: [UInt8] = []
        while field.count <= limits.maxHeaderBlockBytes {
            let offset = start + Int64(field.count)
            let chunk = try StructureScan.bytes(fd, offset..<(offset + 4096))
            let searchFrom = field.count
            field += chunk
            if let end = Self.fieldEnd(field, from: searchFrom, atEnd: chunk.isEmpty) {
                field.removeSubrange(end...)
                break
            }
        }
        return field
    }

    /// Where a header field that starts `field` ends: after a `\n` not followed by a space or tab.
    private static func fieldEnd(_ field: [UInt8], from: Int, atEnd: Bool) -> Int? {
        var index = Swift.max(from - 1, 0)
        while let newline = field[index...].firstIndex(of: 0x0A) {
            guard newline + 1 < field.count else { return atEnd ? field.count : nil }
            if field[newline + 1] != 0x20 && field[newline + 1] != 0x09 { return newline + 1 }
            index = newline + 1
        }
        return atEnd ? field.count : nil
    }

    /// The raw value of the first header called `name`.
    static func firstHeader(_ object: UnsafeMutablePointer<GMimeObject>, _ name: String) -> [UInt8]? {
        guard let headers = g_mime_object_get_header_list(object),
            let header = g_mime_header_list_get_header(headers, name)
        else { return nil }
        return GMimeLibrary.bytes(g_mime_header_get_raw_value(header))
    }

    /// Where the part's encoded content lies in the file; nil for a part without content.
    /// - Throws: `.io` when GMime's content is not one byte range of the file (it would run across a preamble or
    ///   an epilogue the parse left out): the message is kept for another try, never delivered short.
    func content(of leaf: MimeLeaf) throws(MailError) -> PartContent? {
        guard let wrapper = g_mime_part_get_content(leaf.part), let stream = g_mime_data_wrapper_get_stream(wrapper)
        else { return nil }
        var start: gint64 = 0
        var end: gint64 = -1
        guard inbox_gmime_file_range(stream, &start, &end) != 0 else {
            throw .io(ContainerError(.failure, "GMime read a part that is not one byte range of the message"))
        }
        let object = UnsafeMutableRawPointer(leaf.part).assumingMemoryBound(to: GMimeObject.self)
        let encoding = Self.firstHeader(object, "Content-Transfer-Encoding").map { String(decoding: $0, as: UTF8.self) }
        return PartContent(
            start: Int64(start), end: end < 0 ? nil : Int64(end), encoding: PartContent.Encoding(header: encoding))
    }
}

extension Array where Element == UInt8 {
    /// The bytes, NUL-terminated, as GMime's parsers take them.
    fileprivate var cString: [CChar] { map { CChar(bitPattern: $0) } + [0] }
}
