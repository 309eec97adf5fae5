/// Names the content type of a file from its first bytes by fixed rules, so that the common types need no
/// libmagic call (ARCHITECTURE.md, "The hot path"): binary signatures first, then UTF-8 text.
///
/// A pure function: no state, safe from any thread.
package enum ContentSniffer {
    /// A short type name, as in `Inspection.type`, and its MIME type.
    package struct Sniffed: Sendable, Equatable {
        /// The short name, as in `Inspection.type`.
        package let type: String
        /// The MIME type.
        package let mime: String

        /// A result of these parts.
        package init(type: String, mime: String) {
            self.type = type
            self.mime = mime
        }
    }

    /// The type of a file that begins with `head`, or nil when no rule decides and libmagic should.
    package static func sniff(_ head: UnsafeRawBufferPointer) -> Sniffed? {
        if head.isEmpty { return Sniffed(type: "empty", mime: "application/x-empty") }
        if head.starts(with: "%PDF-".utf8) { return Sniffed(type: "pdf", mime: "application/pdf") }
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) {
            return Sniffed(type: "png", mime: "image/png")
        }
        if head.starts(with: [0xFF, 0xD8, 0xFF]) { return Sniffed(type: "jpeg", mime: "image/jpeg") }
        if head.starts(with: "GIF87a".utf8) || head.starts(with: "GIF89a".utf8) {
            return Sniffed(type: "gif", mime: "image/gif")
        }
        if head.starts(with: zipSignature) { return zip(head) }
        return looksLikeText(head) ? textType(head) : nil
    }
}

// MARK: - Zip

extension ContentSniffer {
    /// The signature of a zip local file header: "PK\3\4".
    private static let zipSignature: [UInt8] = [0x50, 0x4B, 0x03, 0x04]

    /// The MIME types of Office Open XML documents, by the folder of their main part.
    private static let officeOpenXMLTypes: [(folder: String, mime: String)] = [
        ("word/", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
        ("xl/", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
        ("ppt/", "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ]

    /// A zip is `office` when its first entry is `[Content_Types].xml` (Office Open XML) or `mimetype`
    /// (OpenDocument); the MIME type comes from the entries that follow, or from the `mimetype` entry, else it
    /// is `application/zip`.
    private static func zip(_ head: UnsafeRawBufferPointer) -> Sniffed {
        let zip = Sniffed(type: "zip", mime: "application/zip")
        guard let first = ZipEntry(head, at: 0) else { return zip }
        let name = head[first.name]
        if name.elementsEqual("[Content_Types].xml".utf8) {
            return Sniffed(type: "office", mime: officeOpenXMLType(head) ?? zip.mime)
        }
        if name.elementsEqual("mimetype".utf8) {
            return Sniffed(type: "office", mime: storedMIMEType(head, first) ?? zip.mime)
        }
        return zip
    }

    /// The Office Open XML type named by the folder of one of the first 8 entries, as libmagic looks for it.
    private static func officeOpenXMLType(_ head: UnsafeRawBufferPointer) -> String? {
        var offset = 0
        for _ in 0..<8 {
            guard let entry = ZipEntry(head, at: offset) else { return nil }
            let name = head[entry.name]
            if let known = officeOpenXMLTypes.first(where: { name.starts(with: $0.folder.utf8) }) {
                return known.mime
            }
            // Sizes follow the data instead when bit 3 is set: look for the next header.
            if entry.flags & 0x08 == 0 {
                offset = entry.dataStart + entry.compressedSize
            } else if let next = index(of: zipSignature, in: head, from: entry.dataStart) {
                offset = next
            } else {
                return nil
            }
        }
        return nil
    }

    /// The content of a stored `mimetype` entry when it reads like a MIME type.
    private static func storedMIMEType(_ head: UnsafeRawBufferPointer, _ entry: ZipEntry) -> String? {
        guard entry.method == 0, (1...100).contains(entry.compressedSize) else { return nil }
        let end = entry.dataStart + entry.compressedSize
        guard end <= head.count else { return nil }
        let text = head[entry.dataStart..<end]
        guard text.allSatisfy({ (0x21...0x7E).contains($0) }), text.contains(UInt8(ascii: "/")) else { return nil }
        return String(decoding: text, as: UTF8.self)
    }

    /// The first index at or after `start` where `bytes` begin in `head`.
    private static func index(of bytes: [UInt8], in head: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard let first = bytes.first, start < head.count else { return nil }
        var index = start
        while index + bytes.count <= head.count {
            if head[index] == first, head[index..<(index + bytes.count)].elementsEqual(bytes) { return index }
            index += 1
        }
        return nil
    }
}

/// A zip local file header that lies whole, with its name, inside the first bytes.
private struct ZipEntry {
    let flags: Int
    let method: Int
    let compressedSize: Int
    /// Where the name lies in the first bytes.
    let name: Range<Int>
    /// Where the data begins, after the name and the extra field; it may lie past the first bytes.
    let dataStart: Int

    /// The header at `offset`: "PK\3\4", then little-endian fields; the name at 30, the extra field after it.
    init?(_ head: UnsafeRawBufferPointer, at offset: Int) {
        guard offset >= 0, offset + 30 <= head.count,
            head[offset..<(offset + 4)].elementsEqual([0x50, 0x4B, 0x03, 0x04])
        else { return nil }
        func field(_ at: Int, _ size: Int) -> Int {
            (0..<size).reduce(0) { value, byte in value | Int(head[offset + at + byte]) << (8 * byte) }
        }
        let nameStart = offset + 30
        let nameEnd = nameStart + field(26, 2)
        guard nameEnd <= head.count else { return nil }
        flags = field(6, 2)
        method = field(8, 2)
        compressedSize = field(18, 4)
        name = nameStart..<nameEnd
        dataStart = nameEnd + field(28, 2)
    }
}
