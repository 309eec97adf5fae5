import CYtnef
import Glibc
import InboxKit

/// A file inside a winmail.dat (ARCHITECTURE.md, "Mail import": an `application/ms-tnef` part is replaced by the files it holds).
struct TnefFile {
    /// The long filename, else the short one; nil for none.
    let filename: [UInt8]?
    /// The MIME tag Outlook recorded, lowercased; else `application/octet-stream`.
    let contentType: String
    let data: [UInt8]
}

/// Reads the files of a TNEF stream with libytnef (ARCHITECTURE.md, "Mail import"). libytnef reads from memory,
/// so a winmail.dat is held whole: `MailLimits.maxTnefBytes` bounds it.
enum Tnef {
    private static let longFilename: UInt32 = 0x3707  // PR_ATTACH_LONG_FILENAME
    private static let mimeTag: UInt32 = 0x370E  // PR_ATTACH_MIME_TAG
    private static let dataObject: UInt32 = 0x3701  // PR_ATTACH_DATA_OBJ
    private static let string8: UInt32 = 30  // PT_STRING8
    private static let unicode: UInt32 = 31  // PT_UNICODE
    private static let object: UInt32 = 13  // PT_OBJECT

    /// The files in `stream`, in order; nil when libytnef cannot read it (the part is then delivered as it is).
    static func files(in stream: [UInt8], maxFiles: Int) -> [TnefFile]? {
        guard !stream.isEmpty, stream.count <= Int(Int32.max) else { return nil }
        let tnef = UnsafeMutablePointer<TNEFStruct>.allocate(capacity: 1)
        defer { tnef.deallocate() }
        TNEFInitialize(tnef)
        defer { TNEFFree(tnef) }
        var copy = stream
        let status = copy.withUnsafeMutableBufferPointer { buffer in
            TNEFParseMemory(buffer.baseAddress, CLong(buffer.count), tnef)
        }
        guard status == 0 else { return nil }
        var files: [TnefFile] = []
        var next = tnef.pointee.starting_attach.next
        while let attachment = next, files.count < maxFiles {
            next = attachment.pointee.next
            if let file = file(attachment) { files.append(file) }
        }
        return files
    }

    private static func file(_ attachment: UnsafeMutablePointer<Attachment>) -> TnefFile? {
        let props = withUnsafeMutablePointer(to: &attachment.pointee.MAPI) { $0 }
        var data = bytes(attachment.pointee.FileData)
        if data.isEmpty, let embedded = inbox_tnef_property(props, object, dataObject) {
            data = Array(bytes(embedded.pointee).dropFirst(16))  // an embedded object starts with its 16-byte GUID
        }
        var filename: [UInt8]?
        if let long = inbox_tnef_property(props, unicode, longFilename) {
            filename = utf8(fromUTF16LE: bytes(long.pointee))
        } else if let long = inbox_tnef_property(props, string8, longFilename) {
            filename = untilNul(bytes(long.pointee))
        } else {
            filename = untilNul(bytes(attachment.pointee.Title))
        }
        if filename?.isEmpty == true { filename = nil }
        guard !data.isEmpty || filename != nil else { return nil }
        var contentType = "application/octet-stream"
        if let tag = inbox_tnef_property(props, string8, mimeTag) {
            let text = String(decoding: untilNul(bytes(tag.pointee)), as: UTF8.self).lowercased()
            if text.contains("/") && !text.contains(where: { $0.isWhitespace }) { contentType = text }
        }
        return TnefFile(filename: filename, contentType: contentType, data: data)
    }

    private static func bytes(_ value: variableLength) -> [UInt8] {
        guard let data = value.data, value.size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(value.size)))
    }

    private static func untilNul(_ bytes: [UInt8]) -> [UInt8] {
        Array(bytes.prefix { $0 != 0 })
    }

    private static func utf8(fromUTF16LE bytes: [UInt8]) -> [UInt8] {
        var units: [UInt16] = []
        var index = 0
        while index + 1 < bytes.count {
            let unit = UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
            if unit == 0 { break }
            units.append(unit)
            index += 2
        }
        return Array(String(decoding: units, as: UTF16.self).utf8)
    }
}
