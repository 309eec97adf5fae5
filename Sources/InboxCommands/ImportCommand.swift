import AppContainer
import Glibc
import InboxKit

package struct ImportCommand: Command {
    static let name = "import"
    static let abstract = "Import mail: each message's attachments delivered into the Inbox, once."
    static let usage = "import SOURCE... [--json|-0] [--max-bytes SIZE]"
    static let options = [
        ("SOURCE", "a message file, an mbox, a Maildir folder (read only), or - for one message on standard input"),
        ("--json", "print a JSON array with one object a message"),
        ("-0", "end each delivered path with a NUL instead of a newline, never escaped"),
        ("--max-bytes SIZE", "refuse a message whose attachments decode to more (default 1G)"),
        (
            "exit status",
            "0 imported, a duplicate, or no attachment; 65 a message refused (not a message, over a limit); for -, 75"
                + " for anything else (the MTA keeps the message and tries again); for files, 66 no such SOURCE, 73 no"
                + " container, 74 an I/O error"
        ),
    ]
    static let spec = Arguments.Spec(flags: ["--json", "-0"], valued: ["--max-bytes"], positionals: 1...Int.max)

    static let needsFormats = true

    /// Whether the words read a message from standard input, the way an MTA runs a delivery agent.
    package static func readsStandardInput(_ words: some Sequence<[UInt8]>) -> Bool {
        words.contains(Array("-".utf8))
    }

    /// For `-`, a failure (not a refusal, which is a message's outcome) is never the message's fault, whether the
    /// installation's before it is read or the container's after: 75, so the MTA keeps the message and tries again
    /// (ARCHITECTURE.md, "Mail import"). The one place this rule is kept.
    package static func failure(_ error: ContainerError, words: some Sequence<[UInt8]>) -> ContainerError {
        readsStandardInput(words) ? ContainerError(.busy, error.message) : error
    }

    static func failedBeforeRunning(_ error: ContainerError, words: ArraySlice<[UInt8]>) -> ContainerError {
        failure(error, words: words)
    }

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        try FormatsCommands.run(\.importMail, arguments, containerPath: containerPath)
    }
}
