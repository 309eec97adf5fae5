import AppContainer
import Dispatch
import FoundationEssentials
import Synchronization

/// The cleanup policy applied for a watcher on a thread of its own: once at the start, then every `interval`.
/// A large clean never delays an arrival; the clean and the arrival pipeline agree through the names the
/// clean sets aside (`CleanupJournal`).
final class BackgroundCleanup: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// Starts cleaning for `watcher`; with `once`, cleans a single time.
    static func start(_ watcher: Watcher, interval: Duration, once: Bool) -> BackgroundCleanup {
        let cleanup = BackgroundCleanup()
        do throws(Errno) {
            try startDetachedThread(stackSize: 1 << 20) {
                defer { cleanup.finished.signal() }
                while !cleanup.isStopped(watcher) {
                    watcher.applyCleanupPolicy(shouldStop: { cleanup.isStopped(watcher) })
                    if once { break }
                    _ = cleanup.wake.wait(timeout: .now() + .nanoseconds(Self.nanoseconds(interval)))
                }
            }
        } catch {
            // No thread to be had (the process's limit): no background clean this run; `finish` returns at once.
            cleanup.finished.signal()
        }
        return cleanup
    }

    /// Waits for the thread to end: for the clean under way to complete when `waiting`, else after telling
    /// it to stop (between entries). Calling it again returns at once.
    func finish(waiting: Bool) {
        if !waiting {
            stopped.store(true, ordering: .relaxed)
            wake.signal()
        }
        finished.wait()
        finished.signal()
    }

    private func isStopped(_ watcher: Watcher) -> Bool {
        stopped.load(ordering: .relaxed) || watcher.queue.isStopped
    }

    /// `interval` in nanoseconds, at least one millisecond and at most a year.
    private static func nanoseconds(_ interval: Duration) -> Int {
        let (seconds, attoseconds) = interval.components
        let whole = Int(min(max(seconds, 0), 365 * 86_400)) * 1_000_000_000
        return max(whole + Int(max(attoseconds, 0) / 1_000_000_000), 1_000_000)
    }
}

extension Watcher {
    /// Applies the cleanup policy of the container's preferences; a watcher holds the lock, so the app runs.
    /// When another clean is under way (`inbox clean`), this round is skipped. Staging files that deliveries
    /// which crashed left in the Inbox (older than `Inbox.stagingMaxAge`) go too, each logged `deleted`.
    func applyCleanupPolicy(shouldStop: @escaping () -> Bool) {
        do throws(ContainerError) {
            let swept = try inbox.sweepAbandonedStaging()
            if !swept.isEmpty { report("removed \(swept.count) staging files that crashed deliveries left") }
        } catch {
            report("cannot sweep abandoned staging files: \(error.message)")
        }
        do throws(ContainerError) {
            let plan = CleanupPlan(
                container: inbox.container, policy: try Preferences.load(inbox.container), appIsRunning: true)
            let summary = try plan.execute(log: inbox.log, waitForLock: false, shouldStop: shouldStop, { _ in })
            if summary.deleted > 0 {
                report("cleanup deleted \(summary.deleted) entries (\(summary.bytesFreed) bytes)")
            }
            if let failure = summary.firstFailure {
                report("cleanup could not delete \(summary.failed) entries: \(failure.message)")
            }
        } catch {
            report(error.code == .busy ? "cleanup skipped: \(error.message)" : "cleanup failed: \(error.message)")
        }
    }
}
