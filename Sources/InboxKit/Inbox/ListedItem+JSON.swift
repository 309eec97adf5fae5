import AppContainer

extension ListedItem {
    /// `{"name":…,"path":…,"kind":…,"size":…,"modified":…}` as `ls --json` prints it (ARCHITECTURE.md, "The
    /// command line").
    package var json: String {
        var buffer: [UInt8] = [UInt8(ascii: "{")]
        EventEncoding.appendPathMember("name", name.bytes, to: &buffer)
        buffer.append(UInt8(ascii: ","))
        EventEncoding.appendPathMember("path", path, to: &buffer)
        EventEncoding.appendLiteral(",\"kind\":", to: &buffer)
        EventEncoding.appendString(status.kind.listedName, to: &buffer)
        EventEncoding.appendLiteral(",\"size\":", to: &buffer)
        EventEncoding.appendInteger(size, to: &buffer)
        EventEncoding.appendLiteral(",\"modified\":", to: &buffer)
        EventEncoding.appendString(modified.rfc3339, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
        return String(decoding: buffer, as: UTF8.self)
    }
}

extension FileKind {
    /// What `ls --json` calls it: `file`, `folder`, `link` (never followed) or `other` (a FIFO, socket or device).
    package var listedName: String {
        switch self {
        case .regular: "file"
        case .directory: "folder"
        case .symbolicLink: "link"
        default: "other"
        }
    }
}

extension InboxItem {
    /// `{"name":…,"path":…,"size":…}` as `deliver --json` prints each delivered item.
    package var json: String {
        var buffer: [UInt8] = [UInt8(ascii: "{")]
        EventEncoding.appendPathMember("name", name.bytes, to: &buffer)
        buffer.append(UInt8(ascii: ","))
        EventEncoding.appendPathMember("path", path, to: &buffer)
        EventEncoding.appendLiteral(",\"size\":", to: &buffer)
        EventEncoding.appendInteger(size, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
        return String(decoding: buffer, as: UTF8.self)
    }
}

extension Document {
    /// `{"name":…,"path":…}` as `move --json` prints the moved item.
    package var json: String {
        var buffer: [UInt8] = [UInt8(ascii: "{")]
        EventEncoding.appendPathMember("name", name.bytes, to: &buffer)
        buffer.append(UInt8(ascii: ","))
        EventEncoding.appendPathMember("path", path, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
        return String(decoding: buffer, as: UTF8.self)
    }
}
