import Foundation
import Glibc

/// A real OpenSSH server for tests, "the other host" of a network filesystem (ARCHITECTURE.md, "Folders"): Debian's
/// `/usr/sbin/sshd`, started by the test in the foreground (`-D -e`) on a free port of 127.0.0.1 (never another
/// address), with its own configuration, a throwaway host key and a client key made by `ssh-keygen` in a fresh
/// folder; root logs in with that key only. Ready once it answers with its banner; killed and its folder removed
/// when released. Needs root (sshd checks its keys' owner, and logs in as root).
public final class SshServer: @unchecked Sendable {
    /// The folder of its configuration, keys and log (`sshd.log`).
    public let folder: String
    /// The loopback port it listens on, at 127.0.0.1.
    public let port: UInt16
    /// The private key that logs in as root.
    public let clientKey: String
    private let pid: pid_t

    /// Why a server cannot be started here (not root, OpenSSH missing), or nil when it can.
    public static var unavailable: String? {
        guard getuid() == 0 else { return "needs root, to start sshd and log in" }
        let programs = ["/usr/sbin/sshd", "/usr/bin/ssh-keygen"]
        guard let missing = programs.first(where: { !FileManager.default.isExecutableFile(atPath: $0) }) else {
            return nil
        }
        return "\(missing) is not installed (make deps installs openssh-server and openssh-client)"
    }

    /// Makes the keys and the configuration, starts sshd and waits until it accepts connections (30 s at the most).
    public init() throws {
        if let unavailable = Self.unavailable { throw FuseMountError(unavailable) }
        var template = Array("/tmp/inbox-sshd.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw FuseMountError("mkdtemp failed: errno \(errno)") }
        folder = String(cString: made)
        clientKey = folder + "/client_key"
        do {
            for key in [folder + "/host_key", clientKey] {
                let (status, output) = try runToEnd(
                    "/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "inbox-test", "-f", key])
                guard status == 0 else { throw FuseMountError("ssh-keygen -f \(key): \(output)") }
            }
            try FileManager.default.copyItem(atPath: clientKey + ".pub", toPath: folder + "/authorized_keys")
            // The privilege separation folder, which Debian makes only when its own sshd service starts.
            if !FileManager.default.fileExists(atPath: "/run/sshd") {
                try FileManager.default.createDirectory(
                    atPath: "/run/sshd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            }
            (pid, port) = try Self.start(in: folder)
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    deinit {
        kill(pid, SIGTERM)
        _ = try? exitStatus(of: pid)
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Starts sshd on a port the kernel just had free; another process may take it first, so a server that exits
    /// before it answers is started again on another (five tries).
    private static func start(in folder: String) throws -> (pid_t, UInt16) {
        let log = try FileDescriptorBox(open(folder + "/sshd.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600))
        var failure = ""
        for _ in 0..<5 {
            let port = try freePort()
            let configuration = folder + "/sshd_config"
            try Self.configuration(folder: folder, port: port).write(
                toFile: configuration, atomically: true, encoding: .utf8)
            let pid = try spawn("/usr/sbin/sshd", ["-D", "-e", "-f", configuration], output: log.fd)
            if try waitUntilAnswering(port: port, pid: pid, deadline: Date().addingTimeInterval(30)) {
                return (pid, port)
            }
            kill(pid, SIGKILL)
            _ = try? exitStatus(of: pid)
            failure = (try? String(contentsOfFile: folder + "/sshd.log", encoding: .utf8)) ?? ""
        }
        throw FuseMountError("sshd did not start: \(failure.trimmingCharacters(in: .whitespacesAndNewlines))")
    }

    /// Its configuration: loopback only, root by this folder's key only, no PAM, the sftp server built in.
    private static func configuration(folder: String, port: UInt16) -> String {
        """
        Port \(port)
        ListenAddress 127.0.0.1
        HostKey \(folder)/host_key
        PidFile \(folder)/sshd.pid
        AuthorizedKeysFile \(folder)/authorized_keys
        PermitRootLogin prohibit-password
        PubkeyAuthentication yes
        PasswordAuthentication no
        KbdInteractiveAuthentication no
        UsePAM no
        StrictModes no
        UseDNS no
        Subsystem sftp internal-sftp

        """
    }

    /// A port of 127.0.0.1 that nothing listens on now (the kernel's pick for a socket bound to port 0).
    private static func freePort() throws -> UInt16 {
        let socket = try tcpSocket()
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(socket.fd, address, length) == 0 && getsockname(socket.fd, address, &length) == 0
            }
        }
        guard bound else { throw FuseMountError("cannot bind a socket to 127.0.0.1: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// A new IPv4 TCP socket, closed when released.
    private static func tcpSocket() throws -> FileDescriptorBox {
        try FileDescriptorBox(Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
    }

    /// 127.0.0.1:`port`.
    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }

    /// Connects to 127.0.0.1:`port` until sshd answers with its banner (`SSH-2.0-`); false once `pid` has exited or
    /// the deadline passed.
    private static func waitUntilAnswering(port: UInt16, pid: pid_t, deadline: Date) throws -> Bool {
        while Date() < deadline {
            if try exitStatus(of: pid, wait: false) != nil { return false }
            if banner(port: port).hasPrefix("SSH-2.0-") { return true }
            var interval = timespec(tv_sec: 0, tv_nsec: 20_000_000)
            nanosleep(&interval, nil)
        }
        return false
    }

    /// What the server at 127.0.0.1:`port` says first, read for a second at the most; empty when nothing answers.
    private static func banner(port: UInt16) -> String {
        guard let socket = try? tcpSocket() else { return "" }
        let address = loopback(port: port)
        let connected = withUnsafePointer(to: address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socket.fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else { return "" }
        var poller = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 1000) > 0 else { return "" }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { read(socket.fd, $0.baseAddress, $0.count) }
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
    }
}

/// An open descriptor, closed when released.
final class FileDescriptorBox {
    let fd: CInt

    init(_ fd: CInt) throws {
        guard fd >= 0 else { throw FuseMountError("open failed: errno \(errno)") }
        self.fd = fd
    }

    deinit { close(fd) }
}
