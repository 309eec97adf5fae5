import Foundation
import Glibc

/// Waits for `condition` to hold, checking every `interval` (20 ms), until `timeout` passes; returns whether it held.
/// The tests' one wait with a deadline: no test sleeps a fixed time and hopes.
package func waitUntil(
    timeout: TimeInterval = 60, interval: TimeInterval = 0.02, _ condition: () throws -> Bool
) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(UInt32(interval * 1_000_000))
    }
    return try condition()
}

/// Whether process `pid` has ended: no longer in /proc, or a zombie waiting for its (new) parent.
package func processIsGone(_ pid: pid_t) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return true }
    let state = stat[close...].dropFirst(2).first  // the state follows the parenthesised command name
    return state == "Z" || state == "X"
}
