import AppContainer

/// A watcher's round of cleaning (`BackgroundCleanup`): the cleanup policy of the container's preferences applied;
/// a watcher holds the lock, so the app runs.
struct CleanupRound: Sendable {
    let inbox: Inbox
    /// Whether the watcher still holds the container's lock.
    let lockHeld: @Sendable () -> Bool
    /// Where the watcher says what it is doing.
    let report: @Sendable (String) -> Void

    private var holdsLock: Bool { lockHeld() }

    /// Applies the policy. When another clean is under way (`inbox clean`), this round is skipped. Staging files that
    /// deliveries which crashed left in the Inbox (older than `Inbox.stagingMaxAge`) go too, each logged `deleted`.
    /// Nothing is done, or said, once the lock is no longer held (ARCHITECTURE.md, "One watcher per container"), nor
    /// said of an Inbox missing (being removed, or made again by the watcher).
    func apply(shouldStop: @escaping () -> Bool) {
        guard holdsLock else { return }
        do throws(ContainerError) {
            let swept = try inbox.sweepAbandonedStaging()
            if !swept.isEmpty { report("removed \(swept.count) staging files that crashed deliveries left") }
        } catch {
            if holdsLock, error.cause != .noSuchFile {
                report("cannot sweep abandoned staging files: \(error.message)")
            }
        }
        guard holdsLock else { return }
        do throws(ContainerError) {
            let plan = CleanupPlan(
                container: inbox.container, policy: try Preferences.load(inbox.container), appIsRunning: true)
            let summary = try plan.execute(log: inbox.log, waitForLock: false, shouldStop: shouldStop, { _ in })
            if summary.deleted > 0 {
                report("cleanup deleted \(summary.deleted) entries (\(summary.bytesFreed) bytes)")
            }
            if let unread = summary.firstUnreadable, holdsLock {
                report("cleanup kept \(summary.unreadable) entries it could not read: \(unread.message)")
            }
            if let failure = summary.firstFailure, holdsLock {
                report("cleanup could not delete \(summary.failed) entries: \(failure.message)")
            }
        } catch {
            guard holdsLock else { return }
            report(error.code == .busy ? "cleanup skipped: \(error.message)" : "cleanup failed: \(error.message)")
        }
    }
}
