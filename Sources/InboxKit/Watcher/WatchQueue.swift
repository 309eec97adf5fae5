import AppContainer
import Dispatch
import Synchronization

/// What the event thread hands the processor: names that may have arrived, and rescans to run.
/// Names are kept once each, in order; past `maxNames` they are dropped for a rescan, so memory stays flat.
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
        if signal { wake.signal() }
    }

    func requestRescan(_ reason: String, overflow: Bool = false) {
        state.withLock { state in
            state.rescan = state.rescan ?? reason
            if overflow { state.overflows += 1 }
        }
        wake.signal()
    }

    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }

    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Waits until something is queued, the queue is stopped, or `timeout` passes, then takes everything.
    func take(timeout: Duration) -> Batch {
        if isEmpty { _ = wake.wait(timeout: .now() + .nanoseconds(Int(timeout.nanoseconds))) }
        return state.withLock { state in
            let batch = Batch(names: state.names, rescan: state.rescan, overflows: state.overflows)
            state.names.removeAll(keepingCapacity: true)
            state.queued.removeAll(keepingCapacity: true)
            state.rescan = nil
            state.overflows = 0
            return batch
        }
    }

    private var isEmpty: Bool {
        state.withLock { $0.names.isEmpty && $0.rescan == nil && !$0.stopped }
    }
}

extension Duration {
    /// The whole duration in nanoseconds.
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
