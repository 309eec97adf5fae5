import AppContainer
import Glibc
import InboxKit

// The command line: parse, call InboxKit, map every error to one line and an exit status (ARCHITECTURE.md,
// "The command line"). Both executables run it: `inbox` and `inbox-formats` (ARCHITECTURE.md, "Two executables").

/// The raw bytes of each argument: names that are not UTF-8 arrive exactly.
let commandLineWords: [[UInt8]] = (1..<Int(CommandLine.argc)).map { index in
    guard let pointer = CommandLine.unsafeArgv[index] else { return [] }
    return Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map { UInt8(bitPattern: $0) }
}

func isHelp(_ word: [UInt8]) -> Bool { word == Array("-h".utf8) || word == Array("--help".utf8) }

@MainActor func runInbox(_ words: [[UInt8]]) -> Int32 {
    var rest = words[...]
    /// The `--container` values before the command.
    var containerPaths: [[UInt8]] = []
    var command: (any Command.Type)?
    var running = false
    do throws(ContainerError) {
        while let word = rest.first, command == nil {
            let text = String(decoding: word, as: UTF8.self)
            rest.removeFirst()
            if text == "--container" {
                guard let value = rest.popFirst() else { throw ContainerError(.usage, "'--container' needs a folder") }
                containerPaths.append(value)
            } else if text.hasPrefix("--container=") {
                containerPaths.append(Array(word.dropFirst("--container=".count)))
            } else if isHelp(word) {
                Output.line(Help.overview)
                return 0
            } else if text == "--version" {
                Output.line("inbox \(Inbox.version)")
                return 0
            } else if text.hasPrefix("-") {
                throw Arguments.unknownOption(text, among: ["--container", "--help", "--version"])
            } else {
                command = try Help.command(named: text)
            }
        }
        guard let command else { throw ContainerError(.usage, "no command given") }
        // `--` ends the options: `inbox move -- --help` moves an item named `--help`.
        if rest.prefix(while: { $0 != Array("--".utf8) }).contains(where: isHelp) {
            Output.line(command.help)
            return 0
        }
        if command.needsFormats {
            try FormatsCommands.checkHandedOver()
            if FormatsCommands.installed == nil { try FormatsCommands.handOver() }
        }
        var spec = command.spec
        spec.valued.insert("--container")
        var arguments = try Arguments(rest, spec: spec)
        arguments.repeated["--container", default: []].insert(contentsOf: containerPaths, at: 0)
        let named = arguments.paths("--container")
        guard named.count <= 1 || command.servesSeveralContainers else {
            throw ContainerError(.usage, "'--container' names one container here; only watch serves several")
        }
        var path = named.last
        if path == nil { path = try command.defaultContainerPath() }
        running = true
        try command.run(arguments, containerPath: path ?? [])
        return 0
    } catch {
        var error = error
        if let command, !running { error = command.failedBeforeRunning(error, words: rest) }
        Output.problem(error.message)
        if error.code == .usage {
            if let command {
                Output.error("Usage: inbox \(command.usage)\nSee 'inbox \(command.name) --help'.")
            } else {
                Output.error("Usage: inbox [--container DIR] COMMAND ...\nSee 'inbox --help'.")
            }
        }
        return error.exitStatus
    }
}

/// Runs the command line of this process and exits with its status.
@MainActor package func runInboxAndExit() -> Never {
    #if DEBUG
        // The crash tests kill the tool at its Nth system call (INBOX_CRASH_AT_CALL=N), debug builds only.
        if let crash = SyscallFaultPlan.crashFromEnvironment { exit(crash.run { runInbox(commandLineWords) }) }
    #endif
    exit(runInbox(commandLineWords))
}
