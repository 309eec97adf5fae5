import AppContainer
import CYtnef
import Glibc
import InboxKit

/// A file inside a winmail.dat (ARCHITECTURE.md, "Mail import": an `application/ms-tnef` part is replaced by the files
/// it holds).
struct TnefFile {
    /// The long filename, else the short one; nil for none.
    let filename: [UInt8]?
    /// The MIME tag Outlook recorded, lowercased; else `application/octet-stream`.
    let contentType: String
    /// The file's bytes, in libytnef's memory: valid only inside `Tnef.withFiles`'s body.
    let data: UnsafeRawBufferPointer
}

/// Reads the files of a TNEF stream with libytnef (ARCHITECTURE.md, "Mail import", TNEF). The stream is read from a
/// file, an attribute at a time (libytnef's own I/O hooks), never held whole by us: what libytnef holds is each
/// attribute it has read (its files' bytes, the MAPI properties), and while it reads one, that attribute twice.
/// So a winmail.dat of N bytes costs up to 2N of memory, and `MailLimits.maxTnefBytes` bounds N.
enum Tnef {
    private static let longFilename: UInt32 = 0x3707  // PR_ATTACH_LONG_FILENAME
    private static let mimeTag: UInt32 = 0x370E  // PR_ATTACH_MIME_TAG
    private static let dataObject: UInt32 = 0x3701  // PR_ATTACH_DATA_OBJ
    private static let string8: UInt32 = 30  // PT_STRING8
    private static let unicode: UInt32 = 31  // PT_UNICODE
    private static let object: UInt32 = 13  // PT_OBJECT

    /// Where libytnef reads the stream: `fd` from offset 0, through `read` below, which keeps a failure to read.
    private struct Input {
        let fd: CInt
        var offset: Int64 = 0
        var failure: Errno?
    }

    /// libytnef's `ReadProc`, as `fread` answers: reads `count` items of `size` bytes into `dest` and returns how
    /// many whole items it read (fewer at the end of the file or on an error, which libytnef takes as a damaged
    /// stream; the error is kept in `Input`, and `withFiles` throws it).
    private static let read:
        @convention(c) (UnsafeMutablePointer<TNEFIOStruct>?, CInt, CInt, UnsafeMutableRawPointer?)
            -> CInt = { io, size, count, dest in
                guard let io, let dest, let input = io.pointee.data?.assumingMemoryBound(to: Input.self), size > 0,
                    count >= 0
                else { return -1 }
                let want = Int(size) * Int(count)
                var done = 0
                while done < want {
                    let buffer = UnsafeMutableRawBufferPointer(start: dest + done, count: want - done)
                    do throws(Errno) {
                        let read = try system_pread(input.pointee.fd, into: buffer, at: input.pointee.offset)
                        guard read > 0 else { break }
                        input.pointee.offset += Int64(read)
                        done += read
                    } catch {
                        input.pointee.failure = error
                        break
                    }
                }
                return CInt(done / Int(size))
            }

    /// Calls `body` with the files of the TNEF stream in `fd` (read from its start), in order, and returns true;
    /// returns false without calling it when libytnef cannot read the stream or finds no file in it (the part is
    /// then delivered as it is). The files' bytes are libytnef's, released when this returns.
    /// - Throws: `.io` when the stream's file cannot be read (never taken for a damaged stream), `.refused` for
    ///   more than `maxFiles` files, or what `body` throws.
    static func withFiles(in fd: CInt, maxFiles: Int, _ body: ([TnefFile]) throws(MailError) -> Void)
        throws(MailError) -> Bool
    {
        let tnef = UnsafeMutablePointer<TNEFStruct>.allocate(capacity: 1)
        // Zeroed first: `TNEFInitialize` leaves `Debug` as it finds it, and libytnef then prints a line per read.
        tnef.initialize(to: TNEFStruct())
        defer { tnef.deallocate() }
        TNEFInitialize(tnef)
        defer { TNEFFree(tnef) }
        let input = UnsafeMutablePointer<Input>.allocate(capacity: 1)
        input.initialize(to: Input(fd: fd))
        defer { input.deallocate() }
        tnef.pointee.IO.InitProc = nil
        tnef.pointee.IO.CloseProc = nil
        tnef.pointee.IO.ReadProc = read
        tnef.pointee.IO.data = UnsafeMutableRawPointer(input)
        let parsed = TNEFParse(tnef) == 0
        if let failure = input.pointee.failure { throw .io(failure.failure("read", "a winmail.dat")) }
        guard parsed else { return false }
        var files: [TnefFile] = []
        var next = tnef.pointee.starting_attach.next
        while let attachment = next {
            next = attachment.pointee.next
            guard let file = file(attachment) else { continue }
            if files.count == maxFiles {
                throw .refused("a winmail.dat of more than \(MailLimits.count(maxFiles)) files")
            }
            files.append(file)
        }
        guard !files.isEmpty else { return false }
        try body(files)
        return true
    }

    private static func file(_ attachment: UnsafeMutablePointer<Attachment>) -> TnefFile? {
        let props = withUnsafeMutablePointer(to: &attachment.pointee.MAPI) { $0 }
        var data = bytes(attachment.pointee.FileData)
        if data.isEmpty, let embedded = inbox_tnef_property(props, object, dataObject) {
            let object = bytes(embedded.pointee)  // an embedded object starts with its 16-byte GUID
            data = UnsafeRawBufferPointer(rebasing: object[Swift.min(16, object.count)...])
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

    /// The bytes of a libytnef value, in place.
    private static func bytes(_ value: variableLength) -> UnsafeRawBufferPointer {
        guard let data = value.data, value.size > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: data, count: Int(value.size))
    }

    private static func untilNul(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        Array(bytes.prefix { $0 != 0 })
    }

    private static func utf8(fromUTF16LE bytes: UnsafeRawBufferPointer) -> [UInt8] {
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
