import AppContainer
import Glibc

/// One subcommand: its name, help text, the arguments it accepts, and what it does.
protocol Command {
    static var name: String { get }
    static var abstract: String { get }
    /// The usage line after `inbox`, e.g. `move FILE`.
    static var usage: String { get }
    /// Help lines for the options, as (option, what it does).
    static var options: [(String, String)] { get }
    static var spec: Arguments.Spec { get }
    /// Runs the command; the container path is the resolved `--container`/environment/default.
    static func run(_ arguments: Arguments, containerPath: String) throws(ContainerError)
    /// The container when `--container` is not given.
    static func defaultContainerPath() throws(ContainerError) -> String
}

extension Command {
    static func defaultContainerPath() throws(ContainerError) -> String { Container.defaultPath() }

    static var help: String {
        var text = "OVERVIEW: \(abstract)\n\nUSAGE: inbox [--container DIR] \(usage)\n\nOPTIONS:\n"
        let all =
            options + [
                ("--container DIR", "the container (default: $INBOX_CONTAINER, else ~/.local/share/inbox/default)"),
                ("-h, --help", "show this help"),
            ]
        let width = all.map(\.0.count).max() ?? 0
        for (option, text_) in all {
            text += "  " + option + String(repeating: " ", count: width - option.count + 2) + text_ + "\n"
        }
        return text
    }
}

/// Standard output and error, written as raw bytes so names that are not UTF-8 pass through exactly.
enum Output {
    static func line(_ text: String) {
        write(STDOUT_FILENO, Array((text + "\n").utf8))
    }

    static func line(bytes: [UInt8]) {
        write(STDOUT_FILENO, bytes + [0x0A])
    }

    static func error(_ text: String) {
        write(STDERR_FILENO, Array((text + "\n").utf8))
    }

    private static func write(_ fd: CInt, _ bytes: [UInt8]) {
        let output = FileDescriptor(owning: fd)
        try? output.writeAll(bytes)
        _ = output.release()
    }
}
