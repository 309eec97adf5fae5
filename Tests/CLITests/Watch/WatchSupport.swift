import CLinux
import Foundation
import Glibc
import TestSupport
import Testing

/// A running `inbox watch` process, stopped with SIGTERM when the test is done with it. (A `Watcher` run in the
/// test's own process is InboxKitTests' `InProcessWatcher`.)
final class WatchProcess {
    let child: InboxProcess.Child
    let container: String

    /// Starts `inbox watch ARGS…` and waits until its `watch-started` record is logged; with `terminalColumns`,
    /// its stdout is a pseudo-terminal (see `InboxProcess.start`). With `under`, that program runs it (its path
    /// and arguments before inbox's path, as `unshare … --`).
    init(
        _ container: String, _ arguments: [String] = [], environment: [String: String] = [:],
        terminalColumns: UInt16? = nil, under: [String] = []
    ) throws {
        self.container = container
        let before = logRecords(container, event: "watch-started").count
        let command = under.isEmpty ? [] : Array(under.dropFirst()) + [InboxProcess.binary]
        child = try InboxProcess.start(
            (command + ["--container", container, "watch"] + arguments).map { Array($0.utf8) },
            environment: environment, terminalColumns: terminalColumns, executable: under.first ?? InboxProcess.binary)
        let started = waitUntil(timeout: 30) { logRecords(container, event: "watch-started").count > before }
        #expect(started, "the watcher logged watch-started")
    }

    /// SIGTERM, then the exit status and what it printed.
    func stop() throws -> InboxProcess.Result {
        kill(child.pid, SIGTERM)
        return try child.finish()
    }

    func kill9() {
        kill(child.pid, SIGKILL)
        _ = try? child.finish()
    }
}

/// Creates `count` small files named `prefix<i>.txt` in `folder`, written with plain open/write/close.
func writeFiles(_ count: Int, in folder: String, prefix: String) throws {
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    for index in 0..<count {
        let fd = open(folder + "/\(prefix)\(index).txt", O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let text = Array("\(prefix) number \(index)\n".utf8)
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }
}

/// Renames every file of `source` into `target` (the same filesystem), as a mail importer's `mv` would.
func renameAll(from source: String, into target: String) throws {
    for name in try FileManager.default.contentsOfDirectory(atPath: source) {
        guard rename(source + "/" + name, target + "/" + name) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }
}

/// Swaps the folder at `path` with a new empty file in one step (`renameat2(RENAME_EXCHANGE)`), so that a watcher
/// never finds the name missing (it would make the folder again); returns where the folder went. Swapping back
/// (`exchange(path, with: returned)`) puts it back as it was.
@discardableResult
func replaceWithFile(_ path: String) throws -> String {
    let aside = path + ".swapped"
    guard FileManager.default.createFile(atPath: aside, contents: Data()) else {
        throw POSIXError(.EEXIST)
    }
    try exchange(path, with: aside)
    return aside
}

/// `renameat2(RENAME_EXCHANGE)` of two paths.
func exchange(_ first: String, with second: String) throws {
    let renameExchange: UInt32 = 2
    guard inbox_renameat2(AT_FDCWD, first, AT_FDCWD, second, renameExchange) == 0 else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
}

/// A datagram socket bound at `path`, standing for systemd's `$NOTIFY_SOCKET`.
final class NotifySocket {
    let path: String
    private let socket: CInt

    init(_ path: String) throws {
        self.path = path
        socket = Glibc.socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard socket >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            close(socket)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    deinit {
        close(socket)
    }

    /// The next message, or nil when none comes within `seconds`.
    func receive(within seconds: Double) -> String? {
        var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(seconds * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
        return String(decoding: buffer[..<max(count, 0)], as: UTF8.self)
    }
}

/// What a running child writes on stderr, read as it comes.
final class StderrReader {
    let child: InboxProcess.Child
    private(set) var text = ""

    init(_ child: InboxProcess.Child) {
        self.child = child
    }

    /// Where the text the next `waitFor` looks in starts: after what the last one found.
    private var searched = 0

    /// Reads until `expected` has been written after what the last `waitFor` found, or the deadline passes.
    func waitFor(_ expected: String, timeout: TimeInterval = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        func found() -> Bool {
            guard let range = text.utf8.dropFirst(searched).firstRange(of: expected.utf8) else { return false }
            searched = text.utf8.distance(from: text.utf8.startIndex, to: range.upperBound)
            return true
        }
        while !found() {
            guard Date() < deadline else { return false }
            var poller = pollfd(fd: child.stderr, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { read(child.stderr, $0.baseAddress, $0.count) }
            if count <= 0 { return found() }
            text += String(decoding: buffer[..<count], as: UTF8.self)
        }
        return true
    }
}

/// A command refused as a whole: exit status `status`, and one line on stderr that holds every one of `words`.
func expectOneLineRefusal(
    _ result: InboxProcess.Result, _ what: String, status: Int32, naming words: [String],
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.status == status, "\(what): \(result.status) \(result.stderr)", sourceLocation: sourceLocation)
    let lines = result.stderr.split(separator: "\n")
    #expect(lines.count == 1, "\(what): \(lines)", sourceLocation: sourceLocation)
    for word in words {
        #expect(lines.first?.contains(word) == true, "\(what): \(result.stderr)", sourceLocation: sourceLocation)
    }
}
