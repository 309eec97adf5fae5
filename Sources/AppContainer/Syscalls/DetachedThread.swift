import CLinux
import Glibc

/// Runs `body` on a new detached POSIX thread: the one way this package starts a thread of its own that nobody
/// joins (ARCHITECTURE.md, "Modules": Foundation's `Thread` is in the whole Foundation only). `name` is what `ps`
/// and `top` show (cut to 15 bytes); `stackSize` 0 keeps the default (`ulimit -s`); a `background` thread starts
/// as `setCurrentThreadBackground` makes it, and any other is an ordinary one even when a background thread starts it
/// (a new thread inherits its creator's policy). A test's fault plan in force is the new thread's too when it is
/// `inherited`. Fails, without running `body`, when no thread can be made (EAGAIN at the process's limit).
package func startDetachedThread(
    name: String? = nil, stackSize: Int = 0, background: Bool = false, _ body: @escaping @Sendable () -> Void
) throws(Errno) {
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, CInt(PTHREAD_CREATE_DETACHED))
    if stackSize > 0 {
        let result = pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN)))
        guard result == 0 else { throw Errno(rawValue: result) }
    }
    let job = Unmanaged.passRetained(
        DetachedJob(
            name: name.map { String($0.utf8.prefix(15)) ?? $0 }, background: background,
            inheritsBackground: inbox_thread_is_batch() != 0, body: body))
    #if DEBUG
        if let plan = SyscallFaultPlan.current, plan.inherited { job.takeUnretainedValue().faults = plan }
    #endif
    do {
        _ = try system_pthread_create(runDetachedJob, job.toOpaque(), attributes: &attributes)
    } catch {
        job.release()
        throw error
    }
}

private final class DetachedJob {
    let name: String?
    let background: Bool
    /// Whether the thread that started this one is a background one, whose policy this one starts with.
    let inheritsBackground: Bool
    let body: @Sendable () -> Void
    #if DEBUG
        /// A test's inherited fault plan, in force on the new thread too.
        var faults: SyscallFaultPlan?
    #endif

    init(name: String?, background: Bool, inheritsBackground: Bool, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.background = background
        self.inheritsBackground = inheritsBackground
        self.body = body
    }
}

/// Makes the calling thread a background one (`SCHED_BATCH`), or an ordinary one again. Woken, a background thread
/// waits for the running thread's turn to end instead of preempting it, so that its wakes never switch out a
/// thread that holds the filesystem's rename lock (ARCHITECTURE.md, "Threads that wait their turn"). A policy that
/// cannot be set (a seccomp filter without `sched_setscheduler`) leaves the thread as it was: only its turns differ.
package func setCurrentThreadBackground(_ background: Bool) {
    _ = inbox_set_thread_batch(background ? 1 : 0)
}

/// The new thread's start routine: names the thread, sets its policy, runs the job and releases it.
private func runDetachedJob(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    let job = Unmanaged<DetachedJob>.fromOpaque(argument).takeRetainedValue()
    if let name = job.name { _ = inbox_set_thread_name(name) }
    if job.background || job.inheritsBackground { setCurrentThreadBackground(job.background) }
    #if DEBUG
        if let plan = job.faults {
            plan.run { job.body() }
            return nil
        }
    #endif
    job.body()
    return nil
}
