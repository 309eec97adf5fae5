import CLinux
import Dispatch
import Foundation
import Glibc

/// The built `inbox` binary, run as a real process with raw byte arguments (the tests of CLITests and
/// SystemTests run it so, as a user does); with `executable`, any other program (`runProgram`). Every process a
/// test starts goes through `start`, but the daemons of `spawn`.
public struct InboxProcess {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: [UInt8]
        public var stderr: String
        public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
        public var lines: [String] { stdoutText.split(separator: "\n").map(String.init) }
        /// The exit status, stdout as text and stderr, to bind as a tuple.
        public var parts: (status: Int32, stdout: String, stderr: String) { (status, stdoutText, stderr) }
        /// The exit status and stdout as text (with `mergingStderr`, what it wrote on both), to bind as a tuple.
        public var statusAndOutput: (status: Int32, output: String) { (status, stdoutText) }
    }

    /// `.build/<triple>/debug/inbox`, beside the test bundle, unless `INBOX_BINARY` names another.
    public static let binary: String = {
        if let path = ProcessInfo.processInfo.environment["INBOX_BINARY"] { return path }
        var folder = Bundle.main.bundleURL
        while !FileManager.default.isExecutableFile(atPath: folder.appendingPathComponent("inbox").path),
            folder.path != "/"
        {
            folder.deleteLastPathComponent()
        }
        return folder.appendingPathComponent("inbox").path
    }()

    /// Runs `inbox ARGS…` (or `executable ARGS…`) to the end, feeding `input` on stdin.
    public static func run(
        _ arguments: [[UInt8]], input: [UInt8] = [], environment: [String: String] = [:],
        terminalColumns: UInt16? = nil, stderrIsTerminal: Bool = false, mergingStderr: Bool = false,
        executable: String = binary
    ) throws -> Result {
        let child = try start(
            arguments, environment: environment, terminalColumns: terminalColumns, stderrIsTerminal: stderrIsTerminal,
            mergingStderr: mergingStderr, executable: executable)
        return try child.finish(input: input)
    }

    /// Runs `inbox ARGS…` (or `executable ARGS…`) to the end, feeding `input` on stdin.
    public static func run(
        _ arguments: String..., input: String = "", environment: [String: String] = [:], executable: String = binary
    ) throws -> Result {
        try run(arguments, input: input, environment: environment, executable: executable)
    }

    /// Runs `inbox ARGS…` (or `executable ARGS…`) to the end, feeding `input` on stdin.
    public static func run(
        _ arguments: [String], input: String = "", environment: [String: String] = [:], executable: String = binary
    ) throws -> Result {
        try run(
            arguments.map { Array($0.utf8) }, input: Array(input.utf8), environment: environment, executable: executable
        )
    }

    /// Runs `inbox ARGS…` to its end like `run`, and returns its peak resident memory in bytes (`ru_maxrss`).
    /// Linux carries a process's peak over `exec` (the hiwater of the memory it replaced: the parent's, for the
    /// vfork under `posix_spawn`), so a child spawned from this test process would report the test runner's. So
    /// python3 forks, the copy of itself (about 10 MiB) execs `inbox`, and its `wait4` gives the peak: never below
    /// the real one (`Benchmarks/spawn-each.c` measures closer, for the numbers).
    public static func runMeasuringPeak(_ arguments: [String], input: [UInt8] = []) throws -> (Result, peakBytes: Int) {
        let report = FileManager.default.temporaryDirectory.appendingPathComponent("peak-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: report) }
        let wrapper = """
            import os, sys
            pid = os.fork()
            if pid == 0:
                try:
                    os.execv(sys.argv[2], sys.argv[2:])
                finally:
                    os._exit(127)
            _, status, usage = os.wait4(pid, 0)
            with open(sys.argv[1], "w") as f:
                f.write(str(usage.ru_maxrss))
            code = os.waitstatus_to_exitcode(status)
            sys.exit(code if code >= 0 else 128 - code)
            """
        let result = try run(
            (["-c", wrapper, report, binary] + arguments).map { Array($0.utf8) }, input: input,
            executable: "/usr/bin/python3")
        let kib = try String(contentsOfFile: report, encoding: .utf8)
        guard let peak = Int(kib) else { throw POSIXError(.EIO) }
        return (result, peak * 1024)
    }

    /// Runs `inbox ARGS…` to its end, feeding `input` on stdin, killed (SIGKILL) after `seconds`: a command that
    /// loops or hangs on a filesystem must not hang the suite.
    public static func run(_ arguments: [String], input: String = "", killedAfter seconds: Int) throws -> Result {
        let child = try start(arguments.map { Array($0.utf8) })
        let pid = child.pid
        let deadline = DispatchWorkItem { kill(pid, SIGKILL) }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds), execute: deadline)
        defer { deadline.cancel() }
        return try child.finish(input: Array(input.utf8))
    }

    /// A running `inbox` process with pipes to its standard streams. Each pipe is closed once (its field is then
    /// -1): closing a number twice could close a descriptor another test's thread has since been given.
    public final class Child {
        public let pid: pid_t
        public private(set) var stdin: CInt
        public private(set) var stdout: CInt
        public private(set) var stderr: CInt
        /// Set once the process is reaped: its number may then be another process's.
        private var reaped: Int32?

        init(pid: pid_t, stdin: CInt, stdout: CInt, stderr: CInt) {
            self.pid = pid
            self.stdin = stdin
            self.stdout = stdout
            self.stderr = stderr
        }

        /// Writes `input`, closes stdin, reads both outputs to their end and waits for the exit status.
        public func finish(input: [UInt8] = []) throws -> Result {
            _ = input.withUnsafeBytes { write(stdin, $0.baseAddress, $0.count) }
            closeOnce(&stdin)
            var outputs: [[UInt8]] = [[], []]
            var open = [stdout, stderr]
            var buffer = [UInt8](repeating: 0, count: 65536)
            while open.contains(where: { $0 >= 0 }) {
                var polls = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
                if poll(&polls, nfds_t(polls.count), -1) < 0 { continue }
                for index in 0..<2 where open[index] >= 0 && polls[index].revents != 0 {
                    let count = buffer.withUnsafeMutableBytes { read(open[index], $0.baseAddress, $0.count) }
                    if count > 0 {
                        outputs[index] += buffer[..<count]
                    } else if count == 0 || errno != EINTR {
                        open[index] = -1
                    }
                }
            }
            return Result(
                status: waitForExit(), stdout: outputs[0], stderr: String(decoding: outputs[1], as: UTF8.self))
        }

        /// Reads what stdout has until `predicate` holds for all of it so far, or the deadline passes.
        public func readStdout(until predicate: (String) -> Bool, timeout: TimeInterval = 20) -> String {
            var collected: [UInt8] = []
            let deadline = Date().addingTimeInterval(timeout)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline, !predicate(String(decoding: collected, as: UTF8.self)) {
                var poller = pollfd(fd: stdout, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 100) > 0 else { continue }
                let count = buffer.withUnsafeMutableBytes { read(stdout, $0.baseAddress, $0.count) }
                if count <= 0 { break }
                collected += buffer[..<count]
            }
            return String(decoding: collected, as: UTF8.self)
        }

        /// Closes the reading end of stdout, as `head` does once it has its line.
        public func closeStdout() {
            closeOnce(&stdout)
        }

        private func closeOnce(_ fd: inout CInt) {
            if fd >= 0 { close(fd) }
            fd = -1
        }

        /// The exit status once the process has exited, or nil if it is still running at the deadline.
        public func exitStatus(within timeout: TimeInterval) -> Int32? {
            let deadline = Date().addingTimeInterval(timeout)
            var status: CInt = 0
            while Date() < deadline {
                let result = waitpid(pid, &status, WNOHANG)
                if result == pid {
                    closeOnce(&stdin)
                    closeOnce(&stdout)
                    closeOnce(&stderr)
                    reaped = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
                    return reaped
                }
                var interval = timespec(tv_sec: 0, tv_nsec: 10_000_000)
                nanosleep(&interval, nil)
            }
            return nil
        }

        public func terminate() -> Int32 {
            if let reaped { return reaped }
            kill(pid, SIGTERM)
            closeOnce(&stdin)
            return waitForExit()
        }

        private func waitForExit() -> Int32 {
            if let reaped { return reaped }
            var status: CInt = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            closeOnce(&stdout)
            closeOnce(&stderr)
            let exit = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
            reaped = exit
            return exit
        }

    }

    /// Starts `inbox ARGS…` (or `executable ARGS…`) with posix_spawn, so arguments stay exact bytes. With
    /// `terminalColumns`, its stdout is a pseudo-terminal that wide (read back with `\r\n` line ends) instead of
    /// a pipe; with `stderrIsTerminal`, so is its stderr (80 columns); with `mergingStderr`, its stderr is its
    /// stdout, both read in the order written.
    public static func start(
        _ arguments: [[UInt8]], environment: [String: String] = [:], terminalColumns: UInt16? = nil,
        stderrIsTerminal: Bool = false, mergingStderr: Bool = false, executable: String = binary
    ) throws -> Child {
        var pipes: [[CInt]] = []
        for _ in 0..<3 {
            var fds: [CInt] = [0, 0]
            guard pipe(&fds) == 0 else { throw POSIXError(.EMFILE) }
            for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
            pipes.append(fds)
        }
        if let terminalColumns {
            close(pipes[1][0])
            close(pipes[1][1])
            pipes[1] = try pseudoTerminal(columns: terminalColumns)
        }
        if stderrIsTerminal {
            close(pipes[2][0])
            close(pipes[2][1])
            pipes[2] = try pseudoTerminal(columns: 80)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipes[0][0], 0)
        posix_spawn_file_actions_adddup2(&actions, pipes[1][1], 1)
        posix_spawn_file_actions_adddup2(&actions, mergingStderr ? pipes[1][1] : pipes[2][1], 2)
        // Nothing else this test process holds open, such as a file another test is writing, reaches the child.
        inbox_posix_spawn_file_actions_addclosefrom_np(&actions, 3)
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "INBOX_CONTAINER")
        env.merge(environment) { $1 }
        let argv = ([Array(executable.utf8)] + arguments).map { bytes -> UnsafeMutablePointer<CChar>? in
            let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            for (index, byte) in bytes.enumerated() { pointer[index] = CChar(bitPattern: byte) }
            pointer[bytes.count] = 0
            return pointer
        }
        let envp = env.map { strdup("\($0.key)=\($0.value)") }
        defer {
            for pointer in argv { pointer?.deallocate() }
            for pointer in envp { free(pointer) }
        }
        // The child starts with no blocked signal and default handlers, whatever this test thread had.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        sigfillset(&signals)
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv + [nil], envp + [nil])
        close(pipes[0][0])
        close(pipes[1][1])
        close(pipes[2][1])
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        return Child(pid: pid, stdin: pipes[0][1], stdout: pipes[1][0], stderr: pipes[2][0])
    }
}

/// A pseudo-terminal `columns` wide, as [controller, terminal], both close-on-exec.
private func pseudoTerminal(columns: UInt16) throws -> [CInt] {
    // posix_openpt and friends are hidden from Swift: their ioctls, TIOCSPTLCK (unlock) and TIOCGPTN (number).
    let controller = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
    var unlock: CInt = 0
    var number: CInt = 0
    guard controller >= 0, ioctl(controller, 0x4004_5431, &unlock) == 0, ioctl(controller, 0x8004_5430, &number) == 0
    else { throw POSIXError(.ENXIO) }
    let terminal = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY | O_CLOEXEC)
    guard terminal >= 0 else { throw POSIXError(.ENXIO) }
    var size = winsize(ws_row: 24, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
    _ = ioctl(controller, UInt(TIOCSWINSZ), &size)
    return [controller, terminal]
}
