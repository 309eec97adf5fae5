import AppContainer
import Dispatch
import Synchronization

/// Fsyncs the folders of applied batches beside the threads that rename, then appends the batches' records
/// (ARCHITECTURE.md, "The folders fsynced beside"): a few threads of a watcher's own, or shared by a pool's watchers.
/// A batch waits only for an fsync that starts after it was handed in, so the batches of one watcher that wait
/// together share one fsync of each folder and one append; one watcher's batches are done in the order handed in,
/// one group at a time, and several watchers' side by side. A batch lingers first (`linger`), so that those handed
/// in meanwhile share its fsyncs, unless its owner waits for the answer (`hurry`) or the syncer is stopped.
final class FolderSyncer: Sendable {
    /// One batch's work: the folders its renames changed, and the records that say so.
    struct Batch: @unchecked Sendable {
        /// Whose batch it is: one owner's batches are done in order.
        let owner: ObjectIdentifier
        let folders: [SharedDescriptor]
        /// The path a failed fsync names.
        let shown: String
        let log: EventLog
        let records: EncodedEvents
        /// Whether the append is fsynced too (else it waits for the owner's next fsync of the log).
        let durable: Bool
        /// Called once, on a syncer's thread (or the caller's: `submit`), with the seq of the batch's last record;
        /// one owner's in the order handed in.
        let done: @Sendable (Result<Appended, ContainerError>) -> Void
    }

    /// A batch's records, appended after its folders' fsync.
    struct Appended: Sendable {
        let lastSeq: UInt64
        let durable: Bool
    }

    /// The answers for one owner's batches, taken by its thread (one thread) in the order they come. The semaphore
    /// holds one signal per answer in the list (signalled under the lock), so that a take that does not wait looks at
    /// the list alone: a semaphore's wait with no time to wait still sleeps in the kernel when nothing came, a
    /// context switch each.
    final class Answers: Sendable {
        private let answers = Mutex<[Result<Appended, ContainerError>]>([])
        private let came = DispatchSemaphore(value: 0)

        func put(_ answer: Result<Appended, ContainerError>) {
            answers.withLock {
                $0.append(answer)
                came.signal()
            }
        }

        /// The next answer; `waiting`: waits for it (one must be due), else nil when none has come.
        func take(waiting: Bool) -> Result<Appended, ContainerError>? {
            if waiting {
                came.wait()
                return answers.withLock { $0.removeFirst() }
            }
            guard let answer = answers.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return nil }
            // Its signal is there already: this wait does not sleep.
            came.wait()
            return answer
        }
    }

    private struct State {
        /// The batches handed in, each with when its lingering ends.
        var waiting: [(batch: Batch, due: ContinuousClock.Instant)] = []
        /// Owners whose batches a thread is doing now.
        var busy: Set<ObjectIdentifier> = []
        /// Owners that wait for their answers: their batches linger no more.
        var hurried: Set<ObjectIdentifier> = []
        var sleepers: [Sleeper] = []
        /// The soonest a sleeper wakes by itself, for a lingering batch; nil when none is known to.
        var sleepingUntil: ContinuousClock.Instant?
        var stopped = false
        var running = 0
        /// How many groups were done: fsyncs shared, for tests.
        var groups = 0
    }

    private let state = Mutex(State())
    private let stoppedAll = DispatchSemaphore(value: 0)
    /// How long a batch waits before its fsyncs, for others to share them.
    let linger: Duration

    /// Starts `threads` threads named `name`, whose batches linger `linger`; fails when none can be made.
    init(name: String, threads: Int = 1, linger: Duration = .zero) throws(Errno) {
        self.linger = linger
        for index in 0..<max(1, threads) {
            do throws(Errno) {
                try startDetachedThread(name: name, stackSize: 512 << 10) { [self] in serve() }
                state.withLock { $0.running += 1 }
            } catch {
                // Fewer threads serve as well; none at all does not.
                if index == 0 { throw error }
                break
            }
        }
    }

    /// How many groups of batches were done so far.
    var groupsDone: Int { state.withLock { $0.groups } }

    /// Whether a thread sleeps until a lingering batch is due, for tests.
    var watchesTheTime: Bool { state.withLock { $0.sleepingUntil != nil } }

    /// Hands `batch` in; never waits, but on a syncer stopped already, which does it on the calling thread.
    func submit(_ batch: Batch) {
        #if DEBUG
            // A test's fault plan counts one thread's calls in order: the batch is done here, now (but for a
            // `threaded` plan).
            if SyscallFaultPlan.runsWorkersInline {
                Self.run([batch])
                return
            }
        #endif
        let handed = state.withLock { state -> (Bool, Sleeper?) in
            guard !state.stopped else { return (false, nil) }
            let due = ContinuousClock.now + linger
            state.waiting.append((batch, due))
            // No thread need wake for it: the one doing its owner's batches looks again once done, and a sleeper
            // set to wake by its due time sees it then.
            if state.busy.contains(batch.owner) { return (true, nil) }
            if let wakes = state.sleepingUntil, wakes <= due { return (true, nil) }
            return (true, state.sleepers.popLast())
        }
        // Stopped already, its threads ended or ending: done here.
        guard handed.0 else { return Self.run([batch]) }
        handed.1?.wake.signal()
    }

    /// Ends the lingering of `owner`'s batches handed in so far: its thread is about to wait for their answers.
    func hurry(_ owner: ObjectIdentifier) {
        let sleeper = state.withLock { state -> Sleeper? in
            guard state.waiting.contains(where: { $0.batch.owner == owner }) else { return nil }
            state.hurried.insert(owner)
            return state.busy.contains(owner) ? nil : state.sleepers.popLast()
        }
        sleeper?.wake.signal()
    }

    /// Ends the threads once every batch handed in is done (at once: none lingers), and waits for them.
    func stop() {
        let (sleepers, running) = state.withLock { state -> ([Sleeper], Int) in
            state.stopped = true
            defer { state.sleepers.removeAll() }
            return (state.sleepers, state.running)
        }
        for sleeper in sleepers { sleeper.wake.signal() }
        for _ in 0..<running { stoppedAll.wait() }
    }

    private func serve() {
        let sleeper = Sleeper()
        var finished: ObjectIdentifier?
        while true {
            var others: [Sleeper] = []
            let next = state.withLock { state -> (group: [Batch], sleepUntil: ContinuousClock.Instant?)? in
                if let finished { state.busy.remove(finished) }
                state.sleepingUntil = nil
                let taken = Self.takeGroup(&state, now: .now)
                if let group = taken.group {
                    // Other owners' batches still linger: a sleeper takes over watching the time for them, so that
                    // their fsyncs run beside this group's, not after it.
                    if state.waiting.contains(where: { !state.busy.contains($0.batch.owner) }),
                        let sleeper = state.sleepers.popLast()
                    {
                        others = [sleeper]
                    }
                    return (group, nil)
                }
                if state.stopped && state.waiting.isEmpty {
                    // Threads that slept while the last batches were busy end too.
                    others = state.sleepers
                    state.sleepers.removeAll()
                    return nil
                }
                state.sleepers.append(sleeper)
                state.sleepingUntil = taken.soonest
                return ([], taken.soonest)
            }
            for other in others { other.wake.signal() }
            guard let next else { break }
            finished = nil
            let group = next.group
            if group.isEmpty {
                sleeper.sleep(until: next.sleepUntil) { state.withLock { sleeper.leave(&$0.sleepers) } }
                continue
            }
            Self.run(group)
            finished = group[0].owner
            state.withLock { $0.groups += 1 }
        }
        stoppedAll.signal()
    }

    /// Takes every waiting batch of the first owner not busy whose oldest batch is done lingering (or hurried, or the
    /// syncer stopped), marking it busy; else tells when the soonest lingering ends.
    private static func takeGroup(_ state: inout State, now: ContinuousClock.Instant)
        -> (group: [Batch]?, soonest: ContinuousClock.Instant?)
    {
        var soonest: ContinuousClock.Instant?
        for entry in state.waiting where !state.busy.contains(entry.batch.owner) {
            let owner = entry.batch.owner
            // An owner's first batch is its oldest: its later ones are due no sooner.
            guard entry.due <= now || state.stopped || state.hurried.contains(owner) else {
                soonest = min(soonest ?? entry.due, entry.due)
                continue
            }
            let group = state.waiting.filter { $0.batch.owner == owner }.map(\.batch)
            state.waiting.removeAll { $0.batch.owner == owner }
            state.busy.insert(owner)
            state.hurried.remove(owner)
            return (group, nil)
        }
        return (nil, soonest)
    }

    /// One owner's batches: each folder fsynced once, then the records in one append.
    private static func run(_ group: [Batch]) {
        let result = Result { () throws(ContainerError) -> (first: UInt64, durable: Bool) in
            var synced: Set<ObjectIdentifier> = []
            for batch in group {
                for folder in batch.folders where synced.insert(ObjectIdentifier(folder)).inserted {
                    do throws(Errno) { try folder.sync() } catch { throw error.failure("sync", batch.shown) }
                }
            }
            var records = EncodedEvents(reservingCapacity: group.reduce(0) { $0 + $1.records.count })
            for batch in group { records.append(contentsOf: batch.records) }
            let durable = group.contains(where: \.durable)
            return (try group[0].log.append(records, durable: durable), durable)
        }
        switch result {
        case .failure(let failure):
            for batch in group { batch.done(.failure(failure)) }
        case .success(let appended):
            var next = appended.first
            for batch in group {
                let last = next + UInt64(batch.records.count) - 1
                next = last + 1
                batch.done(.success(Appended(lastSeq: last, durable: appended.durable)))
            }
        }
    }
}
