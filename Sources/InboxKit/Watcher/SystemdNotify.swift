import AppContainer
import Glibc

/// Tells systemd about the service's state over `$NOTIFY_SOCKET` (a `Type=notify` unit); a no-op without it.
enum SystemdNotify {
    /// Sends `message` (e.g. `READY=1`); returns whether it was sent.
    @discardableResult
    static func send(_ message: String, socketPath: String? = getenv("NOTIFY_SOCKET").map { String(cString: $0) })
        -> Bool
    {
        guard let socketPath, !socketPath.isEmpty else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var path = Array(socketPath.utf8)
        if path.first == UInt8(ascii: "@") { path[0] = 0 }  // the abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
        guard let fd = try? system_socket(AF_UNIX, CInt(SOCK_DGRAM.rawValue)) else { return false }
        let socket = FileDescriptor(owning: fd)
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bytes.withUnsafeBytes { try? system_sendto(socket.rawValue, $0, address, length) }
            }
        }
        return sent == bytes.count
    }
}
