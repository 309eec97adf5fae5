import Dispatch

/// A thread waiting for work in a list of sleepers kept by whoever hands the work out: woken by its own semaphore,
/// so that one signal wakes one thread (`WatchPool`, `FolderSyncer`).
final class Sleeper: Sendable {
    let wake = DispatchSemaphore(value: 0)

    /// Waits to be woken, or until `deadline` when there is one. On time out, `leave` takes this sleeper off its
    /// waker's list under the waker's lock and says whether it was there; if not, a waker took it off and its signal
    /// is on the way, and that signal is waited for, so that none is left over for the next wait.
    func sleep(until deadline: ContinuousClock.Instant?, leave: () -> Bool) {
        guard let deadline else { return wake.wait() }
        let timeout = DispatchTime.now() + .nanoseconds(Int(max(.zero, deadline - .now).nanoseconds))
        if wake.wait(timeout: timeout) == .timedOut, !leave() { wake.wait() }
    }

    /// Takes this sleeper off `sleepers`; false when it was not there (a waker took it off first).
    func leave(_ sleepers: inout [Sleeper]) -> Bool {
        guard let index = sleepers.firstIndex(where: { $0 === self }) else { return false }
        sleepers.remove(at: index)
        return true
    }
}
