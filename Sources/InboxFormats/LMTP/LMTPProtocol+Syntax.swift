extension LMTPProtocol {
    /// The reply lines as sent: each printable ASCII (anything else `\xHH`), at most 510 bytes, ended by CRLF.
    static func reply(_ lines: [String]) -> [UInt8] {
        var bytes: [UInt8] = []
        for line in lines {
            bytes += shown(Array(line.utf8)).utf8.prefix(510)
            bytes += [0x0D, 0x0A]
        }
        return bytes
    }

    static func reply(_ line: String) -> [UInt8] { reply([line]) }

    /// `bytes` as reply text: printable ASCII as it is, every other byte `\xHH`.
    package static func shown(_ bytes: [UInt8]) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count)
        for byte in bytes {
            if (0x20...0x7E).contains(byte) {
                text.append(byte)
            } else {
                text += [UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The address and parameters of `FROM:<address> PARAM…` (`prefix` `FROM:` or `TO:`, in any case); a source
    /// route (`<@a,@b:x@y>`) is dropped. Nil when it is not that syntax.
    static func path(after prefix: String, in argument: ArraySlice<UInt8>) -> (address: [UInt8], parameters: [String])?
    {
        let head = String(decoding: argument.prefix(prefix.utf8.count), as: UTF8.self).uppercased()
        guard head == prefix else { return nil }
        var rest = argument.dropFirst(prefix.utf8.count).drop { $0 == 0x20 }
        guard rest.first == UInt8(ascii: "<") else { return nil }
        rest = rest.dropFirst()
        var quoted = false
        var escaped = false
        var close: Int?
        for index in rest.indices {
            let byte = rest[index]
            if escaped {
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = quoted
            } else if byte == UInt8(ascii: "\"") {
                quoted.toggle()
            } else if byte == UInt8(ascii: ">") && !quoted {
                close = index
                break
            }
        }
        guard let close else { return nil }
        var address = rest[..<close]
        if address.first == UInt8(ascii: "@"), let colon = address.firstIndex(of: UInt8(ascii: ":")) {
            address = address[(colon + 1)...]
        }
        let after = rest[(close + 1)...]
        guard after.isEmpty || after.first == 0x20 else { return nil }
        let parameters = after.split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
        return (Array(address), parameters)
    }

    /// `KEY=VALUE` as the key and value in upper case (`SIZE=100`, `BODY=8bitmime`), `KEY` with no value.
    static func keyword(_ parameter: String) -> (String, String?) {
        guard let equals = parameter.firstIndex(of: "=") else { return (parameter.uppercased(), nil) }
        return (parameter[..<equals].uppercased(), parameter[parameter.index(after: equals)...].uppercased())
    }

    /// The local part of `address`: before its last `@`; a quoted one unquoted (`"a b"@x` is `a b`).
    static func localPart(of address: [UInt8]) -> [UInt8] {
        let local = address[..<(address.lastIndex(of: UInt8(ascii: "@")) ?? address.endIndex)]
        guard local.count >= 2, local.first == UInt8(ascii: "\""), local.last == UInt8(ascii: "\"") else {
            return Array(local)
        }
        var unquoted: [UInt8] = []
        var escaped = false
        for byte in local.dropFirst().dropLast() {
            if !escaped && byte == UInt8(ascii: "\\") {
                escaped = true
            } else {
                unquoted.append(byte)
                escaped = false
            }
        }
        return unquoted
    }
}
