import AppContainer
import Dispatch
import FoundationEssentials
import Synchronization

extension Inbox {
    /// Runs one-time setup (`Setup.run`) unless it is done, and logs `setup` durably with `templates` (files
    /// copied), `kept` (names already there) and `preferences` (written). Returns nil when it was done before.
    @discardableResult
    package func runSetup(shouldContinue: () -> Bool = { true }) throws(ContainerError) -> Setup.Report? {
        guard let report = try Setup.run(container, shouldContinue: shouldContinue) else { return nil }
        try log.append(
            Event(
                .setup,
                [
                    "templates": .int(Int64(report.templatesCopied)), "kept": .int(Int64(report.templatesKept)),
                    "preferences": .bool(report.preferencesWritten),
                ]),
            durable: true)
        return report
    }
}

/// One-time setup on a thread of its own, so that the watcher's first arrival never waits for it.
final class BackgroundSetup: Sendable {
    private let cancelled = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// Starts setup for `inbox` unless it is done; `report` gets a line when it ends or fails.
    static func start(_ inbox: Inbox, report: @escaping @Sendable (String) -> Void) -> BackgroundSetup? {
        guard !Setup.isDone(inbox.container) else { return nil }
        let setup = BackgroundSetup()
        do throws(Errno) {
            try startDetachedThread(stackSize: 1 << 20) {
                defer { setup.finished.signal() }
                do throws(ContainerError) {
                    if let done = try inbox.runSetup(shouldContinue: { !setup.cancelled.load(ordering: .relaxed) }) {
                        report("one-time setup done: \(done.templatesCopied) template files copied")
                    }
                } catch {
                    if setup.cancelled.load(ordering: .relaxed) {
                        report("one-time setup stopped unfinished; it runs again at the next start")
                    } else {
                        report("one-time setup failed (it runs again at the next start): \(error.message)")
                        _ = try? inbox.log.append(
                            Event(.error, ["during": .string("setup"), "message": .string(error.message)]))
                    }
                }
            }
        } catch {
            report(
                "one-time setup failed (it runs again at the next start): \(error.failure("start a thread for", "setup").message)"
            )
            return nil
        }
        return setup
    }

    /// Waits for the thread to end: for setup to complete when `waiting`, else after telling it to stop.
    func finish(waiting: Bool) {
        if !waiting { cancelled.store(true, ordering: .relaxed) }
        finished.wait()
        finished.signal()
    }
}
