import AppContainer
import Dispatch
import Glibc
import Synchronization
import TestSupport
import Testing

/// `startDetachedThread`'s policies (ARCHITECTURE.md, "Threads that wait their turn"): a background thread is
/// `SCHED_BATCH`, and a thread it starts is an ordinary one unless asked to be background too.
@Suite struct DetachedThreadTests {
    /// `SCHED_OTHER` and `SCHED_BATCH` of `<sched.h>`, which Glibc's module leaves out.
    private static let ordinary: CInt = 0
    private static let batch: CInt = 3

    /// The policy of a thread started as asked (by a thread started as `outer` asks, when given), read on it.
    private func policy(background: Bool, startedBy outer: Bool? = nil) throws -> CInt? {
        let seen = PolicySeen()
        let done = DispatchSemaphore(value: 0)
        let body: @Sendable () -> Void = {
            seen.policy.withLock { $0 = sched_getscheduler(0) }
            done.signal()
        }
        if let outer {
            try startDetachedThread(background: outer) {
                do {
                    try startDetachedThread(background: background, body)
                } catch {
                    done.signal()
                }
            }
        } else {
            try startDetachedThread(background: background, body)
        }
        guard done.wait(timeout: .now() + 30) == .success else { return nil }
        return seen.policy.withLock { $0 }
    }

    @Test func aBackgroundThreadIsBatchAndAnOrdinaryOneIsNot() throws {
        #expect(try policy(background: true) == Self.batch)
        #expect(try policy(background: false) == Self.ordinary)
    }

    @Test func aThreadStartedByABackgroundOneIsOrdinaryUnlessAskedToBeBackground() throws {
        #expect(try policy(background: false, startedBy: true) == Self.ordinary, "not the creator's policy")
        #expect(try policy(background: true, startedBy: true) == Self.batch)
        #expect(try policy(background: true, startedBy: false) == Self.batch)
    }
}

/// The policy a thread read of itself, for the test's thread to read.
private final class PolicySeen: Sendable {
    let policy = Mutex<CInt?>(nil)
}
