import AppContainer
import FoundationEssentials
import Glibc
import InboxKit

/// Imports mail into an Inbox (ARCHITECTURE.md, "Mail import"): each message's attachments delivered once,
/// however often it is imported, whatever crashed in between. One importer serves one thread.
public final class MailImporter {
    /// The Inbox attachments are delivered into.
    public let inbox: Inbox
    /// What a message may hold before it is refused.
    public let limits: MailLimits
    /// Whether `ImportedMessage` describes each message in full: its Subject, From and Date, and each attachment's
    /// SHA-256 (the `--json` object). LMTP, which never reads them, turns it off: GMime is not given the three
    /// fields (nil then), and no attachment is hashed (its `sha256` empty).
    package var describes = true
    private let ledger: ImportLedger
    private let digest: SHA256Digest
    /// The Inbox folder, kept open from one message to the next by a caller that checks before each that it is still
    /// the container's (LMTP's sessions, `LMTPDelivery`); nil: opened for each message.
    var keptInboxFolder: SharedDescriptor?
    private lazy var keys = MessageKey(digest: digest)

    /// An importer into `inbox`, its `ImportLedger` open: the container's import index open (rebuilt from the event
    /// log when missing or damaged), and what a crashed import left repaired. It waits for `import.lock` and `events.lock` as
    /// `inbox.lockWait` says: an Inbox opened with `.delivery` for what an MTA waits on (ARCHITECTURE.md, "Nothing
    /// blocks an MTA").
    /// - Throws: SQLite's failure to open or make the index, with the exit status that matches it.
    public convenience init(inbox: Inbox, limits: MailLimits = MailLimits()) throws(ContainerError) {
        try self.init(inbox: inbox, limits: limits, group: nil)
    }

    /// An importer whose ledger places its messages together with the other ledgers of `group` (`ImportGroup`),
    /// all of one container.
    init(inbox: Inbox, limits: MailLimits, group: ImportGroup?) throws(ContainerError) {
        self.inbox = inbox
        self.limits = limits
        ledger = try ImportLedger(inbox: inbox, group: group)
        digest = try SHA256Digest()
    }

    /// Imports every message of a source: a message file, an mbox, a Maildir folder (read only), a FIFO or pipe
    /// (read once, typed like a file), or `-` for standard input (one message). `path` is used byte for byte.
    /// `each` is called after each message, in order; messages are placed a batch at a time. `skipped` is called
    /// with one line for each Maildir entry left unread, not being a regular file; `progress` as the source is read
    /// (an mbox's bytes, a Maildir's entries). A message that fails (a full
    /// disk, an I/O error) stops the source: the error is thrown, what came before stays imported.
    public func importSource(
        _ path: some CStringConvertible, skipped: (String) -> Void = { _ in },
        progress: (ImportProgress) -> Void = { _ in }, each: (ImportedMessage) -> Void
    ) throws(ContainerError) {
        let source = try MailSource.named(path.pathBytes)
        let folder = try inbox.container.openFolder(.inbox)
        var batch = ImportBatch()
        var stopped: ContainerError?
        do {
            try source.forEachMessage(skipped: skipped, progress: progress) { message throws(ContainerError) in
                if batch.isFull || batch.keys.contains(message.key) {
                    try finish(&batch, folder: folder.rawValue, each: each)
                }
                try prepare(message, into: &batch, folder: folder.rawValue)
            }
        } catch {
            stopped = error
        }
        try finish(&batch, folder: folder.rawValue, each: each)
        if let stopped { throw stopped }
    }

    /// Imports one message from the regular file open at `fd` (all of it but a `From ` envelope line at its
    /// start); `source` names it in the log.
    public func importMessage(fromFile fd: CInt, source: String) throws(ContainerError) -> ImportedMessage {
        let file = SharedDescriptor(FileDescriptor(owning: try Self.duplicate(fd)))
        let start: Int64
        do {
            start = try TemporaryCopy.envelopeLength(file.rawValue)
        } catch {
            throw error.failure("read", source)
        }
        return try importMessage(
            try MailSource.message(
                file, from: start, to: nil, mboxEntry: false, path: Array(source.utf8), keys: keys))
    }

    /// Imports one message held in memory; `source` names it in the log.
    public func importMessage(_ data: Data, source: String) throws(ContainerError) -> ImportedMessage {
        let copy = try data.withUnsafeBytes { raw in
            Result(catching: { () throws(ContainerError) in try TemporaryCopy.of(raw) })
        }.get()
        return try importMessage(fromFile: copy.rawValue, source: source)
    }

    /// Imports one message of a source, as a batch of one.
    func importMessage(_ message: SourceMessage) throws(ContainerError) -> ImportedMessage {
        let folder: SharedDescriptor
        if let keptInboxFolder {
            folder = keptInboxFolder
        } else {
            folder = SharedDescriptor(try inbox.container.openFolder(.inbox))
        }
        var batch = ImportBatch()
        try prepare(message, into: &batch, folder: folder.rawValue)
        var result: ImportedMessage?
        try finish(&batch, folder: folder.rawValue) { result = $0 }
        guard let result else { throw ContainerError(.failure, "cannot import '\(message.source)': no outcome") }
        return result
    }

    /// Parses a message and stages its attachments (decoded straight to disk, hashed on the way) into `batch`.
    /// Not a message, or past a limit: refused, with a `rejected` record. An I/O failure is thrown, and the
    /// message's staged files are removed.
    private func prepare(_ message: SourceMessage, into batch: inout ImportBatch, folder: CInt) throws(ContainerError) {
        let parsed: MailMessage
        do {
            parsed = try MailMessage(
                reading: message.file.rawValue, range: message.offset..<(message.offset + message.length),
                limits: limits, headline: describes)
        } catch {
            batch.append(.finished(try refuse(message, error, parsed: nil)), key: message.key)
            return
        }
        var staged = StagedMessage(
            key: message.key, messageID: parsed.messageID, source: message.sourcePath, attachments: [])
        var described: [(sha256: String, contentType: String)] = []
        if try !ledger.isComplete(message.key) {
            do throws(MailError) {
                try parsed.forEachAttachment { attachment throws(MailError) in
                    let (file, sha256) = try stage(attachment, of: message, in: folder, writes: batch.writes)
                    if let why = attachment.notExpanded { staged.notExpanded[staged.attachments.count] = why }
                    staged.attachments.append(file)
                    described.append((sha256, attachment.contentType))
                }
            } catch {
                // No record names them yet. One the unlink misses is swept later.
                for file in staged.attachments { _ = try? system_unlinkat(folder, file.staging) }
                batch.append(.finished(try refuse(message, error, parsed: parsed)), key: message.key)
                return
            }
        }
        let headers = ImportedMessage(
            sourcePath: message.sourcePath, messageID: parsed.messageID, subject: parsed.subject, from: parsed.from,
            date: parsed.date, messageSHA256: staged.keyHex, status: .imported, attachments: [], reason: nil)
        batch.append(.staged(staged, described: described, headers: headers), key: message.key)
    }

    /// Places the batch's staged messages once (see `ImportLedger.place`) and calls `each` with every message's
    /// outcome in order, up to the first that failed, whose error is thrown. Leaves `batch` empty.
    private func finish(_ batch: inout ImportBatch, folder: CInt, each: (ImportedMessage) -> Void)
        throws(ContainerError)
    {
        let entries = batch.entries
        let writes = batch.writes
        batch = ImportBatch()
        let toPlace = entries.compactMap { entry -> StagedMessage? in
            if case .staged(let message, _, _) = entry { message } else { nil }
        }
        let placements = toPlace.isEmpty ? [] : ledger.place(toPlace, writes: writes, folder: folder)
        var next = 0
        for entry in entries {
            guard case .staged(let message, let described, let headers) = entry else {
                if case .finished(let result) = entry { each(result) }
                continue
            }
            let placement = placements[next]
            next += 1
            if let error = placement.error { throw error }
            let attachments = placement.delivered.map { ordinal, item in
                ImportedMessage.Attachment(
                    item: item, size: message.attachments[ordinal].status.size, sha256: described[ordinal].sha256,
                    contentType: described[ordinal].contentType)
            }
            each(
                headers.with(
                    status: placement.duplicate ? .duplicate : .imported, attachments: attachments,
                    found: message.attachments.count, duplicateOf: placement.duplicateOf))
        }
    }

    /// Decodes an attachment into an import staging file in the Inbox, handed to `writes`; returns the staged
    /// file and, when `describes`, the SHA-256 (hex) of the bytes written (else empty).
    private func stage(_ attachment: MailAttachment, of message: SourceMessage, in folder: CInt, writes: StagedWrites)
        throws(MailError) -> (StagedDelivery, String)
    {
        var sum: [UInt8]?
        do {
            let file = try inbox.stage(
                Inbox.importStagingName(), named: attachment.name, shown: message.source, in: folder, writes: writes
            ) { file in
                guard describes else {
                    _ = try attachment.decode(into: file.rawValue)
                    return
                }
                try digest.begin()
                _ = try attachment.decode(into: file.rawValue, hashing: digest)
                sum = try digest.finish()
            }
            return (file, sum.map { SHA256Digest.hex($0) } ?? "")
        } catch let error as MailError {
            throw error
        } catch let error as ContainerError {
            throw .io(error)
        } catch let error as Errno {
            throw .io(error.failure("write an attachment of", message.source))
        } catch {
            throw .io(ContainerError(.failure, "cannot write an attachment of '\(message.source)': \(error)"))
        }
    }

    /// The outcome of a message not read: refused (with a `rejected` record) when it is not a message or passes
    /// a limit; an I/O failure is thrown, for the message to be tried again.
    private func refuse(_ message: SourceMessage, _ error: MailError, parsed: MailMessage?) throws(ContainerError)
        -> ImportedMessage
    {
        let keyHex = SHA256Digest.hex(message.key)
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
                    "source": .path(message.sourcePath), "message_sha256": .string(keyHex),
                    "reason": .string(reason),
                ]), durable: true)
        var refused = ImportedMessage(
            sourcePath: message.sourcePath, messageID: parsed?.messageID, subject: parsed?.subject, from: parsed?.from,
            date: parsed?.date, messageSHA256: keyHex, status: .refused, attachments: [], reason: reason)
        if case .notAMessage = error { refused.notAMessage = true }
        return refused
    }

    private static func duplicate(_ fd: CInt) throws(ContainerError) -> CInt {
        do {
            return try system_dup(fd, atLeast: 3)
        } catch {
            throw error.failure("read", "the message")
        }
    }
}

/// Messages on their way (see `MailImporter.importSource`): each refused already, or its attachments staged.
private struct ImportBatch {
    enum Entry {
        case finished(ImportedMessage)
        case staged(StagedMessage, described: [(sha256: String, contentType: String)], headers: ImportedMessage)
    }

    private(set) var entries: [Entry] = []
    /// The keys of the messages in the batch: a message seen twice is placed in the next batch, as a duplicate.
    private(set) var keys: Set<[UInt8]> = []
    private var attachments = 0
    let writes = StagedWrites()

    var isFull: Bool { entries.count >= ImportLedger.batchMessages || attachments >= ImportLedger.batchAttachments }

    mutating func append(_ entry: Entry, key: [UInt8]) {
        entries.append(entry)
        keys.insert(key)
        if case .staged(let message, _, _) = entry { attachments += message.attachments.count }
    }
}
