import AppContainer
import Glibc
import InboxKit

struct ImportCommand: Command {
    static let name = "import"
    static let abstract = "Import mail: each message's attachments delivered into the Inbox, once."
    static let usage = "import SOURCE... [--json|-0] [--max-bytes SIZE]"
    static let options = [
        ("SOURCE", "a message file, an mbox, a Maildir folder (read only), or - for one message on standard input"),
        ("--json", "print a JSON array with one object a message"),
        ("-0", "end each delivered path with a NUL instead of a newline, never escaped"),
        ("--max-bytes SIZE", "refuse a message whose attachments decode to more (default 1G)"),
        ("exit status", "0 imported or duplicate; 65 not a message or refused; 66 no such SOURCE; 75 try again"),
    ]
    static let spec = Arguments.Spec(flags: ["--json", "-0"], valued: ["--max-bytes"], positionals: 1...Int.max)

    static let needsFormats = true

    static func run(_ arguments: Arguments, containerPath: String) throws(ContainerError) {
        try FormatsCommands.run(\.importMail, arguments, containerPath: containerPath)
    }
}
