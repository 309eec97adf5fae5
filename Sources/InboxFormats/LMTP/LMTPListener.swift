import AppContainer
import Glibc
import InboxKit

/// A listening socket of `inbox lmtp`: bound to `--listen`'s address, or handed over by systemd (DESIGN §14,
/// "Start"). Non-blocking, so that the accept loop never waits in `accept`.
package final class LMTPListener {
    package let address: LMTPAddress
    /// The socket, open until `close()`.
    let fd: CInt
    /// The socket file this process made (its path and identity), removed at `close` if still the same.
    private let made: FileID?
    private var closed = false

    private init(address: LMTPAddress, fd: CInt, made: FileID?) throws(ContainerError) {
        self.address = address
        self.fd = fd
        self.made = made
        do {
            try system_fcntl_setfl(fd, O_NONBLOCK)
        } catch {
            throw error.failure("listen on", address.description)
        }
    }

    /// Binds `address` and listens. A Unix socket is made mode 0660; one left at its path is replaced only when
    /// nothing listens there (75 when something does); other failures to bind are 73.
    package static func bind(_ address: LMTPAddress) throws(ContainerError) -> LMTPListener {
        let shown = address.description
        let raw: CInt
        do {
            raw = try system_socket(address.family, CInt(SOCK_STREAM.rawValue))
        } catch {
            throw ContainerError(.cannotCreate, "cannot make a socket for \(shown): \(error)", cause: error)
        }
        let socket = FileDescriptor(owning: raw)
        var made: FileID?
        do {
            // A restart binds its port at once, whatever a connection of the last run left in TIME_WAIT.
            if address.family != AF_UNIX { try system_setSocketOption(socket.rawValue, SO_REUSEADDR, 1) }
            try bindReplacingStale(socket.rawValue, address)
            if case .unix(let path) = address {
                try system_fchmodat(currentDirectory, path, 0o660)
                made = try Self.identity(path)
            }
            try system_listen(socket.rawValue, backlog: 128)
        } catch .addressInUse {
            throw ContainerError(.busy, "cannot listen on \(shown): it is in use (another server listens there)")
        } catch {
            throw ContainerError(.cannotCreate, "cannot listen on \(shown): \(error)", cause: error)
        }
        return try LMTPListener(address: address, fd: socket.release(), made: made)
    }

    /// `bind`; for a Unix socket whose path holds a socket nobody listens on (a server that ended without
    /// removing it), that one removed first. Throws EADDRINUSE when something listens there.
    private static func bindReplacingStale(_ socket: CInt, _ address: LMTPAddress) throws(Errno) {
        let bytes = address.socketAddress
        do {
            try bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try system_bind(socket, raw) } }.get()
        } catch .addressInUse {
            guard case .unix(let path) = address else { throw .addressInUse }
            // Something else holds the name: never removed (73, "File exists").
            guard try fileStatus(in: currentDirectory, path).kind == .socket else { throw .fileExists }
            let probe = FileDescriptor(owning: try system_socket(AF_UNIX, CInt(SOCK_STREAM.rawValue)))
            do throws(Errno) {
                try bytes.withUnsafeBytes { raw in
                    Result { () throws(Errno) in try system_connect(probe.rawValue, raw) }
                }
                .get()
                throw Errno.addressInUse
            } catch .connectionRefused {
                try system_unlinkat(currentDirectory, path)
                try bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try system_bind(socket, raw) } }.get()
            } catch .wouldBlock {
                // Its listen queue is full: someone listens.
                throw .addressInUse
            }
        }
    }

    /// The listening sockets systemd handed over (`LISTEN_FDS`, read by libsystemd's `sd_listen_fds`), or nil when
    /// it handed none to this process. A descriptor that is not a listening stream socket is a usage error (64): the
    /// socket unit must not say `Accept=yes`.
    package static func activated() throws(ContainerError) -> [LMTPListener]? {
        guard getenv("LISTEN_FDS") != nil else { return nil }
        let count: CInt
        do {
            let library = try LazyLibrary("libsystemd.so.0")
            // int sd_listen_fds(int unset_environment), <systemd/sd-daemon.h>.
            let listenDescriptors = try library.function(
                "sd_listen_fds", as: (@convention(c) (CInt) -> CInt).self)
            count = listenDescriptors(1)
        } catch {
            throw ContainerError(.failure, "cannot read the sockets systemd handed over: \(error.message)")
        }
        guard count >= 0 else {
            throw ContainerError(
                .failure, "cannot read the sockets systemd handed over: \(Errno(rawValue: -count))")
        }
        guard count > 0 else { return nil }
        var listeners: [LMTPListener] = []
        for fd in 3..<(3 + count) {
            do {
                try system_setCloseOnExec(fd)
                guard try system_socketOption(fd, SO_ACCEPTCONN) == 1,
                    try system_socketOption(fd, SO_TYPE) == CInt(SOCK_STREAM.rawValue),
                    let address = try LMTPAddress(boundTo: fd)
                else {
                    throw ContainerError(
                        .usage,
                        "descriptor \(fd) from systemd is not a listening stream socket: its socket unit must say Accept=no"
                    )
                }
                listeners.append(try LMTPListener(address: address, fd: fd, made: nil))
            } catch let error as Errno {
                throw ContainerError(.usage, "descriptor \(fd) from systemd is not a socket: \(error)")
            } catch let error as ContainerError {
                throw error
            } catch {
                throw ContainerError(.failure, "descriptor \(fd) from systemd: \(error)")
            }
        }
        return listeners
    }

    /// Stops listening: the socket is closed, and a Unix socket this process made removed when its path still
    /// holds it (a server started since replaced it: that one stays).
    package func close() {
        guard !closed else { return }
        closed = true
        if let made, case .unix(let path) = address, (try? Self.identity(path)) == made {
            // A socket file left behind is replaced by the next start.
            _ = try? system_unlinkat(currentDirectory, path)
        }
        // The descriptor is released whatever close says; nothing was written through it.
        _ = try? system_close(fd)
    }

    deinit { close() }

    private static func identity(_ path: [UInt8]) throws(Errno) -> FileID {
        let status = try fileStatus(in: currentDirectory, path)
        return FileID(device: status.device, inode: status.inode)
    }
}
