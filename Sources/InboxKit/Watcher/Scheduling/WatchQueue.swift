import AppContainer
import Dispatch
import Synchronization

/// What the event thread hands the processor: names that may have arrived, and rescans to run.
/// Names are kept in order, each as its length and bytes in one buffer (about 13 bytes a name, not a heap object
/// and a set entry each: 0.2 MiB, not 1.2, when full); a name pushed again right after itself (a file's
/// `IN_CREATE`, then its `IN_CLOSE_WRITE`) is kept once. A name may still be queued twice further apart: a batch
/// looks at each name once (`ArrivalPipeline.prepareBatch`), and a name handled already is gone or arrived.
/// Past `maxNames` they are dropped for a rescan, so memory stays flat.
/// Whoever takes the turns waits on it (`wait(until:)`), or is told when it has work (`onWork`, for a pool).
final class WatchQueue: Sendable {
    struct Batch {
        var names: [FileName] = []
        /// Why the whole folder must be scanned, if it must.
        var rescan: String?
        var overflows = 0
    }

    /// The names queued: each a length byte (a name is 1 to 255 bytes) and its bytes, from `start` on.
    private struct Names {
        private var bytes: [UInt8] = []
        private var start = 0
        /// Where the name pushed last begins, while it is still queued.
        private var last: Int?
        private(set) var count = 0

        /// Appends `name`, unless it is the name pushed last and still queued; returns whether it did.
        mutating func append(_ name: FileName) -> Bool {
            if let last, bytes[last + 1..<bytes.count].elementsEqual(name.bytes) { return false }
            last = bytes.count
            bytes.append(UInt8(name.bytes.count))
            bytes.append(contentsOf: name.bytes)
            count += 1
            return true
        }

        /// Takes up to `limit` names from the front, in order.
        mutating func removeFirst(upTo limit: Int) -> [FileName] {
            var taken: [FileName] = []
            taken.reserveCapacity(min(limit, count))
            while taken.count < limit, count > 0 {
                let end = start + 1 + Int(bytes[start])
                if let name = FileName(bytes: bytes[start + 1..<end]) { taken.append(name) }
                if last == start { last = nil }
                start = end
                count -= 1
            }
            if count == 0 {
                removeAll()
            } else if start > bytes.count / 2 {
                bytes.removeFirst(start)  // the taken half goes: each byte is moved at most once per take
                last = last.map { $0 - start }
                start = 0
            }
            return taken
        }

        mutating func removeAll() {
            bytes.removeAll(keepingCapacity: bytes.count <= 65_536)
            start = 0
            last = nil
            count = 0
        }
    }

    private struct State {
        var names = Names()
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

    /// Queues `name`; returns how many names wait now (none once they gave way to a rescan).
    @discardableResult
    func push(_ name: FileName) -> Int {
        let (signal, waiting) = state.withLock { state -> (Bool, Int) in
            if state.names.count >= maxNames {
                state.names.removeAll()
                state.rescan = state.rescan ?? "backlog"
                return (true, 0)
            }
            return (state.names.append(name) && state.names.count == 1, state.names.count)
        }
        if signal { notify() }
        return waiting
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
            let batch = Batch(
                names: state.names.removeFirst(upTo: limit), rescan: state.rescan, overflows: state.overflows)
            state.rescan = nil
            state.overflows = 0
            return batch
        }
    }

    /// Whether names are queued.
    var hasNames: Bool {
        state.withLock { $0.names.count > 0 }
    }

    /// Whether names or a rescan are queued.
    var hasWork: Bool {
        state.withLock { $0.names.count > 0 || $0.rescan != nil }
    }
}

extension Duration {
    /// The whole duration in nanoseconds.
    var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
