import AppContainer
import Dispatch
import FoundationEssentials
import Synchronization

/// The cleanup policy applied for the process's watchers on one thread of its own (one watcher or a fleet of
/// them): for each, once when its start-up scan is done, then every `interval`. A large clean never delays an
/// arrival; the clean and the arrival pipeline agree through the names the clean sets aside
/// (`CleanupJournal`). The thread runs while there are watchers to clean for.
final class BackgroundCleanup: Sendable {
    static let shared = BackgroundCleanup()

    /// One watcher's cleaning.
    final class Job: Sendable {
        fileprivate let round: CleanupRound
        /// The watcher's queue: its cleaning stops with it.
        private let queue: WatchQueue
        fileprivate let interval: Duration
        fileprivate let once: Bool
        fileprivate let stopped = Atomic<Bool>(false)
        fileprivate let finished = DispatchSemaphore(value: 0)
        private let schedule: BackgroundCleanup

        fileprivate init(
            _ round: CleanupRound, _ queue: WatchQueue, _ interval: Duration, _ once: Bool,
            _ schedule: BackgroundCleanup
        ) {
            self.round = round
            self.queue = queue
            self.interval = interval
            self.once = once
            self.schedule = schedule
        }

        fileprivate var isStopped: Bool {
            stopped.load(ordering: .relaxed) || queue.isStopped
        }

        /// Waits until the job is over: its clean under way completed when `waiting` (with `once`, its one
        /// clean), else after telling it to stop (between entries). Calling it again returns at once.
        func finish(waiting: Bool) {
            if !waiting {
                stopped.store(true, ordering: .relaxed)
                schedule.drop(self)
            }
            finished.wait()
            finished.signal()
        }
    }

    private struct State {
        var jobs: [(job: Job, due: ContinuousClock.Instant)] = []
        /// The job whose clean is under way.
        var cleaning: Job?
        var threadRuns = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    /// Starts cleaning with `round` at once, until `queue` (the watcher's) is stopped; with `once`, a single time.
    func add(_ round: CleanupRound, stoppingWith queue: WatchQueue, interval: Duration, once: Bool) -> Job {
        let job = Job(round, queue, interval, once, self)
        let start = state.withLock { state -> Bool in
            state.jobs.append((job, .now))
            defer { state.threadRuns = true }
            return !state.threadRuns
        }
        if start {
            do throws(Errno) {
                try startDetachedThread(name: "inbox-cleanup", stackSize: 1 << 20, background: true) { [self] in run() }
            } catch {
                // No thread to be had (the process's limit): no background clean until a watcher starts again.
                round.report("cannot start the cleanup thread (\(error)): no cleanup this run")
                let jobs = state.withLock { state -> [Job] in
                    state.threadRuns = false
                    defer { state.jobs.removeAll() }
                    return state.jobs.map(\.job)
                }
                for job in jobs { job.finished.signal() }
            }
        } else {
            wake.signal()
        }
        return job
    }

    /// Takes a stopped job off the list, unless its clean is under way (the thread then ends it).
    private func drop(_ job: Job) {
        let dropped = state.withLock { state -> Bool in
            guard state.cleaning !== job, let index = state.jobs.firstIndex(where: { $0.job === job }) else {
                return false
            }
            state.jobs.remove(at: index)
            return true
        }
        if dropped { job.finished.signal() }
    }

    /// What the thread does next.
    private enum Next {
        case end
        case wait(Duration)
        case clean(Job)
    }

    private func run() {
        while true {
            // The job due first is cleaned for when its time comes; the thread ends with the last job.
            // Whether it is due is decided under the lock, where `cleaning` is set: `drop` then leaves it alone.
            // A wait holds no job: one dropped meanwhile lets go of its round (and its container's descriptors)
            // at once, not when the wait ends.
            let next = state.withLock { state -> Next in
                guard let next = state.jobs.min(by: { $0.due < $1.due }) else {
                    state.threadRuns = false
                    return .end
                }
                let now = ContinuousClock.now
                guard next.due <= now else { return .wait(next.due - now) }
                state.cleaning = next.job
                return .clean(next.job)
            }
            let job: Job
            switch next {
            case .end: return
            case .wait(let wait):
                _ = wake.wait(timeout: .now() + .nanoseconds(Self.nanoseconds(wait)))
                continue
            case .clean(let due): job = due
            }
            if !job.isStopped { job.round.apply(shouldStop: { job.isStopped }) }
            let over = state.withLock { state -> Bool in
                state.cleaning = nil
                guard let index = state.jobs.firstIndex(where: { $0.job === job }) else { return false }
                if job.once || job.isStopped {
                    state.jobs.remove(at: index)
                    return true
                }
                state.jobs[index].due = .now + job.interval
                return false
            }
            if over { job.finished.signal() }
        }
    }

    /// `interval` in nanoseconds, at least one millisecond and at most a year.
    private static func nanoseconds(_ interval: Duration) -> Int {
        let (seconds, attoseconds) = interval.components
        let whole = Int(min(max(seconds, 0), 365 * 86_400)) * 1_000_000_000
        return max(whole + Int(max(attoseconds, 0) / 1_000_000_000), 1_000_000)
    }
}
