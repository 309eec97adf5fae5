import AppContainer
import Foundation
import Glibc

/// Imports mail into an Inbox (ARCHITECTURE.md, "Mail import"): each message's attachments delivered once,
/// however often it is imported, whatever crashed in between. One importer serves one thread.
public final class MailImporter {
    public let inbox: Inbox
    public let limits: MailLimits
    private let index: ImportIndex
    private let digest: SHA256Digest

    public init(inbox: Inbox, limits: MailLimits = MailLimits()) throws(ContainerError) {
        self.inbox = inbox
        self.limits = limits
        index = try ImportIndex(container: inbox.container)
        digest = try SHA256Digest()
    }

    /// Imports every message of a source: a message file, an mbox, a Maildir folder (read only), or `-` for
    /// standard input. `each` is called after each message. A message that fails (a full disk, an I/O error)
    /// stops the source: the error is thrown, what came before stays imported.
    public func importSource(_ argument: String, each: (ImportedMessage) -> Void) throws(ContainerError) {
        let source = try MailSource.named(argument)
        try source.forEachMessage { message throws(ContainerError) in
            each(try importMessage(message))
        }
    }

    /// Imports one message from the regular file open at `fd` (all of it); `source` names it in the log.
    public func importMessage(fromFile fd: CInt, source: String) throws(ContainerError) -> ImportedMessage {
        let file = SharedDescriptor(FileDescriptor(owning: try Self.duplicate(fd)))
        let key = try digest.hash(file.rawValue, from: 0, to: nil, shown: source)
        let length: Int64
        do {
            length = try file.descriptor.fileStatus().size
        } catch {
            throw error.failure("read", source)
        }
        return try importMessage(SourceMessage(file: file, offset: 0, length: length, key: key, source: source))
    }

    /// Imports one message held in memory; `source` names it in the log.
    public func importMessage(_ data: Data, source: String) throws(ContainerError) -> ImportedMessage {
        let copy = try data.withUnsafeBytes { raw in
            Result(catching: { () throws(ContainerError) in try TemporaryCopy.of(raw) })
        }.get()
        return try importMessage(fromFile: copy.rawValue, source: source)
    }

    /// Imports one message of a source: parsed, its attachments staged (decoded straight to disk), then placed
    /// once. Not a message, or past a limit: refused, with a `rejected` record.
    func importMessage(_ message: SourceMessage) throws(ContainerError) -> ImportedMessage {
        let keyHex = SHA256Digest.hex(message.key)
        let parsed: MailMessage
        do {
            parsed = try MailMessage(
                reading: message.file.rawValue, range: message.offset..<(message.offset + message.length),
                limits: limits)
        } catch {
            return try refuse(message, keyHex: keyHex, error, parsed: nil)
        }
        var staged: [StagedDelivery] = []
        var described: [(sha256: String, contentType: String)] = []
        let folder = try inbox.container.openFolder(.inbox)
        defer {
            // What was not placed; placement takes what it placed or removed out of this list's hands.
            for file in staged { _ = try? system_unlinkat(folder.rawValue, file.staging) }
        }
        if try !index.isComplete(message.key) {
            do throws(MailError) {
                try parsed.forEachAttachment { attachment throws(MailError) in
                    let file = try stage(attachment, of: message, in: folder.rawValue)
                    staged.append(file)
                    described.append((try sha256(of: file, in: folder.rawValue), attachment.contentType))
                }
            } catch {
                return try refuse(message, keyHex: keyHex, error, parsed: parsed)
            }
        }
        let toPlace = StagedMessage(
            key: message.key, messageID: parsed.messageID, source: message.source, attachments: staged)
        let placement = inbox.placeOnce(toPlace, index: index, folder: folder.rawValue)
        staged = []
        var attachments: [ImportedMessage.Attachment] = []
        for (ordinal, item) in placement.delivered {
            attachments.append(
                ImportedMessage.Attachment(
                    item: item, size: toPlace.attachments[ordinal].status.size, sha256: described[ordinal].sha256,
                    contentType: described[ordinal].contentType))
        }
        if let error = placement.error { throw error }
        return ImportedMessage(
            source: message.source, messageID: parsed.messageID, subject: parsed.subject, from: parsed.from,
            date: parsed.date, messageSHA256: keyHex, status: placement.duplicate ? .duplicate : .imported,
            attachments: attachments, reason: nil)
    }

    /// Decodes an attachment into an import staging file in the Inbox.
    private func stage(_ attachment: MailAttachment, of message: SourceMessage, in folder: CInt) throws(MailError)
        -> StagedDelivery
    {
        do {
            return try inbox.stage(
                Inbox.importStagingName(), named: attachment.name, shown: message.source, in: folder
            ) { file in _ = try attachment.decode(into: file.rawValue) }
        } catch let error as MailError {
            throw error
        } catch let error as Errno {
            throw .io(error.failure("write an attachment of", message.source))
        } catch {
            throw .io(ContainerError(.failure, "cannot write an attachment of '\(message.source)': \(error)"))
        }
    }

    /// The SHA-256 of a staged attachment, in hex.
    private func sha256(of file: StagedDelivery, in folder: CInt) throws(MailError) -> String {
        do throws(ContainerError) {
            let staged: FileDescriptor
            do {
                staged = try FileDescriptor(at: folder, file.staging, [.readOnly, .noFollow])
            } catch {
                throw error.failure("read", inbox.itemPath(file.staging))
            }
            let sum = try digest.hash(staged.rawValue, from: 0, to: nil, shown: file.shown)
            return SHA256Digest.hex(sum)
        } catch {
            throw .io(error)
        }
    }

    /// The outcome of a message not read: refused (with a `rejected` record) when it is not a message or passes
    /// a limit; an I/O failure is thrown, for the message to be tried again.
    private func refuse(_ message: SourceMessage, keyHex: String, _ error: MailError, parsed: MailMessage?)
        throws(ContainerError) -> ImportedMessage
    {
        let reason: String
        switch error {
        case .io(let failure): throw failure
        case .notAMessage(let why): reason = "not a message: \(why)"
        case .refused(let why): reason = why
        }
        try inbox.log.append(
            Event(
                .rejected,
                [
                    "source": .string(message.source), "message_sha256": .string(keyHex),
                    "reason": .string(reason),
                ]), durable: true)
        return ImportedMessage(
            source: message.source, messageID: parsed?.messageID, subject: parsed?.subject, from: parsed?.from,
            date: parsed?.date, messageSHA256: keyHex, status: .refused, attachments: [], reason: reason)
    }

    private static func duplicate(_ fd: CInt) throws(ContainerError) -> CInt {
        do {
            return try system_dup(fd, atLeast: 3)
        } catch {
            throw error.failure("read", "the message")
        }
    }
}
