import AppContainer
import Glibc

/// What an external handler asks to be done with its item: the first word it prints.
public enum Disposition: String, Sendable {
    case keep, move, delete
}

/// How one run of an external handler ended.
public struct HookOutcome: Sendable, Equatable {
    /// The exit status; nil when a signal ended it or it timed out.
    public let exitStatus: Int32?
    /// The signal that ended it, if any.
    public let signal: Int32?
    public let timedOut: Bool
    /// The first word it printed on stdout, lowercased, if that is `keep`, `move` or `delete`.
    public let disposition: Disposition?
    /// The last 2 KiB or so of its stderr, as lossy UTF-8.
    public let stderrTail: String
    /// Whether it ran in the Landlock sandbox, with no write access to the container.
    public let landlocked: Bool

    public var succeeded: Bool { exitStatus == 0 && !timedOut }

    /// A command that could not start: status 127, as from a shell, and the reason on stderr.
    static func couldNotStart(_ reason: String) -> HookOutcome {
        HookOutcome(
            exitStatus: 127, signal: nil, timedOut: false, disposition: nil, stderrTail: "inbox: \(reason)\n",
            landlocked: false)
    }
}

/// Runs an external handler (`inbox watch --exec CMD`) for Inbox items.
///
/// The command runs as `/bin/sh -c CMD`, started with `posix_spawn` in a process group of its own, with an
/// empty signal mask and default signal handlers. Its stdin is the item, opened read-only; its stdout and
/// stderr are pipes to the runner; it inherits no other descriptor. Its environment is the runner's plus
/// `INBOX_FILE` (the item's absolute path), `INBOX_NAME` (its name) and `INBOX_CONTAINER`. Where the kernel
/// has Landlock it runs with no write access to the container (see `Landlock`). After `timeout` its whole
/// process group is killed.
public struct HookRunner: Sendable {
    public let command: String
    public let timeout: Duration
    public let containerRoot: String

    public init(command: String, timeout: Duration, containerRoot: String) {
        self.command = command
        self.timeout = timeout
        self.containerRoot = containerRoot
    }

    /// Whether hooks run in the Landlock sandbox on this kernel.
    public static var isLandlockAvailable: Bool { Landlock.isAvailable }

    /// Runs the command for one Inbox item; blocking; safe to call from several threads at once.
    /// - Parameters:
    ///   - itemPath: the item's absolute path, exact to the byte.
    ///   - file: the item, opened read-only by the caller; the hook reads it from its current offset.
    public func run(itemPath: [UInt8], name: FileName, file: CInt) -> HookOutcome {
        do {
            return try runChecked(itemPath: itemPath, name: name, file: file)
        } catch {
            return .couldNotStart(error.message)
        }
    }

    private func runChecked(itemPath: [UInt8], name: FileName, file: CInt) throws(ContainerError) -> HookOutcome {
        let path = String(decoding: itemPath, as: UTF8.self)
        let flags: CInt
        do {
            flags = try system_fcntl_getfl(file)
        } catch {
            throw error.failure("run the hook for", path)
        }
        guard flags & O_ACCMODE == O_RDONLY else {
            throw ContainerError(.refused, "cannot run the hook for '\(path)': the item is not open read-only")
        }
        let environment = environment(itemPath: itemPath, name: name)
        let hook: StartedHook
        do {
            if Landlock.isAvailable {
                // Where Landlock works the hook never runs without it: no ruleset, no run.
                let ruleset: Landlock.Ruleset
                do {
                    ruleset = try Landlock.sharedRuleset(sparing: try system_realpath(containerRoot))
                } catch {
                    throw error.failure("build the Landlock sandbox for the container", containerRoot)
                }
                hook = try withExtendedLifetime(ruleset) { () throws(Errno) in
                    try start(environment: environment, stdin: file, ruleset: ruleset.rawValue)
                }
            } else {
                hook = try start(environment: environment, stdin: file, ruleset: nil)
            }
        } catch let error as ContainerError {
            throw error
        } catch {
            throw ContainerError(.failure, "cannot start the hook '\(command)' for '\(path)': \(error)")
        }
        return finish(hook, landlocked: Landlock.isAvailable)
    }

    /// Spawns the command; the child's ends of the pipes and its stdin are closed here once it has them.
    private func start(environment: [[UInt8]], stdin file: CInt, ruleset: CInt?) throws(Errno)
        -> StartedHook
    {
        let stdin = FileDescriptor(owning: try system_dup(file, atLeast: 3))
        let stdout = try Pipe()
        let stderr = try Pipe()
        let request = try SpawnRequest(
            command: command, environment: environment, stdin: stdin.rawValue, stdout: stdout.write.rawValue,
            stderr: stderr.write.rawValue)
        let pid = try request.start(confinedBy: ruleset)
        return StartedHook(pid: pid, stdout: stdout.read, stderr: stderr.read)
    }

    /// Collects the started hook's output, kills its group on a timeout, and reaps it.
    private func finish(_ hook: borrowing StartedHook, landlocked: Bool) -> HookOutcome {
        let pid = hook.pid
        // Without pidfds (Linux < 5.3) the wait ends when both pipes close.
        let exited = (try? system_pidfd_open(pid)) ?? -1
        defer { if exited >= 0 { try? system_close(exited) } }
        var output = HookOutput()
        var end = HookOutput.End.finished
        var failure: Errno? = nil
        do {
            end = try output.collect(
                stdout: hook.stdout.rawValue, stderr: hook.stderr.rawValue, exited: exited,
                until: .now + min(timeout, .seconds(365 * 24 * 3600)))
        } catch {
            failure = error
        }
        let timedOut = end == .timedOut
        if end != .finished || failure != nil {
            // Timed out, or exited leaving others behind in its group: they go with it.
            // The group leader is not reaped yet, so its group id cannot have been reused.
            do {
                try system_kill(-pid, SIGKILL)
            } catch {
                try? system_kill(pid, SIGKILL)
            }
        }
        let status: CInt
        do {
            status = try system_waitpid(pid)
        } catch {
            return .couldNotStart("cannot wait for the hook '\(command)': \(error)")
        }
        if let failure {
            return .couldNotStart("cannot read the output of the hook '\(command)': \(failure)")
        }
        let signal = status & 0x7F
        let exitStatus: Int32? = signal == 0 && !timedOut ? (status >> 8) & 0xFF : nil
        return HookOutcome(
            exitStatus: exitStatus, signal: signal != 0 && signal != 0x7F ? signal : nil, timedOut: timedOut,
            disposition: output.disposition, stderrTail: output.stderrTail, landlocked: landlocked)
    }

    /// The runner's environment without the three `INBOX_*` names, then those three, exact to the byte.
    private func environment(itemPath: [UInt8], name: FileName) -> [[UInt8]] {
        let own: [(key: String, value: [UInt8])] = [
            ("INBOX_FILE", itemPath), ("INBOX_NAME", name.bytes), ("INBOX_CONTAINER", Array(containerRoot.utf8)),
        ]
        let ownKeys = Set(own.map { Array($0.key.utf8) + [0x3D] })
        var result: [[UInt8]] = []
        var cursor: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
        while let entry = cursor?.pointee {
            let bytes = Array(UnsafeBufferPointer(start: entry, count: strlen(entry))).map { UInt8(bitPattern: $0) }
            let key = bytes.firstIndex(of: 0x3D).map { Array(bytes[...$0]) } ?? bytes
            if !ownKeys.contains(key) { result.append(bytes) }
            cursor = cursor?.advanced(by: 1)
        }
        return result + own.map { Array($0.key.utf8) + [0x3D] + $0.value }
    }
}

/// A started hook: its process (and group) id and the runner's ends of its stdout and stderr.
private struct StartedHook: ~Copyable {
    let pid: pid_t
    let stdout: FileDescriptor
    let stderr: FileDescriptor
}

/// A close-on-exec pipe whose ends are numbered 3 or above, so the child's dup2 onto 0, 1 and 2 cannot
/// overwrite one of them.
private struct Pipe: ~Copyable {
    let read: FileDescriptor
    let write: FileDescriptor

    init() throws(Errno) {
        let (read, write) = try system_pipe()
        let readEnd = FileDescriptor(owning: read)
        let writeEnd = FileDescriptor(owning: write)
        let readAbove = try Self.aboveStandardStreams(readEnd)
        let writeAbove = try Self.aboveStandardStreams(writeEnd)
        self.read = readAbove
        self.write = writeAbove
    }

    private static func aboveStandardStreams(_ fd: consuming FileDescriptor) throws(Errno) -> FileDescriptor {
        guard fd.rawValue < 3 else { return fd }
        return FileDescriptor(owning: try system_dup(fd.rawValue, atLeast: 3))
    }
}
