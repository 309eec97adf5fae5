import AppContainer
import Glibc
import InboxCommands
import InboxFormats

/// `inbox lmtp`'s work (DESIGN §14): the options checked, the containers and the sockets found, then the server run
/// until SIGTERM (ARCHITECTURE.md, "LMTP").
enum LMTPWork {
    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let named = arguments.paths("--container")
        let root = arguments.path("--root")
        guard root == nil || named.isEmpty else {
            throw ContainerError(.usage, "'--root' serves the containers under a folder, '--container' one: choose one")
        }
        let recipients: LMTPRecipients = named.last.map { .container($0) } ?? .root(root ?? defaultRoot())
        let limits = try ImportMail.limits(arguments)
        let sessions = try arguments.integer("--sessions") ?? 20
        guard (1...1000).contains(sessions) else {
            throw ContainerError(.usage, "'--sessions' needs a number from 1 to 1000, not \(sessions)")
        }
        let address = try arguments.path("--listen").map { text throws(ContainerError) in try LMTPAddress(text) }
        guard address != nil || getenv("LISTEN_FDS") != nil else {
            throw ContainerError(.usage, "no --listen ADDRESS, and systemd handed over no socket (LISTEN_FDS)")
        }
        // The service runs as the account that owns the containers (DESIGN §14): what root would make there, that
        // account could not change.
        guard geteuid() != 0 else {
            throw ContainerError(
                .refused, "lmtp never runs as root: run it as the account that owns the containers (User= in its unit)")
        }
        if case .container(let path) = recipients { try Container.open(at: path).requireSingleHost() }
        let listeners: [LMTPListener]
        if let address {
            listeners = [try LMTPListener.bind(address)]
        } else if let handed = try LMTPListener.activated() {
            listeners = handed
        } else {
            throw ContainerError(.usage, "no --listen ADDRESS, and systemd handed over no socket (LISTEN_FDS)")
        }
        var settings = LMTPSession.Settings(
            host: hostName(),
            limits: LMTPProtocol.Limits(messageBytes: LMTPProtocol.Limits.messageBytes(maxBytes: limits.maxBytes)),
            recipients: recipients, delivery: LMTPDelivery(limits: limits))
        settings.report = { Output.problem($0) }
        // A client gone mid-reply is EPIPE to the session, never the end of the process.
        signal(SIGPIPE, SIG_IGN)
        let server = try LMTPServer(settings: settings, sessions: Int(sessions))
        let signals = SignalCatch()
        try signals.install(report: { Output.problem($0) }, stop: { server.stop() })
        defer { signals.release() }
        Output.problem(try servingLine(listeners, recipients))
        try server.run(listeners)
    }

    /// `serving LMTP on unix:/run/inbox-lmtp for 3 containers under /srv/mail`.
    private static func servingLine(_ listeners: [LMTPListener], _ recipients: LMTPRecipients) throws(ContainerError)
        -> String
    {
        let addresses = listeners.map(\.address.description).joined(separator: ", ")
        switch recipients {
        case .container(let path):
            return "serving LMTP on \(addresses) for the container \(LMTPProtocol.shown(path))"
        case .root(let root):
            let count: String
            do {
                let number = try recipients.count()
                count = number == 1 ? "1 container" : "\(number) containers"
            } catch {
                count = "no containers yet (\(error.message))"
            }
            return "serving LMTP on \(addresses) for \(count) under \(LMTPProtocol.shown(root))"
        }
    }

    /// `watch --root`'s folder of the user units: `$XDG_DATA_HOME/inbox`, else `~/.local/share/inbox`, the folder
    /// of the default container (`$INBOX_CONTAINER` is not consulted).
    private static func defaultRoot() -> [UInt8] {
        let path = Container.defaultPath { $0 == "INBOX_CONTAINER" ? nil : Container.environmentVariable($0) }
        return Array(path.dropLast("/default".utf8.count))
    }

    private static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "localhost" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
