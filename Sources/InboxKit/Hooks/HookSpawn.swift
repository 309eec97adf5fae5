import AppContainer
import CLinux
import Glibc

/// `/bin/sh -c CMD` ready for `posix_spawn`: arguments, environment, file actions and attributes, in C
/// memory that lives as long as the request.
final class SpawnRequest {
    private let argv: CStringArray
    private let envp: CStringArray
    private let actions = UnsafeMutablePointer<posix_spawn_file_actions_t>.allocate(capacity: 1)
    private let attributes = UnsafeMutablePointer<posix_spawnattr_t>.allocate(capacity: 1)
    private let actionsReady: Bool
    private let attributesReady: Bool

    /// The child gets `stdin`, `stdout` and `stderr` (each numbered 3 or above) as 0, 1 and 2 and no other
    /// descriptor; its own process group; an empty signal mask and default handlers for every signal,
    /// whatever the calling thread has.
    init(command: String, environment: [[UInt8]], stdin: CInt, stdout: CInt, stderr: CInt) throws(Errno) {
        argv = CStringArray([Array("sh".utf8), Array("-c".utf8), Array(command.utf8)])
        envp = CStringArray(environment)
        actionsReady = posix_spawn_file_actions_init(actions) == 0
        attributesReady = posix_spawnattr_init(attributes) == 0
        guard actionsReady, attributesReady else { throw Errno(rawValue: ENOMEM) }

        try check(posix_spawn_file_actions_adddup2(actions, stdin, 0))
        try check(posix_spawn_file_actions_adddup2(actions, stdout, 1))
        try check(posix_spawn_file_actions_adddup2(actions, stderr, 2))
        // Nothing else reaches the hook: not the inotify descriptor (no close-on-exec, ARCHITECTURE.md,
        // "libinotifytools"), not the pipes of hooks that other threads are starting at this moment.
        try check(inbox_posix_spawn_file_actions_addclosefrom_np(actions, 3))

        var signals = sigset_t()
        sigemptyset(&signals)
        try check(posix_spawnattr_setsigmask(attributes, &signals))
        // Every bit set, not sigfillset: that leaves out glibc's own two signals (32, 33), which
        // posix_spawn then hands to the child ignored, and an ignored signal stays ignored across exec.
        withUnsafeMutableBytes(of: &signals) { bytes in
            for index in bytes.indices { bytes[index] = 0xFF }
        }
        try check(posix_spawnattr_setsigdefault(attributes, &signals))
        try check(posix_spawnattr_setpgroup(attributes, 0))
        let flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP
        try check(posix_spawnattr_setflags(attributes, Int16(flags)))
    }

    deinit {
        if actionsReady { posix_spawn_file_actions_destroy(actions) }
        if attributesReady { posix_spawnattr_destroy(attributes) }
        actions.deallocate()
        attributes.deallocate()
    }

    /// Starts the child; with a ruleset, from a new thread confined to it (see `Landlock`), so that only
    /// the child, never the caller, is confined.
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
        try system_posix_spawn("/bin/sh", actions, attributes, argv.pointers, envp.pointers)
    }
}

/// Throws the error number that a posix_spawn helper returned, if any.
private func check(_ result: CInt) throws(Errno) {
    guard result == 0 else { throw Errno(rawValue: result) }
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
    let job = Unmanaged.passRetained(ThreadJob(body))
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
