import AppContainer
import Glibc
import InboxKit

/// One subcommand: its name, help text, the arguments it accepts, and what it does.
protocol Command {
    static var name: String { get }
    static var abstract: String { get }
    /// The usage line after `inbox`, e.g. `move FILE`.
    static var usage: String { get }
    /// Help lines for the options, as (option, what it does).
    static var options: [(String, String)] { get }
    static var spec: Arguments.Spec { get }
    /// What completes its positional arguments (`GeneratedDocs.swift`).
    static var positionalCompletion: ArgumentCompletion { get }
    /// What completes the value of each option in `spec.valued`, every one named (`GeneratedDocs.swift`).
    static var valueCompletions: [String: ArgumentCompletion] { get }
    /// Runs the command; the container path is the resolved `--container`/environment/default, exact to the byte.
    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError)
    /// The container when `--container` is not given.
    static func defaultContainerPath() throws(ContainerError) -> [UInt8]
    /// Whether `--container` may name several containers (`arguments.paths("--container")` has them all).
    static var servesSeveralContainers: Bool { get }
    /// Whether its work needs InboxFormats: `inbox` hands it to `inbox-formats` (`FormatsCommands`).
    static var needsFormats: Bool { get }
    /// What a failure before `run` began (its arguments, the container's path, the hand-over) reports, given the
    /// words after the command's name: `import -` reports 75 to the MTA that runs it.
    static func failedBeforeRunning(_ error: ContainerError, words: ArraySlice<[UInt8]>) -> ContainerError
}

extension Command {
    static func defaultContainerPath() throws(ContainerError) -> [UInt8] { Container.defaultPath() }
    static var servesSeveralContainers: Bool { false }
    static var needsFormats: Bool { false }
    static func failedBeforeRunning(_ error: ContainerError, words: ArraySlice<[UInt8]>) -> ContainerError { error }

    /// The command's help, fitted to the terminal (ARCHITECTURE.md, "The command line").
    static var help: String {
        let width = Terminal.columns
        var lines = TextWrapping.wrap(abstract, width: width, first: "OVERVIEW: ", rest: "  ")
        lines.append("")
        lines += TextWrapping.wrap(usage, width: width, first: "USAGE: inbox [--container DIR] ", rest: "    ")
        lines += ["", "OPTIONS:"]
        lines += TextWrapping.table(
            options + [
                ("--container DIR", "the container (default: $INBOX_CONTAINER, else ~/.local/share/inbox/default)"),
                ("-h, --help", "show this help"),
            ], width: width)
        return TextWrapping.joined(lines)
    }
}

/// Standard output and error, written as raw bytes so names that are not UTF-8 pass through exactly.
package enum Output {
    /// Where the command's own output goes: stdout, or the copy of it `keepStandardOutput()` made.
    package nonisolated(unsafe) static var standardOutput = STDOUT_FILENO

    /// Keeps stdout for the command's own output and points fd 1 at stderr (at /dev/null when there is no
    /// stderr), so that nothing a library prints reaches stdout (ARCHITECTURE.md, "Two executables").
    package static func keepStandardOutput() throws(Errno) {
        if let kept = try? system_dup(STDOUT_FILENO, atLeast: 3) { standardOutput = kept }  // else no stdout (EBADF)
        if (try? system_dup2(STDERR_FILENO, STDOUT_FILENO)) != nil { return }
        let null = try system_openat(currentDirectory, "/dev/null", .writeOnly)
        guard null != STDOUT_FILENO else { return }
        defer { try? system_close(null) }
        try system_dup2(null, STDOUT_FILENO)
    }

    package static func line(_ text: String) {
        write(standardOutput, Array((text + "\n").utf8))
    }

    /// `text` as it is, with no newline added.
    static func text(_ text: String) {
        write(standardOutput, Array(text.utf8))
    }

    package static func line(bytes: [UInt8]) {
        write(standardOutput, bytes + [0x0A])
    }

    /// An exact path or name as a result line (ARCHITECTURE.md, "The command line"): NUL-terminated with `-0`;
    /// else escaped by `TerminalText` when stdout is a terminal, exact bytes when it is not; then a newline.
    package static func name(_ bytes: [UInt8], nulTerminated: Bool = false) {
        if nulTerminated {
            write(standardOutput, bytes + [0])
        } else {
            line(names: bytes)
        }
    }

    /// A result line that holds names (`ls`, `clean`, `backup-plan`, `verify`): escaped by `TerminalText` when
    /// stdout is a terminal, so one item stays one line there; exact bytes when it is not.
    package static func line(names bytes: [UInt8]) {
        write(standardOutput, (Terminal.stdoutIsTerminal ? TerminalText.escaped(bytes) : bytes) + [0x0A])
    }

    /// `bytes` as they are; false when they could not all be written (the reader of a pipe is gone: EPIPE).
    static func bytes(_ bytes: [UInt8]) -> Bool {
        let output = FileDescriptor(owning: Output.standardOutput)
        let written = Result { () throws(Errno) in try output.writeAll(bytes) }
        _ = output.release()
        return (try? written.get()) != nil
    }

    /// Returns once nobody reads stdout any more (a pipe whose reader closed it, a terminal hung up, no stdout at
    /// all); never for a file.
    static func waitUntilReaderIsGone() {
        var output = [pollfd(fd: standardOutput, events: 0, revents: 0)]
        while true {
            output[0].revents = 0
            guard (try? system_poll(&output, timeout: -1)) == 1 else { continue }
            if output[0].revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return }
        }
    }

    /// Whether nobody reads stdout any more (a pipe whose reader closed it): `log --follow` then stops without
    /// waiting for a record to write.
    static var readerIsGone: Bool {
        var output = [pollfd(fd: standardOutput, events: 0, revents: 0)]
        return (try? system_poll(&output, timeout: 0)) == 1 && output[0].revents & Int16(POLLERR | POLLHUP) != 0
    }

    static func error(_ text: String) {
        write(STDERR_FILENO, Array((text + "\n").utf8))
    }

    /// `inbox: <text>` on stderr, always one line: a control character (a newline or an escape in a name from
    /// mail; C1 too) is written escaped, `\n`, `\t`, `\r` or `\xHH` (`TerminalText.escapedControls`).
    package static func problem(_ text: String) {
        error("inbox: " + TerminalText.escapedControls(in: text))
    }

    private static func write(_ fd: CInt, _ bytes: [UInt8]) {
        let output = FileDescriptor(owning: fd)
        try? output.writeAll(bytes)
        _ = output.release()
    }
}

/// Prints a JSON array one element a line as the elements come, so a large clean or import is never held in memory.
package struct JSONArrayPrinter {
    private var pending: String?
    private var started = false

    package init() {}

    package mutating func print(_ element: String) {
        if let pending {
            Output.line("  " + pending + ",")
        } else if !started {
            Output.line("[")
        }
        started = true
        pending = element
    }

    package mutating func finish() {
        if let pending {
            Output.line("  " + pending)
            Output.line("]")
        } else {
            Output.line("[]")
        }
        pending = nil
    }
}
