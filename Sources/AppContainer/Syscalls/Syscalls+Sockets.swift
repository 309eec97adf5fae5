// swift-format-ignore-file: AlwaysUseLowerCamelCase

import CLinux
import Glibc

// The socket calls of the LMTP service, beside Syscalls.swift and under its rules: each reads errno at once and
// throws it as `Errno`, retries on EINTR, and first asks `plannedFault`.

/// `bind` to the address `address` holds (a `sockaddr_un`, `sockaddr_in` or `sockaddr_in6`).
@inline(never)
package func system_bind(_ fd: CInt, _ address: UnsafeRawBufferPointer) throws(Errno) {
    let length = socklen_t(address.count)
    let start = address.baseAddress?.assumingMemoryBound(to: sockaddr.self)
    _ = try valueOrErrno("bind") { bind(fd, start, length) }
}

/// `connect` to the address `address` holds.
@inline(never)
package func system_connect(_ fd: CInt, _ address: UnsafeRawBufferPointer) throws(Errno) {
    let length = socklen_t(address.count)
    let start = address.baseAddress?.assumingMemoryBound(to: sockaddr.self)
    _ = try valueOrErrno("connect") { connect(fd, start, length) }
}

@inline(never)
package func system_listen(_ fd: CInt, backlog: CInt) throws(Errno) {
    _ = try valueOrErrno("listen") { listen(fd, backlog) }
}

/// `accept4(SOCK_CLOEXEC)`: the connection, blocking whatever the listening socket is.
@inline(never)
package func system_accept(_ fd: CInt) throws(Errno) -> CInt {
    try valueOrErrno("accept4") { inbox_accept4(fd, CInt(SOCK_CLOEXEC.rawValue)) }
}

/// `send(MSG_NOSIGNAL | MSG_DONTWAIT)`: a peer gone is EPIPE, never SIGPIPE; a full socket buffer is EAGAIN, never
/// a wait.
@inline(never)
package func system_send(_ fd: CInt, _ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
    try valueOrErrno("send") { send(fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL | MSG_DONTWAIT)) }
}

/// `getsockopt(SOL_SOCKET, option)` of an integer option (`SO_ACCEPTCONN`, `SO_TYPE`, `SO_DOMAIN`).
@inline(never)
package func system_socketOption(_ fd: CInt, _ option: CInt) throws(Errno) -> CInt {
    var value: CInt = 0
    var length = socklen_t(MemoryLayout<CInt>.size)
    _ = try valueOrErrno("getsockopt") { getsockopt(fd, SOL_SOCKET, option, &value, &length) }
    return value
}

/// `setsockopt(SOL_SOCKET, option)` to an integer (`SO_REUSEADDR`).
@inline(never)
package func system_setSocketOption(_ fd: CInt, _ option: CInt, _ value: CInt) throws(Errno) {
    var value = value
    let length = socklen_t(MemoryLayout<CInt>.size)
    _ = try valueOrErrno("setsockopt") { setsockopt(fd, SOL_SOCKET, option, &value, length) }
}

/// `getsockname`: the socket's own address, as bytes of a `sockaddr_storage`.
@inline(never)
package func system_getsockname(_ fd: CInt) throws(Errno) -> [UInt8] {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = try valueOrErrno("getsockname") {
        withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
    }
    return withUnsafeBytes(of: &storage) { Array($0.prefix(Int(length))) }
}

/// `fcntl(F_SETFL)`: the status flags (`O_NONBLOCK`).
@inline(never)
package func system_fcntl_setfl(_ fd: CInt, _ flags: CInt) throws(Errno) {
    _ = try valueOrErrno("fcntl_setfl") { fcntl(fd, F_SETFL, flags) }
}

/// `fcntl(F_SETFD, FD_CLOEXEC)`: closed at an exec, as a descriptor systemd hands over is not.
@inline(never)
package func system_setCloseOnExec(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno("fcntl_setfd") { fcntl(fd, F_SETFD, FD_CLOEXEC) }
}

extension Errno {
    /// `EADDRINUSE`
    package static let addressInUse = Errno(rawValue: EADDRINUSE)
    /// `ECONNREFUSED`: nothing listens at the address.
    package static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    /// `ECONNABORTED`: a connection that ended before it was accepted.
    package static let connectionAborted = Errno(rawValue: ECONNABORTED)
}
