import AppContainer
import Glibc

/// How one run of an external handler ended.
package struct HookOutcome: Sendable, Equatable {
    /// The exit status; nil when a signal ended it or it timed out.
    package let exitStatus: Int32?
    /// The signal that ended it, if any.
    package let signal: Int32?
    /// Whether it ran past its timeout and was killed.
    package let timedOut: Bool
    /// The first word it printed on stdout, lowercased, if that is `keep`, `move` or `delete`.
    package let disposition: Disposition?
    /// The first word it printed on stdout when that is not `keep`, `move` or `delete` (at most 32 bytes of it, `…`
    /// after a longer one cut); nil when it printed one of those, or nothing but white space.
    package let unknownAnswer: [UInt8]?
    /// The last 2 KiB or so of its stderr, as lossy UTF-8.
    package let stderrTail: String
    /// Whether it ran in the Landlock sandbox, with no write access to the container.
    package let landlocked: Bool

    /// Whether it exited with status 0 in time; only then is its disposition followed.
    package var succeeded: Bool { exitStatus == 0 && !timedOut }

    /// A command that could not start: status 127, as from a shell, and the reason on stderr.
    static func couldNotStart(_ reason: String) -> HookOutcome {
        HookOutcome(
            exitStatus: 127, signal: nil, timedOut: false, disposition: nil, unknownAnswer: nil,
            stderrTail: "inbox: \(reason)\n", landlocked: false)
    }
}

/// Runs an external handler (`inbox watch --exec CMD`) for Inbox items.
///
/// The command runs as `/bin/sh -c CMD` in a process group of its own, with an empty signal mask and default
/// signal handlers. Its stdin is the item, opened read-only; its stdout and stderr are pipes to the runner; it
/// inherits no other descriptor. Its environment is the runner's plus `INBOX_FILE` (the item's absolute path),
/// `INBOX_NAME` (its name) and `INBOX_CONTAINER`. Where the kernel has Landlock it runs with no write access to
/// the container (see `Landlock`). A supervisor process starts it and, once it has exited or after `timeout`,
/// kills every process it started, however detached (ARCHITECTURE.md, "The hook sandbox").
package struct HookRunner: Sendable {
    /// The command, run as `/bin/sh -c command`.
    package let command: String
    /// How long the command may run before it and everything it started are killed.
    package let timeout: Duration
    /// The container's root, exact to the byte, which Landlock keeps the command from writing to.
    package let containerRoot: [UInt8]
    /// Called with the item's name and each line the command writes on stderr (without its newline) as it
    /// comes, from the thread that runs it; nil: its stderr goes only into `HookOutcome.stderrTail`.
    package let stderrLine: (@Sendable (_ name: FileName, _ line: String) -> Void)?

    /// A runner of `command` for the items of the container at `containerRoot`.
    package init(
        command: String, timeout: Duration, containerRoot: some CStringConvertible,
        stderrLine: (@Sendable (_ name: FileName, _ line: String) -> Void)? = nil
    ) {
        self.command = command
        self.timeout = timeout
        self.containerRoot = containerRoot.pathBytes
        self.stderrLine = stderrLine
    }

    /// Whether hooks run in the Landlock sandbox on this kernel.
    package static var isLandlockAvailable: Bool { Landlock.isAvailable }

    /// Runs the command for one Inbox item; blocking; safe to call from several threads at once.
    /// - Parameters:
    ///   - itemPath: the item's absolute path, exact to the byte.
    ///   - file: the item, opened read-only by the caller; the hook reads it from its current offset.
    package func run(itemPath: [UInt8], name: FileName, file: CInt) -> HookOutcome {
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
        return finish(hook, name: name, landlocked: Landlock.isAvailable)
    }

    /// Starts the supervisor and through it the command; the hook's ends of the pipes, its stdin and the
    /// supervisor's end of the control socket are closed here once they have them.
    private func start(environment: [[UInt8]], stdin file: CInt, ruleset: CInt?) throws(Errno)
        -> StartedHook
    {
        let stdin = FileDescriptor(owning: try system_dup(file, atLeast: 3))
        let stdout = try Pipe()
        let stderr = try Pipe()
        let ends = try system_socketpair()
        let control = FileDescriptor(owning: ends.0)
        let supervisorEnd = FileDescriptor(owning: ends.1)
        let request = SpawnRequest(
            command: command, environment: environment, stdin: stdin.rawValue, stdout: stdout.write.rawValue,
            stderr: stderr.write.rawValue, control: supervisorEnd.rawValue)
        let supervisor = try request.start(confinedBy: ruleset)
        return StartedHook(supervisor: supervisor, control: control, stdout: stdout.read, stderr: stderr.read)
    }

    /// Collects the hook's output until it exits or times out, then the supervisor's report, and reaps the
    /// supervisor. On a timeout (or a failure to read) the runner shuts down its end of the control socket:
    /// at that end of file, as at the hook's exit, the supervisor kills every descendant of the hook, then
    /// reports the hook's wait status.
    private func finish(_ hook: consuming StartedHook, name: FileName, landlocked: Bool) -> HookOutcome {
        let control = hook.control
        var output = HookOutput(stderrLines: stderrLine.map { line in { line(name, $0) } })
        var end = HookOutput.End.finished
        var failure: Errno? = nil
        do {
            end = try output.collect(
                stdout: hook.stdout.rawValue, stderr: hook.stderr.rawValue, exited: control.rawValue,
                until: .now + min(timeout, .seconds(365 * 24 * 3600)))
        } catch {
            failure = error
        }
        output.finishLines()
        let timedOut = end == .timedOut
        let report = Result { () throws(Errno) -> Int32? in
            if timedOut || failure != nil { try system_shutdown(control.rawValue, CInt(SHUT_WR)) }
            return try Self.readReport(control.rawValue)
        }
        // Closed before the wait: should the shutdown or the read have failed, this end of file stops the
        // supervisor all the same.
        _ = consume control
        do {
            _ = try system_waitpid(hook.supervisor)
        } catch {
            return .couldNotStart("cannot wait for the hook '\(command)': \(error)")
        }
        if let failure {
            return .couldNotStart("cannot read the output of the hook '\(command)': \(failure)")
        }
        let status: CInt
        switch report {
        case .failure(let error):
            return .couldNotStart("cannot stop the hook '\(command)': \(error)")
        case .success(let value?) where value < 0:
            return .couldNotStart("cannot start the hook '\(command)': \(Errno(rawValue: -value))")
        case .success(let value?):
            status = value
        case .success(nil):
            status = SIGKILL  // the supervisor was killed before it could report: so, presumably, was the hook
        }
        let signal = status & 0x7F
        let exitStatus: Int32? = signal == 0 && !timedOut ? (status >> 8) & 0xFF : nil
        return HookOutcome(
            exitStatus: exitStatus, signal: signal != 0 && signal != 0x7F ? signal : nil, timedOut: timedOut,
            disposition: output.disposition, unknownAnswer: output.unknownAnswer, stderrTail: output.stderrTail,
            landlocked: landlocked)
    }

    /// The supervisor's report: the hook's wait status, or -errno when it could not start the hook; nil when
    /// the supervisor ended without one.
    private static func readReport(_ control: CInt) throws(Errno) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 4)
        var count = 0
        while count < bytes.count {
            let read = try bytes.withUnsafeMutableBytes { raw in
                Result(catching: { () throws(Errno) in
                    try system_read(control, into: UnsafeMutableRawBufferPointer(rebasing: raw[count...]))
                })
            }.get()
            if read == 0 { return nil }
            count += read
        }
        return bytes.withUnsafeBytes { $0.loadUnaligned(as: Int32.self) }
    }

    /// The runner's environment without the three `INBOX_*` names, then those three, exact to the byte.
    private func environment(itemPath: [UInt8], name: FileName) -> [[UInt8]] {
        let own: [(key: String, value: [UInt8])] = [
            ("INBOX_FILE", itemPath), ("INBOX_NAME", name.bytes), ("INBOX_CONTAINER", containerRoot),
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

/// A started hook: its supervisor's pid, the runner's end of the control socket, and the runner's ends of the
/// hook's stdout and stderr.
private struct StartedHook: ~Copyable {
    let supervisor: pid_t
    let control: FileDescriptor
    let stdout: FileDescriptor
    let stderr: FileDescriptor
}

/// A close-on-exec pipe whose ends are numbered 3 or above, so the hook's dup2 onto 0, 1 and 2 cannot
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
