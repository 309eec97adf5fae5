import Glibc

/// The crash sweep: a command killed (SIGKILL) at each of its system calls in turn (`INBOX_CRASH_AT_CALL=N`, debug
/// builds), then started again; each round checks what the next start finds.
package enum CrashSweep {
    /// The exit status of a process killed by SIGKILL, as `InboxProcess` reports it.
    package static let killed: Int32 = 128 + SIGKILL

    /// Runs `round(N)` for N = 1, 2, … until the command it runs is no longer killed; returns how many were.
    package static func everyCall(_ label: String, _ round: (Int) throws -> Bool) throws -> Int {
        var crashes = 0
        for call in 1...10_000 {
            guard try round(call) else { break }
            crashes += 1
        }
        print("crash points \(label): \(crashes)")
        return crashes
    }
}
