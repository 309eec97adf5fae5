import AppContainer
import Dispatch
import Foundation
import Glibc
import Synchronization

/// A few threads that take the turns of many watchers (ARCHITECTURE.md, "Many containers"): a watcher with
/// something queued or due waits in one first-in, first-out line, and a free thread takes its next turn (at most
/// one batch, a scan giving way between batches when others wait), then puts it back in line if it has more. A
/// burst in one container is thus one turn after another for it, between the turns of the others. The threads
/// are as many as the cores (at least two); when every one is busy (a slow hook, say) and a watcher waits, one
/// more is started, up to four times as many, and it ends once idle for a few seconds.
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
        var due: ContinuousClock.Instant?

        init(_ watcher: Watcher, ended: @escaping @Sendable (ContainerError?) -> Void) {
            self.watcher = watcher
            self.ended = ended
        }
    }

    private struct State {
        var line: [Member] = []
        var head = 0
        var members: [ObjectIdentifier: Member] = [:]
        var threads = 0
        var idle = 0
        var closed = false
    }

    /// How long a scan keeps its thread while others wait.
    static let scanShare: Duration = .milliseconds(20)
    /// How long a thread beyond the base count stays idle before it ends.
    static let extraThreadIdle: Duration = .seconds(5)

    private let state = Mutex(State())
    private let work = DispatchSemaphore(value: 0)
    private let baseThreads: Int
    private let maxThreads: Int

    /// A pool of `threads` threads (as many as the cores, at least two), which may grow to `growth` times as many.
    init(threads: Int = max(2, Int(sysconf(CInt(_SC_NPROCESSORS_ONLN)))), growth: Int = 4) {
        baseThreads = max(1, threads)
        maxThreads = baseThreads * max(1, growth)
    }

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
        let threads = state.withLock { state -> Int in
            state.closed = true
            return state.threads
        }
        for _ in 0..<threads { work.signal() }
    }

    /// Puts `member` in line unless it is there or in its turn (then it goes back in line after it).
    private func wantTurn(_ member: Member) {
        let startThread = state.withLock { state -> Bool in
            if member.inTurn {
                member.workCame = true
                return false
            }
            guard !member.inLine, state.members[ObjectIdentifier(member)] != nil else { return false }
            member.inLine = true
            state.line.append(member)
            return claimThread(&state)
        }
        work.signal()
        if startThread { spawn() }
    }

    /// Counts a new thread when every thread is busy and more may start.
    private func claimThread(_ state: inout State) -> Bool {
        guard !state.closed, state.idle == 0, state.threads < (state.threads < baseThreads ? baseThreads : maxThreads)
        else { return false }
        state.threads += 1
        return true
    }

    private func spawn() {
        let thread = Thread { [self] in serve() }
        thread.stackSize = 512 << 10
        thread.start()
    }

    /// A thread's life: the first member in line takes a turn; with nobody in line, the thread waits for work or
    /// for the member due first.
    private func serve() {
        var idleSince = ContinuousClock.now
        while true {
            let next = state.withLock { state -> Member?? in
                if let member = nextInLine(&state) { return member }
                let extra = state.threads > baseThreads && ContinuousClock.now - idleSince >= Self.extraThreadIdle
                if state.closed || extra {
                    state.threads -= 1
                    return .some(nil)
                }
                state.idle += 1
                return nil
            }
            switch next {
            case .some(.some(let member)):
                turn(member)
                idleSince = .now
            case .some(.none):
                return
            case .none:
                let due = state.withLock { state in state.members.values.compactMap(\.due).min() }
                let limit = ContinuousClock.now + Self.extraThreadIdle
                let wake = min(due ?? limit, limit)
                _ = work.wait(timeout: .now() + .nanoseconds(Int(max(.zero, wake - .now).nanoseconds)))
                state.withLock { $0.idle -= 1 }
            }
        }
    }

    /// The first member in line, else one whose time has come.
    private func nextInLine(_ state: inout State) -> Member? {
        if state.head == state.line.count {
            let now = ContinuousClock.now
            for member in state.members.values where !member.inLine && !member.inTurn {
                if let due = member.due, due <= now {
                    member.inLine = true
                    state.line.append(member)
                }
            }
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
        member.due = nil
        return member
    }

    /// Whether a member waits in line and no thread is free to take it.
    private var othersWait: Bool {
        state.withLock { $0.head < $0.line.count && $0.idle == 0 }
    }

    /// One turn of `member`: its session opened first, closed last.
    private func turn(_ member: Member) {
        let began = ContinuousClock.now
        var goesOn = false
        var failure: ContainerError?
        do throws(ContainerError) {
            if member.session == nil {
                member.session = try WatchSession(member.watcher, start: .pooled)
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
        let again = state.withLock { state -> Bool in
            member.inTurn = false
            guard goesOn else {
                state.members.removeValue(forKey: ObjectIdentifier(member))
                return false
            }
            member.due = due
            let again = member.workCame || member.watcher.queue.hasWork || member.watcher.queue.isStopped
            if again {
                member.inLine = true
                state.line.append(member)
            }
            return again
        }
        if again { work.signal() }
        if !goesOn { member.ended(failure) }
    }
}
