import Foundation
import Glibc

/// A lock file held by another process, as an `inbox import` stopped with ^Z holds `import.lock`: util-linux's
/// `flock --no-fork PATH sleep 1000`, one process all along (flock takes the lock, then execs `sleep`), so
/// `/proc/locks` names its pid, `sleep 1000` is its command line, and it holds the lock until it ends.
/// `suspend()` stops it (SIGSTOP); `release()` kills it (SIGKILL) and reaps it, and runs at `deinit` too.
public final class HeldLock {
    /// The holder's pid, which `/proc/locks` names.
    public let pid: pid_t
    private let child: InboxProcess.Child
    private var released = false

    /// Starts the holder of an exclusive `flock` on `path` (made when missing) and waits, 30 s at most, until it
    /// holds it: flock runs `sleep` only once it does.
    public init(_ path: String) throws {
        child = try InboxProcess.start(
            ["--no-fork", path, "sleep", "1000"].map { Array($0.utf8) }, executable: "/usr/bin/flock")
        pid = child.pid
        let deadline = Date().addingTimeInterval(30)
        while Self.commandLine(of: child.pid) != "sleep\u{0}1000\u{0}" {
            guard Date() < deadline, child.exitStatus(within: 0.01) == nil else {
                kill(pid, SIGKILL)
                _ = child.terminate()
                throw POSIXError(.ETIMEDOUT)
            }
        }
    }

    private static func commandLine(of pid: pid_t) -> String? {
        (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// Stops the holder, as ^Z stops a command in a shell: it keeps the lock.
    public func suspend() {
        kill(pid, SIGSTOP)
    }

    /// Ends the holder (stopped or not), which lets go of the lock; waits until it has.
    public func release() {
        guard !released else { return }
        released = true
        kill(pid, SIGKILL)
        _ = child.terminate()
    }

    deinit {
        release()
    }
}
