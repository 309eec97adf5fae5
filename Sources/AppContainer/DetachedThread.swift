import CLinux
import Glibc

/// Runs `body` on a new detached POSIX thread: the one way this package starts a thread of its own that nobody
/// joins (ARCHITECTURE.md, "Modules": Foundation's `Thread` is in the whole Foundation only). `name` is what `ps`
/// and `top` show (cut to 15 bytes); `stackSize` 0 keeps the default (`ulimit -s`). Fails, without running `body`,
/// when no thread can be made (EAGAIN at the process's limit).
package func startDetachedThread(
    name: String? = nil, stackSize: Int = 0, _ body: @escaping @Sendable () -> Void
) throws(Errno) {
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, CInt(PTHREAD_CREATE_DETACHED))
    if stackSize > 0 {
        let result = pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN)))
        guard result == 0 else { throw Errno(rawValue: result) }
    }
    let job = Unmanaged.passRetained(DetachedJob(name: name.map { String($0.utf8.prefix(15)) ?? $0 }, body: body))
    do {
        _ = try system_pthread_create(runDetachedJob, job.toOpaque(), attributes: &attributes)
    } catch {
        job.release()
        throw error
    }
}

private final class DetachedJob {
    let name: String?
    let body: @Sendable () -> Void

    init(name: String?, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// The new thread's start routine: names the thread, runs the job and releases it.
private func runDetachedJob(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    let job = Unmanaged<DetachedJob>.fromOpaque(argument).takeRetainedValue()
    if let name = job.name { _ = inbox_set_thread_name(name) }
    job.body()
    return nil
}
