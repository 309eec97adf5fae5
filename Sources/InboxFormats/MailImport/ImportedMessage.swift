import AppContainer
import InboxKit

/// What importing one message did: the `--json` object of `inbox import` (ARCHITECTURE.md, "Mail import").
public struct ImportedMessage: Sendable {
    /// What became of the message: its `--json` `status`.
    public enum Status: String, Sendable {
        /// Its attachments not delivered before are delivered now (there may be none).
        case imported
        /// Imported before, whole: nothing delivered.
        case duplicate
        /// Not a message, or past a limit: nothing delivered, a `rejected` record says why.
        case refused
    }

    /// One attachment delivered.
    public struct Attachment: Sendable {
        /// The item in the Inbox (it may have moved on since).
        public let item: InboxItem
        /// The decoded bytes delivered.
        public let size: Int64
        /// The SHA-256 of those bytes, in lowercase hex (empty for an importer inside the package that does not
        /// describe messages: `MailImporter.describes`).
        public let sha256: String
        /// The part's lowercased `type/subtype`.
        public let contentType: String
    }

    /// The source as given (absolute), or `-` for standard input, byte for byte.
    public let sourcePath: [UInt8]
    /// The `Message-ID`, without its angle brackets; nil when the message has none.
    public let messageID: String?
    /// The decoded `Subject`, when there is one (and the importer describes messages, as for the next two).
    public let subject: String?
    /// The `From` addresses, decoded, when there are any.
    public let from: String?
    /// The `Date` as written (trimmed), when there is one.
    public let date: String?
    /// The SHA-256 of the message's bytes without what transport and filters add: its key.
    public let messageSHA256: String
    /// Imported, a duplicate, or refused.
    public let status: Status
    /// The attachments delivered by this import, in the message's order (none for a duplicate or a refusal).
    public let attachments: [Attachment]
    /// Why it was refused.
    public let reason: String?
    /// Of a message imported now, how many attachments it holds, delivered now or before.
    package var found = 0
    /// A duplicate's original, as the import index knows it.
    package var duplicateOf: ImportIndex.Imported?
    /// Of a message refused, whether it was for not being a message (else it passed a limit).
    package var notAMessage = false
}

extension ImportedMessage {
    /// `sourcePath` as text (U+FFFD for bytes that are not UTF-8).
    public var source: String { String(decoding: sourcePath, as: UTF8.self) }

    /// The same message with another status and attachments, of `found` in all (or the duplicate of one).
    func with(status: Status, attachments: [Attachment], found: Int, duplicateOf: ImportIndex.Imported?)
        -> ImportedMessage
    {
        ImportedMessage(
            sourcePath: sourcePath, messageID: messageID, subject: subject, from: from, date: date,
            messageSHA256: messageSHA256, status: status, attachments: attachments, reason: reason, found: found,
            duplicateOf: duplicateOf)
    }

    /// The object `inbox import --json` prints for the message (ARCHITECTURE.md, "Mail import"): `source`,
    /// `message_id`, `subject`, `from`, `date`, `message_sha256`, `status`, `attachments` (each `name`, `path`,
    /// `size`, `sha256`, `content_type`), and `reason` when refused. A source, names and paths that are not
    /// UTF-8 also come exact, as `source_b64`, `name_b64` and `path_b64`.
    public var json: String {
        var buffer: [UInt8] = []
        func member(_ key: String, _ value: String?, first: Bool = false) {
            if !first { buffer.append(UInt8(ascii: ",")) }
            EventEncoding.appendKey(key, to: &buffer)
            if let value { EventEncoding.appendString(value, to: &buffer) } else { buffer += Array("null".utf8) }
        }
        buffer.append(UInt8(ascii: "{"))
        EventEncoding.appendPathMember("source", sourcePath, to: &buffer)
        member("message_id", messageID)
        member("subject", subject)
        member("from", from)
        member("date", date)
        member("message_sha256", messageSHA256)
        member("status", status.rawValue)
        if let reason { member("reason", reason) }
        buffer += Array(",\"attachments\":[".utf8)
        for (index, attachment) in attachments.enumerated() {
            buffer += Array((index == 0 ? "{" : ",{").utf8)
            EventEncoding.appendPathMember("name", attachment.item.name.bytes, to: &buffer)
            buffer.append(UInt8(ascii: ","))
            EventEncoding.appendPathMember("path", attachment.item.path, to: &buffer)
            buffer += Array(",\"size\":\(attachment.size)".utf8)
            if !attachment.sha256.isEmpty { member("sha256", attachment.sha256) }
            member("content_type", attachment.contentType)
            buffer.append(UInt8(ascii: "}"))
        }
        buffer += Array("]}".utf8)
        return String(decoding: buffer, as: UTF8.self)
    }
}
