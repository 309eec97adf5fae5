import AppContainer
import Dispatch
import Glibc
import Synchronization

/// A few threads that take the turns of many watchers (ARCHITECTURE.md, "Many containers"): a watcher with
/// something queued or due waits in one first-in, first-out line, and a free thread takes its next turn (at most
/// one batch, a scan giving way between batches when others wait), then puts it back in line if it has more. A
/// burst in one container is thus one turn after another for it, between the turns of the others. The threads
/// are as many as the cores (at least two); when every one is busy (in fsync, most often, or a slow hook) and a
/// watcher waits, one more is started, up to 64, and it ends once idle for a few seconds.
final class WatchPool: Sendable {
    /// A watcher in the pool: how far its run has got and where it stands in line.
    private final class Member: @unchecked Sendable {
        let watcher: Watcher
        let ended: @Sendable (ContainerError?) -> Void
        // Each field below is read and written under the pool's lock, except `session`, which only the thread
        // taking the member's turn touches.
        var session: WatchSession?
        var inLine = false
        var inTurn = false
        /// Work came while a turn was under way: back in line after it.
        var workCame = false
        /// When it wants a turn though no work comes; nil while in line or in its turn.
        var due: ContinuousClock.Instant?
        /// The instant of its entry in `State.timers` not yet taken out, if any (one at most is live).
        var scheduled: ContinuousClock.Instant?

        init(_ watcher: Watcher, ended: @escaping @Sendable (ContainerError?) -> Void) {
            self.watcher = watcher
            self.ended = ended
        }
    }

    /// A member as a timer holds it: an entry does not keep it, so one that ended lets go of its watcher (and the
    /// container's descriptors, which pin its folders) at once, not when the entry comes due.
    private struct Timed {
        weak var member: Member?
    }

    private struct State {
        var line: [Member] = []
        var head = 0
        var members: [ObjectIdentifier: Member] = [:]
        /// The members' due times, soonest first; an entry whose member is now due at another time is stale.
        var timers = TimerHeap<Timed>()
        var threads = 0
        /// The threads waiting for work, the last to wait first woken.
        var sleepers: [Sleeper] = []
        var closed = false
    }

    /// How long a scan keeps its thread while others wait.
    static let scanShare: Duration = .milliseconds(20)
    /// How long a thread beyond the base count stays idle before it ends.
    static let extraThreadIdle: Duration = .seconds(5)

    private let state = Mutex(State())
    /// Where the sessions' folders are fsynced and their `moved` records appended, beside the turns; nil when its
    /// threads could not be made (each session then fsyncs in its turn).
    private let folderSyncer: FolderSyncer?
    private let baseThreads: Int
    private let maxThreads: Int

    /// A pool of `threads` threads (as many as the cores, at least two), which may grow to `maxThreads` while turns
    /// wait on the disk (each batch of a container ends with its own fsyncs, which run side by side). When the
    /// syncer's threads cannot be made, `report` is told, and each session fsyncs in its own turns.
    init(
        threads: Int = max(2, Int(sysconf(CInt(_SC_NPROCESSORS_ONLN)))), maxThreads: Int = 64,
        report: (@Sendable (String) -> Void)? = nil
    ) {
        baseThreads = max(1, threads)
        self.maxThreads = max(baseThreads, maxThreads)
        do throws(Errno) {
            folderSyncer = try FolderSyncer(
                name: "inbox-sync", threads: Self.syncThreads, linger: GroupCommit.syncDelay)
        } catch {
            folderSyncer = nil
            report?("fsyncing each container's folders in its own turns: no thread to fsync them beside (\(error))")
        }
    }

    /// Whether the sessions' folders are fsynced beside their turns (false when the syncer could not start).
    var syncsBeside: Bool { folderSyncer != nil }

    /// How many threads fsync the folders of the sessions' batches: fsyncs of different containers run side by side.
    static let syncThreads = 4

    /// Runs `watcher` on the pool: its session is opened on a pool thread and its turns taken until it stops;
    /// `ended` is called on a pool thread when its run is over, with its failure if it failed.
    func add(_ watcher: Watcher, ended: @escaping @Sendable (ContainerError?) -> Void) {
        let member = Member(watcher, ended: ended)
        watcher.queue.setOnWork { [weak self, weak member] in
            guard let self, let member else { return }
            self.wantTurn(member)
        }
        state.withLock { $0.members[ObjectIdentifier(member)] = member }
        wantTurn(member)
    }

    /// Ends the threads once idle. Watchers still in the pool must have been stopped and have ended.
    func close() {
        let sleepers = state.withLock { state -> [Sleeper] in
            state.closed = true
            defer { state.sleepers.removeAll() }
            return state.sleepers
        }
        for sleeper in sleepers { sleeper.wake.signal() }
        folderSyncer?.stop()
    }

    /// Puts `member` in line unless it is there or in its turn (then it goes back in line after it), and wakes a
    /// waiting thread, or starts one when none waits.
    private func wantTurn(_ member: Member) {
        let (sleeper, startThread) = state.withLock { state -> (Sleeper?, Bool) in
            if member.inTurn {
                member.workCame = true
                return (nil, false)
            }
            guard !member.inLine, state.members[ObjectIdentifier(member)] != nil else { return (nil, false) }
            putInLine(member, &state)
            return wakeOrClaim(&state)
        }
        sleeper?.wake.signal()
        if startThread { spawn() }
    }

    private func putInLine(_ member: Member, _ state: inout State) {
        member.inLine = true
        member.due = nil
        state.line.append(member)
    }

    /// A waiting thread to wake (taken off the list), else whether to start one: when every thread is busy and
    /// more may start.
    private func wakeOrClaim(_ state: inout State) -> (Sleeper?, Bool) {
        if let sleeper = state.sleepers.popLast() { return (sleeper, false) }
        guard !state.closed, state.threads < maxThreads else { return (nil, false) }
        state.threads += 1
        return (nil, true)
    }

    /// Starts a thread counted by `wakeOrClaim`. When none can be made (the process's limit) and the pool has no
    /// thread left, every member in line ends with that failure (a fleet logs it and tries again later).
    private func spawn() {
        do throws(Errno) {
            try startDetachedThread(name: "inbox-watch", stackSize: 512 << 10) { [self] in serve() }
        } catch {
            let stranded = state.withLock { state -> [Member] in
                state.threads -= 1
                guard state.threads == 0 else { return [] }
                let stranded = Array(state.line[state.head...])
                state.line.removeAll()
                state.head = 0
                for member in stranded { state.members.removeValue(forKey: ObjectIdentifier(member)) }
                return stranded
            }
            let failure = error.failure("start a thread to watch", "the containers")
            for member in stranded {
                member.session?.release()
                member.ended(failure)
            }
        }
    }

    /// A thread's life: the first member in line takes a turn; with nobody in line, the thread waits to be woken
    /// or for the member due first.
    private func serve() {
        let sleeper = Sleeper()
        var idleSince = ContinuousClock.now
        while true {
            let next = state.withLock { state -> (member: Member?, wait: ContinuousClock.Instant?) in
                if let member = nextInLine(&state) { return (member, nil) }
                let extra = state.threads > baseThreads && ContinuousClock.now - idleSince >= Self.extraThreadIdle
                if state.closed || extra {
                    state.threads -= 1
                    return (nil, nil)
                }
                state.sleepers.append(sleeper)
                let limit = ContinuousClock.now + Self.extraThreadIdle
                return (nil, min(state.timers.soonest ?? limit, limit))
            }
            if let member = next.member {
                turn(member)
                idleSince = .now
                continue
            }
            guard let wait = next.wait else { return }
            sleeper.sleep(until: wait) { state.withLock { sleeper.leave(&$0.sleepers) } }
        }
    }

    /// The first member in line, after those whose time has come have joined it.
    private func nextInLine(_ state: inout State) -> Member? {
        let now = ContinuousClock.now
        while let (due, timed) = state.timers.popDue(by: now) {
            // An older entry of a member since due at another time, or one that ended: stale.
            guard let member = timed.member, member.scheduled == due else { continue }
            member.scheduled = nil
            if member.due == due, !member.inLine, !member.inTurn { putInLine(member, &state) }
        }
        guard state.head < state.line.count else { return nil }
        let member = state.line[state.head]
        state.head += 1
        if state.head == state.line.count {
            state.line.removeAll(keepingCapacity: true)
            state.head = 0
        }
        member.inLine = false
        member.inTurn = true
        member.workCame = false
        return member
    }

    /// Whether a member waits in line and no thread is free to take it.
    private var othersWait: Bool {
        state.withLock { $0.head < $0.line.count && $0.sleepers.isEmpty }
    }

    /// One turn of `member`: its session opened first, closed last.
    private func turn(_ member: Member) {
        let began = ContinuousClock.now
        var goesOn = false
        var failure: ContainerError?
        do throws(ContainerError) {
            if member.session == nil {
                member.session = try WatchSession(member.watcher, start: .pooled, syncer: folderSyncer)
                goesOn = true
            } else if let session = member.session {
                goesOn = try session.turn(giveWay: { [self] in .now - began >= Self.scanShare && othersWait })
                if !goesOn {
                    member.session = nil
                    try session.close()
                }
            }
        } catch {
            failure = error
            goesOn = false
            member.session = nil
        }
        let due = goesOn ? member.session?.nextWake : nil
        let (sleeper, startThread) = state.withLock { state -> (Sleeper?, Bool) in
            member.inTurn = false
            guard goesOn, let due else {
                state.members.removeValue(forKey: ObjectIdentifier(member))
                return (nil, false)
            }
            if member.workCame || member.watcher.queue.hasWork || member.watcher.queue.isStopped {
                putInLine(member, &state)
                return state.head + 1 < state.line.count ? wakeOrClaim(&state) : (nil, false)
            }
            member.due = due
            guard member.scheduled != due else { return (nil, false) }
            member.scheduled = due
            let soonest = state.timers.soonest
            state.timers.push(due, Timed(member: member))
            // Sooner than any thread waits for: one is woken to wait again for this.
            guard soonest.map({ due < $0 }) ?? true else { return (nil, false) }
            return (state.sleepers.popLast(), false)
        }
        sleeper?.wake.signal()
        if startThread { spawn() }
        if !goesOn { member.ended(failure) }
    }
}
