import AppContainer
import Glibc

/// Who holds `watch.lock`, as its text says (ARCHITECTURE.md, "One watcher per container"): the pid on the first
/// line, then the host, its boot id and the process's start time. An `flock` on a FUSE file (and on NFS with
/// `local_lock=`) stays with one path to it, so a second watcher through another path takes it too: the text tells
/// that watcher that a live process of this boot holds the container.
struct LockHolder: Equatable {
    let pid: Int32
    let host: String
    let boot: String
    /// When the process started, in clock ticks since boot (`/proc/PID/stat`), so that a pid used again by another
    /// process is never taken for the watcher.
    let started: UInt64

    /// This process.
    static let current = LockHolder(
        pid: getpid(), host: hostName(), boot: bootID(), started: startTime(of: getpid()) ?? 0)

    /// The holder a lock's text names; nil for text that names none in full (an older watcher's pid alone, a file
    /// cut short, anything else): such a holder is not known to be alive.
    init?(text: [UInt8]) {
        let lines = text.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
        func value(_ key: String) -> String? {
            lines.first { $0.hasPrefix(key + " ") }.map { String($0.dropFirst(key.count + 1)) }
        }
        guard let first = lines.first, let pid = Int32(first), pid > 0, let host = value("host"),
            let boot = value("boot"), let started = value("started").flatMap({ UInt64($0) })
        else { return nil }
        self.init(pid: pid, host: host, boot: boot, started: started)
    }

    private init(pid: Int32, host: String, boot: String, started: UInt64) {
        self.pid = pid
        self.host = host
        self.boot = boot
        self.started = started
    }

    /// The text a watcher writes into its lock.
    var text: [UInt8] { Array("\(pid)\nhost \(host)\nboot \(boot)\nstarted \(started)\n".utf8) }

    /// Whether this is another process, alive on this host since this boot: a watcher that holds the container,
    /// whatever the `flock` of this path said.
    var isAnotherLiveWatcher: Bool {
        let this = Self.current
        guard pid != this.pid, host == this.host, boot == this.boot, !boot.isEmpty else { return false }
        return Self.startTime(of: pid) == started
    }

    private static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func bootID() -> String {
        guard let bytes = try? FileDescriptor("/proc/sys/kernel/random/boot_id", [.readOnly]).readToEnd(limit: 64)
        else { return "" }
        return String(String(decoding: bytes, as: UTF8.self).trimmingWhitespace)
    }

    /// The start time of `pid` (field 22 of `/proc/PID/stat`), or nil when no such process runs.
    private static func startTime(of pid: Int32) -> UInt64? {
        guard let bytes = try? FileDescriptor("/proc/\(pid)/stat", [.readOnly]).readToEnd(limit: 4096),
            let close = bytes.lastIndex(of: UInt8(ascii: ")"))
        else { return nil }
        // After the command's name: the state is field 3, so the start time is the 20th field from here.
        let fields = bytes[(close + 1)...].split(separator: 0x20)
        guard fields.count >= 20 else { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }
}
