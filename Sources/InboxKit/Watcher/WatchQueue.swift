import AppContainer
import Dispatch
import Synchronization

/// What the event thread hands the processor: names that may have arrived, and rescans to run.
/// Names are kept once each, in order; past `maxNames` they are dropped for a rescan, so memory stays flat.
/// Whoever takes the turns waits on it (`wait(until:)`), or is told when it has work (`onWork`, for a pool).
final class WatchQueue: Sendable {
    struct Batch {
        var names: [FileName] = []
        /// Why the whole folder must be scanned, if it must.
        var rescan: String?
        var overflows = 0
    }

    private struct State {
        var names: [FileName] = []
        var queued: Set<FileName> = []
        var rescan: String?
        var overflows = 0
        var stopped = false
        var onWork: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    let maxNames: Int

    init(maxNames: Int = 16_384) {
        self.maxNames = maxNames
    }

    func push(_ name: FileName) {
        let signal = state.withLock { state -> Bool in
            guard state.queued.insert(name).inserted else { return false }
            if state.names.count >= maxNames {
                state.names.removeAll()
                state.queued.removeAll()
                state.rescan = state.rescan ?? "backlog"
                return true
            }
            state.names.append(name)
            return state.names.count == 1
        }
        if signal { notify() }
    }

    func requestRescan(_ reason: String, overflow: Bool = false) {
        state.withLock { state in
            state.rescan = state.rescan ?? reason
            if overflow { state.overflows += 1 }
        }
        notify()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        notify()
    }

    /// Wakes whoever takes the turns, with nothing queued (something else changed).
    func poke() {
        notify()
    }

    /// Calls `onWork` (on the caller's thread) whenever work is queued, instead of waking a waiter.
    func setOnWork(_ onWork: @escaping @Sendable () -> Void) {
        state.withLock { $0.onWork = onWork }
    }

    private func notify() {
        if let onWork = state.withLock({ $0.onWork }) {
            onWork()
        } else {
            wake.signal()
        }
    }

    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Waits until something is queued, the queue is stopped, or `deadline` passes.
    func wait(until deadline: ContinuousClock.Instant) {
        guard !hasWork && !isStopped else { return }
        let timeout = max(.zero, deadline - .now)
        _ = wake.wait(timeout: .now() + .nanoseconds(Int(min(timeout, .seconds(86_400 * 365)).nanoseconds)))
    }

    /// Takes the first `limit` names queued (the rest stay, in order) with the rescan asked for and the overflows.
    func take(limit: Int) -> Batch {
        state.withLock { state in
            var batch = Batch(rescan: state.rescan, overflows: state.overflows)
            if state.names.count <= limit {
                batch.names = state.names
                state.names.removeAll(keepingCapacity: true)
                state.queued.removeAll(keepingCapacity: true)
            } else {
                batch.names = Array(state.names[..<limit])
                state.names.removeFirst(limit)
                for name in batch.names { state.queued.remove(name) }
            }
            state.rescan = nil
            state.overflows = 0
            return batch
        }
    }

    /// Whether names are queued.
    var hasNames: Bool {
        state.withLock { !$0.names.isEmpty }
    }

    /// Whether names or a rescan are queued.
    var hasWork: Bool {
        state.withLock { !$0.names.isEmpty || $0.rescan != nil }
    }
}

extension Duration {
    /// The whole duration in nanoseconds.
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
