import AppContainer
import Glibc
import InboxKit

/// A message received over LMTP imported into each recipient's container by the path `inbox import -` takes
/// (`MailImporter.importMessage(fromFile:)`), each outcome the reply §12's exit status maps to: 0 → 250, 65 → 552
/// or 554, 75 → 451 (DESIGN §14, "Replies"). The `imported` record's source is `lmtp`.
package struct LMTPDelivery: Sendable {
    /// The limits of `--max-bytes`, as `import` has them.
    package let limits: MailLimits

    package init(limits: MailLimits) { self.limits = limits }

    /// The source records name.
    static let source = "lmtp"

    /// One outcome per recipient, in order; one recipient's failure never changes another's.
    package func deliver(_ file: CInt, to recipients: [LMTPProtocol.Accepted]) -> [LMTPProtocol.Outcome] {
        recipients.map { deliver(file, into: $0.container) }
    }

    /// The message in `file` imported into the container at `path`: the importer's answer once its records are
    /// durable, as for `import -`.
    func deliver(_ file: CInt, into path: [UInt8]) -> LMTPProtocol.Outcome {
        do {
            let container = try Container.open(at: path)
            try container.requireSingleHost()
            // The MTA waits for the reply: no lock is waited for longer than a delivery allows, as for `import -`
            // (ARCHITECTURE.md, "Nothing blocks an MTA"): past it, 451 naming the holder.
            let importer = try MailImporter(
                inbox: try Inbox(container: container, lockWait: .delivery), limits: limits)
            return Self.outcome(try importer.importMessage(fromFile: file, source: Self.source))
        } catch {
            return .failed(error.message)
        }
    }

    /// The reply for what importing did.
    static func outcome(_ message: ImportedMessage) -> LMTPProtocol.Outcome {
        let count = message.attachments.count
        switch message.status {
        case .imported where count > 0:
            return .delivered("imported: \(count) \(count == 1 ? "attachment" : "attachments") delivered")
        case .imported:
            return .delivered(message.found == 0 ? "no attachments: nothing to deliver" : "delivered before")
        case .duplicate:
            return .delivered("duplicate: imported before")
        case .refused:
            let reason = message.reason ?? "refused"
            return message.notAMessage ? .notAMessage(reason) : .overLimit("refused: \(reason)")
        }
    }
}
