import CLinux
import Glibc
import Synchronization

// The fault-injection seam of the syscall layer, for tests; debug builds only. Each `system_*` wrapper asks
// `plannedFault(name)` before its real call: that counts the call on this thread and returns the error a
// test planned for it, if any. Release builds compile `plannedFault` to nothing.

#if DEBUG
    /// What a test planned for the system calls of one thread: count them, and fail the `failing`th (from 1,
    /// counted over every wrapper or only over those named `only`) with `error`. `forcing` fails the first call
    /// of its name too, uncounted, to steer the operation down a path (EXDEV into `renameat2`: the copy).
    /// An `inherited` plan is in force on the threads `startDetachedThread` starts under it too (a syncer's,
    /// whose failures a test can then reach on their own threads), counted together. A `threaded` one (inherited)
    /// leaves the watcher's worker threads running as threads (ARCHITECTURE.md, "The syscall layer"), and a plan
    /// with a `lane` counts and fails only the calls of the threads of that name (`inbox-sync`), whose order is
    /// their own whatever the others do.
    package final class SyscallFaultPlan: Sendable {
        package let failing: Int?
        package let only: String?
        package let error: Errno
        package let forcing: (name: String, error: Errno)?
        /// Instead of failing the `failing`th call, the process dies there of SIGKILL, as a crash would.
        package let crashing: Bool
        /// A second fault, counted apart: the `call`th call of `name` fails with `error`.
        package let also: (name: String, call: Int, error: Errno)?
        package let inherited: Bool
        /// Whether the watcher's worker threads (`SideThread`, `FolderSyncer`) run as threads, not inline.
        package let threaded: Bool
        /// The name of the threads whose calls are counted (as `startDetachedThread` named them); nil: every thread's.
        package let lane: String?
        /// Run before each call of the wrapper `name`, uncounted: what another process does at that moment (a writer
        /// that renames a file over a name between two calls). It must make its own calls without the wrappers.
        package let before: (name: String, run: @Sendable () -> Void)?

        private struct Counts {
            var forced = false
            var alsoSeen = 0
            var calls: [String] = []
            var injected: (index: Int, name: String)?
        }
        private let counts = Mutex(Counts())

        /// The calls counted so far, by name, in order.
        package var calls: [String] { counts.withLock { $0.calls } }
        /// The index (from 1) and name of the call made to fail, once it has.
        package var injected: (index: Int, name: String)? { counts.withLock { $0.injected } }

        package init(
            failing: Int? = nil, only: String? = nil, with error: Errno = .ioError,
            forcing: (name: String, error: Errno)? = nil, crashing: Bool = false,
            also: (name: String, call: Int, error: Errno)? = nil, inherited: Bool = false, threaded: Bool = false,
            lane: String? = nil, before: (name: String, run: @Sendable () -> Void)? = nil
        ) {
            self.failing = failing
            self.only = only
            self.error = error
            self.forcing = forcing
            self.crashing = crashing
            self.also = also
            self.inherited = inherited || threaded
            self.threaded = threaded
            self.lane = lane
            self.before = before
        }

        /// Whether a plan in force on the calling thread has the watcher's worker threads run their jobs inline, on
        /// the calling thread, one order of the two, so that a sweep counts every call in one order.
        package static var runsWorkersInline: Bool { current.map { !$0.threaded } ?? false }

        /// The plan `INBOX_CRASH_AT_CALL=N` asks of the command-line tool: die at its Nth call, for the crash
        /// tests; with `INBOX_CRASH_COUNTING=NAME`, at its Nth call of that wrapper (`renameat2`). Nil when the
        /// variable is not set.
        package static var crashFromEnvironment: SyscallFaultPlan? {
            guard let text = getenv("INBOX_CRASH_AT_CALL"), let call = Int(String(cString: text)), call > 0 else {
                return nil
            }
            return SyscallFaultPlan(
                failing: call, only: getenv("INBOX_CRASH_COUNTING").map { String(cString: $0) }, crashing: true)
        }

        /// "call 17 (renameat2) failed with ENOSPC"
        package var summary: String {
            guard let injected else { return "no call failed (\(calls.count) calls)" }
            return "call \(injected.index) (\(injected.name)) failed with \(Errno.name(of: error))"
        }

        /// Runs `body` with this plan in force on the calling thread (and no other), then the previous one.
        package func run<R>(_ body: () throws -> R) rethrows -> R {
            let previous = pthread_getspecific(Self.key)
            pthread_setspecific(Self.key, Unmanaged.passUnretained(self).toOpaque())
            defer { pthread_setspecific(Self.key, previous) }
            return try body()
        }

        /// The plan in force on the calling thread, to carry to a thread an operation starts.
        package static var current: SyscallFaultPlan? {
            pthread_getspecific(key).map { Unmanaged<SyscallFaultPlan>.fromOpaque($0).takeUnretainedValue() }
        }

        fileprivate func next(_ name: StaticString) -> Errno? {
            if let lane, Self.threadName() != lane { return nil }
            let name = name.description
            if let before, before.name == name { before.run() }
            let (fault, crash) = counts.withLock { counts -> (Errno?, Bool) in
                if let forcing, !counts.forced, forcing.name == name {
                    counts.forced = true
                    return (forcing.error, false)
                }
                if let also, also.name == name {
                    counts.alsoSeen += 1
                    if counts.alsoSeen == also.call { return (also.error, false) }
                }
                if let only, only != name { return (nil, false) }
                counts.calls.append(name)
                guard counts.injected == nil, counts.calls.count == failing else { return (nil, false) }
                if crashing { return (nil, true) }
                counts.injected = (counts.calls.count, name)
                return (error, false)
            }
            if crash { kill(getpid(), SIGKILL) }
            return fault
        }

        /// The calling thread's name, as `ps` shows it: what a `lane` names.
        package static func threadName() -> String {
            var buffer = [CChar](repeating: 0, count: 16)
            guard inbox_thread_name(&buffer) == 0 else { return "" }
            return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }

        private static let key: pthread_key_t = {
            var key = pthread_key_t()
            precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key for fault plans")
            return key
        }()
    }

    extension Errno {
        /// "ENOSPC", for the errors a fault plan injects; the number for others.
        package static func name(of error: Errno) -> String {
            let names: [CInt: String] = [
                ENOSPC: "ENOSPC", EIO: "EIO", EXDEV: "EXDEV", EACCES: "EACCES", EPERM: "EPERM", EROFS: "EROFS",
                EMFILE: "EMFILE", EINTR: "EINTR",
            ]
            return names[error.rawValue] ?? "errno \(error.rawValue)"
        }
    }
#endif

/// Counts a call of the wrapper `name` on this thread and returns the error a test planned for it, if any.
@inline(__always)
func plannedFault(_ name: StaticString) -> Errno? {
    #if DEBUG
        if let plan = SyscallFaultPlan.current { return plan.next(name) }
    #endif
    return nil
}
