import AppContainer
import Dispatch

/// A thread of one watcher's own that runs one job at a time beside the watcher's thread (ARCHITECTURE.md, "The hot
/// path"): the next batch's preparation while the batch before is applied. Only the watcher's thread calls it. A job and its result are written by one
/// side before it signals and read by the other after it waits, so the semaphores order every access.
final class SideThread<Result>: @unchecked Sendable {
    private let handed = DispatchSemaphore(value: 0)
    private let done = DispatchSemaphore(value: 0)
    private var job: (() -> Result)?
    private var result: Result?
    /// Whether the job was run on the caller's thread (a test's fault plan in force).
    private var ranHere = false
    /// Whether a job was handed in and not yet waited for.
    private(set) var isRunning = false

    /// Starts the thread, a background one (`startDetachedThread`); fails when no thread can be made.
    init(name: String) throws(Errno) {
        try startDetachedThread(name: name, background: true) { [self] in
            while true {
                handed.wait()
                // Handed nothing: stopped.
                guard let job else { return }
                result = job()
                self.job = nil
                done.signal()
            }
        }
    }

    /// Hands `job` to the thread. One at a time: the one before must have been waited for.
    func start(_ job: @escaping () -> Result) {
        precondition(!isRunning, "a job is already running")
        isRunning = true
        #if DEBUG
            // A test's fault plan counts the calls of one thread in order: the job runs here, now, one order of
            // the two that overlap, so that a fault sweep reaches every call in it (but for a `threaded` plan).
            if SyscallFaultPlan.runsWorkersInline {
                result = job()
                ranHere = true
                return
            }
        #endif
        self.job = job
        handed.signal()
    }

    /// Waits for the job handed in and returns its result; nil when none was.
    func wait() -> Result? {
        guard isRunning else { return nil }
        if !ranHere { done.wait() }
        return taken()
    }

    private func taken() -> Result? {
        ranHere = false
        isRunning = false
        defer { result = nil }
        return result
    }

    /// Waits for the job under way, if any, and ends the thread.
    func stop() {
        _ = wait()
        job = nil
        handed.signal()
    }
}
