import AppContainer
import InboxKit

package struct LMTPCommand: Command {
    static let name = "lmtp"
    static let abstract = "Serve LMTP: mail delivered by an MTA imported into each recipient's container, once."
    static let usage = "lmtp [--root DIR|--container DIR] [--listen ADDRESS] [--max-bytes SIZE] [--sessions N]"
    static let options = [
        (
            "--root DIR",
            "serve every container under DIR: a recipient's local part up to its first + names DIR/NAME (default:"
                + " $XDG_DATA_HOME/inbox, else ~/.local/share/inbox)"
        ),
        ("--container DIR", "deliver every recipient into this one container"),
        (
            "--listen ADDRESS",
            "unix:PATH (a socket made mode 0660) or inet:HOST:PORT on a loopback address; without it, the sockets"
                + " systemd hands over (inbox-lmtp.socket)"
        ),
        ("--max-bytes SIZE", "refuse a message whose attachments decode to more (default 1G)"),
        ("--sessions N", "serve at most N connections at once (default 20); more wait"),
        (
            "replies",
            "after the data, one a recipient: 250 imported, a duplicate or no attachments, once durable; 552 over a"
                + " limit; 554 not a message; 451 anything else (the MTA tries again). 550 at RCPT for a name with no"
                + " container under DIR"
        ),
        (
            "exit status",
            "0 stopped by SIGTERM (the messages in hand answered first); 64 a usage error; 73 no container, or the"
                + " address cannot be bound; 75 the address is in use; 77 run as root"
        ),
    ]
    static let spec = Arguments.Spec(valued: ["--root", "--listen", "--max-bytes", "--sessions"])

    static let needsFormats = true

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        try FormatsCommands.run(\.lmtp, arguments, containerPath: containerPath)
    }
}
