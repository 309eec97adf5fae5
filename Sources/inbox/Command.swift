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

    /// `inbox: <text>` on stderr, always one line: a control character (a newline or an escape in a name from
    /// mail) is written escaped, `\n`, `\t`, `\r` or `\xHH`.
    static func problem(_ text: String) {
        var line = "inbox: "
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A: line += "\\n"
            case 0x09: line += "\\t"
            case 0x0D: line += "\\r"
            case 0..<0x20, 0x7F: line += "\\x" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: line.unicodeScalars.append(scalar)
            }
        }
        error(line)
    }

    private static func write(_ fd: CInt, _ bytes: [UInt8]) {
        let output = FileDescriptor(owning: fd)
        try? output.writeAll(bytes)
        _ = output.release()
    }
}
