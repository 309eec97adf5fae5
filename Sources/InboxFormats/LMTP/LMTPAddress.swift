import AppContainer
import Glibc
import InboxKit

/// Where `inbox lmtp` listens (DESIGN §14, "Start"): `unix:PATH`, or `inet:HOST:PORT` with HOST a loopback address
/// (`127.0.0.1` and the rest of 127/8, `localhost`, `[::1]`): LMTP has no authentication.
package enum LMTPAddress: Equatable, Sendable {
    case unix([UInt8])
    case inet4(in_addr_t, port: UInt16)
    case inet6(in6_addr, port: UInt16)

    /// `--listen`'s value; a usage error (64) for anything else.
    package init(_ text: [UInt8]) throws(ContainerError) {
        let shown = LMTPProtocol.shown(text)
        if text.starts(with: "unix:".utf8) {
            let path = Array(text.dropFirst(5))
            guard !path.isEmpty, !path.contains(0) else { throw ContainerError(.usage, "'\(shown)' names no socket") }
            guard path.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path) else {
                throw ContainerError(.usage, "'\(shown)': a socket's path has at most 107 bytes")
            }
            self = .unix(path)
            return
        }
        guard text.starts(with: "inet:".utf8), let colon = text.lastIndex(of: UInt8(ascii: ":")), colon > 4,
            let port = UInt16(String(decoding: text[(colon + 1)...], as: UTF8.self)), port > 0
        else {
            throw ContainerError(.usage, "'\(shown)' is not an address to listen on: use unix:PATH or inet:HOST:PORT")
        }
        var host = String(decoding: text[5..<colon], as: UTF8.self)
        if host == "localhost" { host = "127.0.0.1" }
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1, UInt32(bigEndian: v4.s_addr) >> 24 == 127 {
            self = .inet4(v4.s_addr, port: port)
        } else if host.hasPrefix("["), host.hasSuffix("]"),
            inet_pton(AF_INET6, String(host.dropFirst().dropLast()), &v6) == 1,
            withUnsafeBytes(of: v6, { $0.dropLast().allSatisfy { $0 == 0 } && $0.last == 1 })
        {
            self = .inet6(v6, port: port)
        } else {
            throw ContainerError(
                .usage,
                "'\(shown)': LMTP has no authentication, so inbox listens only on a loopback address (127.0.0.1,"
                    + " [::1]) or unix:PATH")
        }
    }

    /// The address of a bound socket (one systemd handed over), or nil for another family.
    init?(boundTo socket: CInt) throws(Errno) {
        let bytes = try system_getsockname(socket)
        switch bytes.withUnsafeBytes({ $0.load(as: sa_family_t.self) }) {
        case sa_family_t(AF_UNIX):
            self = .unix(Array(bytes.dropFirst(2).prefix { $0 != 0 }))
        case sa_family_t(AF_INET):
            let address = bytes.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in.self) }
            self = .inet4(address.sin_addr.s_addr, port: UInt16(bigEndian: address.sin_port))
        case sa_family_t(AF_INET6):
            let address = bytes.withUnsafeBytes { $0.loadUnaligned(as: sockaddr_in6.self) }
            self = .inet6(address.sin6_addr, port: UInt16(bigEndian: address.sin6_port))
        default:
            return nil
        }
    }

    /// As `--listen` writes it.
    package var description: String {
        switch self {
        case .unix(let path): return "unix:" + LMTPProtocol.shown(path)
        case .inet4(let address, let port):
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            var value = in_addr(s_addr: address)
            inet_ntop(AF_INET, &value, &text, socklen_t(text.count))
            return "inet:\(Self.text(text)):\(port)"
        case .inet6(let address, let port):
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            var value = address
            inet_ntop(AF_INET6, &value, &text, socklen_t(text.count))
            return "inet:[\(Self.text(text))]:\(port)"
        }
    }

    private static func text(_ characters: [CChar]) -> String {
        String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The `sockaddr` bytes of the address.
    var socketAddress: [UInt8] {
        switch self {
        case .unix(let path):
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (index, byte) in path.enumerated() { raw[index] = byte }
            }
            return withUnsafeBytes(of: address) { Array($0) }
        case .inet4(let host, let port):
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr.s_addr = host
            return withUnsafeBytes(of: address) { Array($0) }
        case .inet6(let host, let port):
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = host
            return withUnsafeBytes(of: address) { Array($0) }
        }
    }

    var family: CInt {
        switch self {
        case .unix: AF_UNIX
        case .inet4: AF_INET
        case .inet6: AF_INET6
        }
    }

    package static func == (left: LMTPAddress, right: LMTPAddress) -> Bool { left.socketAddress == right.socketAddress }
}
