import AppContainer
import Glibc

/// `/bin/sh -c CMD` ready to start under a supervisor (ARCHITECTURE.md, "The hook sandbox"): arguments and
/// environment in C memory that lives as long as the request.
final class SpawnRequest {
    private let argv: CStringArray
    private let envp: CStringArray
    private let streams: (stdin: CInt, stdout: CInt, stderr: CInt)
    private let control: CInt

    /// The hook gets `stdin`, `stdout` and `stderr` (each numbered 3 or above) as 0, 1 and 2 and no other
    /// descriptor, not the inotify descriptor (no close-on-exec, ARCHITECTURE.md, "libinotifytools") nor the
    /// pipes of hooks that other threads are starting at this moment; its own process group; an empty signal
    /// mask and default handlers for every signal, whatever the calling thread has. The supervisor keeps
    /// `control` alone, its end of a stream socket pair.
    init(command: String, environment: [[UInt8]], stdin: CInt, stdout: CInt, stderr: CInt, control: CInt) {
        argv = CStringArray([Array("sh".utf8), Array("-c".utf8), Array(command.utf8)])
        envp = CStringArray(environment)
        streams = (stdin, stdout, stderr)
        self.control = control
    }

    /// Starts the supervisor, which starts the hook, and returns the supervisor's pid; with a ruleset, from a
    /// new thread confined to it (see `Landlock`), so that only the two of them and what the hook starts, never
    /// the caller, are confined.
    func start(confinedBy ruleset: CInt?) throws(Errno) -> pid_t {
        guard let ruleset else { return try spawn() }
        var result: Result<pid_t, Errno> = .failure(.invalidArgument)
        try runOnNewThread {
            result = Result { () throws(Errno) in
                try Landlock.confineCurrentThread(to: ruleset)
                return try self.spawn()
            }
        }
        return try result.get()
    }

    private func spawn() throws(Errno) -> pid_t {
        try system_spawnSupervised(
            "/bin/sh", argv.pointers, envp.pointers, stdin: streams.stdin, stdout: streams.stdout,
            stderr: streams.stderr, control: control)
    }
}

/// NUL-terminated copies of byte strings and a NULL-terminated array of pointers to them, for C.
private final class CStringArray {
    let pointers: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>
    private let count: Int

    init(_ strings: [[UInt8]]) {
        count = strings.count
        pointers = .allocate(capacity: strings.count + 1)
        for (index, bytes) in strings.enumerated() {
            let string = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            for (offset, byte) in bytes.enumerated() { string[offset] = CChar(bitPattern: byte) }
            string[bytes.count] = 0
            pointers[index] = string
        }
        pointers[strings.count] = nil
    }

    deinit {
        for index in 0..<count { pointers[index]?.deallocate() }
        pointers.deallocate()
    }
}

/// Runs `body` on a new thread of its own and returns once that thread has ended.
private func runOnNewThread(_ body: @escaping () -> Void) throws(Errno) {
    #if DEBUG
        // A test's fault plan covers the new thread too.
        let plan = SyscallFaultPlan.current
        let job = Unmanaged.passRetained(ThreadJob { if let plan { plan.run(body) } else { body() } })
    #else
        let job = Unmanaged.passRetained(ThreadJob(body))
    #endif
    let thread: pthread_t
    do {
        thread = try system_pthread_create(runThreadJob, job.toOpaque())
    } catch {
        job.release()
        throw error
    }
    try system_pthread_join(thread)
}

private final class ThreadJob {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// The new thread's start routine: runs the job and releases it.
private func runThreadJob(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    Unmanaged<ThreadJob>.fromOpaque(argument).takeRetainedValue().body()
    return nil
}
