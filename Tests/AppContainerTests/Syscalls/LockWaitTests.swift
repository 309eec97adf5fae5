import AppContainer
import Dispatch
import Glibc
import Synchronization
import TestSupport
import Testing

/// The one bounded wait for an `flock` (ARCHITECTURE.md, "Nothing blocks an MTA"), against a real holder process
/// (`HeldLock`): a free lock is taken at once, a held one is given up at the bound with exit status 75 naming the
/// holder, and one let go while waiting is taken.
@Suite struct LockWaitTests {
    private func open(_ path: String) throws -> FileDescriptor {
        try FileDescriptor(path, [.readWrite, .create, .noFollow], mode: 0o644)
    }

    @Test func aFreeLockIsTakenAtOnceWhateverTheWait() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        for (number, wait) in [LockWait.unbounded, .delivery, LockWait(bound: .zero)].enumerated() {
            let path = scratch.at("free-\(number).lock")
            let file = try open(path)
            try wait.lockExclusive(file.rawValue, doing: "lock", path: path)
            // Held now: another open of the file cannot take it.
            let other = try open(path)
            #expect(throws: Errno.wouldBlock) { try system_flock(other.rawValue, LOCK_EX | LOCK_NB) }
            #expect(FlockHolder(holding: other.rawValue)?.pid == getpid())
        }
    }

    @Test func aLockHeldPastTheBoundIsTryAgainNamingItsHolder() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.at("held.lock")
        let holder = try HeldLock(path)
        defer { holder.release() }
        holder.suspend()
        let file = try open(path)
        #expect(FlockHolder(holding: file.rawValue) == FlockHolder(pid: holder.pid, command: "sleep 1000"))
        let start = ContinuousClock.now
        let error = #expect(throws: ContainerError.self) {
            try LockWait(bound: .milliseconds(300)).lockExclusive(file.rawValue, doing: "lock", path: path)
        }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(30), "\(elapsed)")
        #expect(error?.code == .busy)
        #expect(
            error?.message
                == "cannot lock '\(path)' within 300 ms: pid \(holder.pid) (sleep 1000) holds it; try again once it"
                + " lets go")
    }

    @Test func aLockLetGoWhileWaitingIsTaken() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.at("let-go.lock")
        let holder = try HeldLock(path)
        defer { holder.release() }
        let file = try open(path)
        // Whether the holder ends before the first try or during the wait, the lock is taken, long before the bound.
        let pid = holder.pid
        DispatchQueue.global().async { kill(pid, SIGKILL) }
        let start = ContinuousClock.now
        try LockWait(bound: .seconds(30)).lockExclusive(file.rawValue, doing: "lock", path: path)
        #expect(ContinuousClock.now - start < .seconds(30))
        #expect(FlockHolder(holding: file.rawValue)?.pid == getpid())
    }

    /// The bounded wait is queued in the kernel as a blocking `flock` is (`/proc/locks` lists it as a waiter, `->`),
    /// not a loop of tries that a busy lock's other takers keep beating to it; let go, the lock is its.
    @Test func aBoundedWaiterWaitsInTheKernelsQueue() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let path = scratch.at("queued.lock")
        let holder = try HeldLock(path)
        defer { holder.release() }
        let file = try open(path)
        let inode = try file.fileStatus().inode
        let fd = file.rawValue
        let taken = DispatchSemaphore(value: 0)
        let outcome = Mutex<(any Error)?>(nil)
        DispatchQueue.global().async {
            do {
                try LockWait(bound: .seconds(60)).lockExclusive(fd, doing: "lock", path: path)
            } catch {
                outcome.withLock { $0 = error }
            }
            taken.signal()
        }
        func isQueued() -> Bool {
            let locks = (try? FileDescriptor("/proc/locks", [.readOnly]).readToEnd()) ?? []
            return String(decoding: locks, as: UTF8.self).split(separator: "\n").contains { line in
                let fields = line.split(separator: " ")
                return fields.count >= 7 && fields[1] == "->" && fields[2] == "FLOCK" && fields[5] == "\(getpid())"
                    && fields[6].hasSuffix(":\(inode)")
            }
        }
        #expect(waitUntil(timeout: 30, interval: 0.001) { isQueued() })
        holder.release()
        #expect(taken.wait(timeout: .now() + 30) == .success)
        #expect(outcome.withLock { $0 } == nil)
        #expect(FlockHolder(holding: fd)?.pid == getpid())
    }

    @Test func aFreeLockHasNoHolder() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let file = try open(scratch.at("nobody.lock"))
        #expect(FlockHolder(holding: file.rawValue) == nil)
        #expect(LockWait.delivery.bound == .seconds(5))
    }
}
