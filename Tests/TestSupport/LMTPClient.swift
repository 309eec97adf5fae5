import Foundation
import Glibc

/// The client side of an LMTP session (RFC 2033) for the tests: commands and data written as they are given,
/// replies read with a deadline, a line at a time.
public final class LMTPClient {
    public let fd: CInt
    private var pending: [UInt8] = []

    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) { self.description = description }
    }

    /// Takes over a connected socket.
    public init(owning fd: CInt) { self.fd = fd }

    /// Connects to the Unix socket at `path`.
    public convenience init(unixPath path: String) throws {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw Failure(description: "\(path): too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        try self.init(address: withUnsafeBytes(of: address) { Array($0) }, family: AF_UNIX, shown: path)
    }

    /// Connects to `127.0.0.1:port`.
    public convenience init(port: UInt16) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        try self.init(address: withUnsafeBytes(of: address) { Array($0) }, family: AF_INET, shown: "127.0.0.1:\(port)")
    }

    private init(address: [UInt8], family: CInt, shown: String) throws {
        fd = socket(family, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        let connected = address.withUnsafeBytes { raw in
            connect(fd, raw.baseAddress?.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        guard connected == 0 else {
            // Thrown fully made: deinit closes the socket, once.
            let error = errno
            throw Failure(description: "connect to \(shown): \(String(cString: strerror(error)))")
        }
    }

    deinit { close(fd) }

    /// Writes `text` as it is (the caller writes each CRLF).
    public func send(_ text: String) { send(Array(text.utf8)) }

    public func send(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, CInt(MSG_NOSIGNAL)) }
            if count <= 0 { return }
            sent += count
        }
    }

    /// The lines of the next `count` replies (a reply ends at a line whose code a space follows), or those that
    /// came before the connection ended or `timeout` passed.
    public func replies(_ count: Int = 1, timeout: TimeInterval = 30) -> [String] {
        var lines: [String] = []
        var done = 0
        let deadline = Date().addingTimeInterval(timeout)
        while done < count {
            if let newline = pending.firstIndex(of: 0x0A) {
                var line = pending[..<newline]
                if line.last == 0x0D { line = line.dropLast() }
                pending.removeFirst(newline + 1)
                lines.append(String(decoding: line, as: UTF8.self))
                if line.count < 4 || line[line.startIndex + 3] == 0x20 { done += 1 }
                continue
            }
            guard readMore(until: deadline) else { break }
        }
        return lines
    }

    /// The codes of the next `count` replies' last lines (`250`, `550`, …).
    public func codes(_ count: Int = 1, timeout: TimeInterval = 30) -> [String] {
        replies(count, timeout: timeout).filter { $0.count < 4 || Array($0.utf8)[3] == 0x20 }.map {
            String($0.prefix(3))
        }
    }

    /// Whether the server closed the connection (all it sent read) before `timeout`.
    public func isClosed(timeout: TimeInterval = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while readMore(until: deadline) {}
        return Date() < deadline
    }

    /// Reads what comes before `deadline`; false when the connection ended or the deadline passed.
    private func readMore(until deadline: Date) -> Bool {
        while Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 50) > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return false }
            pending += buffer[..<count]
            return true
        }
        return false
    }

    /// `message` as DATA sends it: each line ended by CRLF, a line that starts with a dot given another, and the
    /// final `.` line.
    public static func data(_ message: String) -> String {
        var lines = message.replacingOccurrences(of: "\r\n", with: "\n").split(
            separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        return lines.map { ($0.hasPrefix(".") ? "." : "") + $0 + "\r\n" }.joined() + ".\r\n"
    }

    /// Greets and sends one transaction for `recipients` with `message`; the replies' codes: LHLO's, MAIL's, one per
    /// RCPT, DATA's, then one per recipient accepted.
    public func transaction(_ message: String, to recipients: [String], greet: Bool = true) -> [String] {
        var codes: [String] = []
        if greet {
            send("LHLO test.example\r\n")
            codes += self.codes()
        }
        send("MAIL FROM:<sender@example.org>\r\n" + recipients.map { "RCPT TO:<\($0)>\r\n" }.joined() + "DATA\r\n")
        let answered = self.codes(2 + recipients.count)
        codes += answered
        guard answered.last == "354" else { return codes }
        send(Self.data(message))
        return codes + self.codes(answered.dropFirst().dropLast().filter { $0 == "250" }.count)
    }
}
