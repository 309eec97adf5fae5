import AppContainer

extension ListedItem {
    /// `{"name":…,"path":…,"size":…,"modified":…}` as `ls --json` prints it (ARCHITECTURE.md, "The command line").
    public var json: String {
        var buffer: [UInt8] = [UInt8(ascii: "{")]
        EventEncoding.appendPathMember("name", name.bytes, to: &buffer)
        buffer.append(UInt8(ascii: ","))
        EventEncoding.appendPathMember("path", path, to: &buffer)
        EventEncoding.appendLiteral(",\"size\":", to: &buffer)
        EventEncoding.appendInteger(size, to: &buffer)
        EventEncoding.appendLiteral(",\"modified\":", to: &buffer)
        EventEncoding.appendString(modified.rfc3339, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
        return String(decoding: buffer, as: UTF8.self)
    }
}
