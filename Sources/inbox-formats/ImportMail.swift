import AppContainer
import Glibc
import InboxCommands
import InboxFormats

/// `inbox import`'s work: each source's messages imported, what came of them printed, the first failure mapped to
/// the exit status an MTA acts on.
enum ImportMail {
    static func run(_ arguments: Arguments, containerPath: String) throws(ContainerError) {
        var limits = MailLimits()
        if let text = arguments.string("--max-bytes") {
            guard let bytes = CleanupPolicy.bytes(from: text) else {
                throw ContainerError(.usage, "'\(text)' is not a size for --max-bytes (try 512M or 1G)")
            }
            limits.maxBytes = bytes
        }
        let importer = try MailImporter(inbox: try Inbox(containerPath: containerPath), limits: limits)
        let format = try ResultFormat(arguments)
        let json = format == .json
        let progress = ProgressLine.standardError()
        var objects = json ? JSONArrayPrinter() : nil
        var messages = 0
        var attachments = 0
        var refused = 0
        var failed = 0
        var firstFailure: ContainerError?
        for source in arguments.positionals {
            do {
                try importer.importSource(source, skipped: Output.problem) { message in
                    messages += 1
                    attachments += message.attachments.count
                    progress.clear()
                    if json {
                        objects?.print(message.json)
                    } else {
                        for attachment in message.attachments {
                            Output.name(attachment.item.path, nulTerminated: format == .nulTerminated)
                        }
                    }
                    if message.status == .refused {
                        Output.problem("refused a message of '\(message.source)': \(message.reason ?? "")")
                        refused += 1
                        firstFailure = firstFailure ?? ContainerError(.badData, message.reason ?? "refused")
                    }
                    progress.draw("importing… \(messages) messages, \(attachments) attachments")
                }
            } catch {
                progress.clear()
                Output.problem(error.message)
                failed += 1
                firstFailure = firstFailure ?? error
            }
        }
        progress.clear()
        objects?.finish()
        guard let failure = firstFailure else { return }
        var what: [String] = []
        if refused > 0 {
            what.append("\(refused) of \(messages) \(Self.plural(messages, "message", "messages")) refused")
        }
        if failed > 0 {
            let sources = arguments.positionals.count
            what.append("\(failed) of \(sources) \(Self.plural(sources, "source", "sources")) failed")
        }
        throw ContainerError(Self.forTheMailer(failure.code), what.joined(separator: "; ") + " (see above)")
    }

    private static func plural(_ count: Int, _ one: String, _ many: String) -> String { count == 1 ? one : many }

    /// What an MTA needs to hear: 65 (bounce) for a message that is not one or passes a limit, 66 for a source
    /// that does not exist, and 75 (keep the message, try again later) for anything else.
    private static func forTheMailer(_ code: ContainerError.Code) -> ContainerError.Code {
        switch code {
        case .badData, .noSuchItem, .usage: code
        default: .busy
        }
    }
}
