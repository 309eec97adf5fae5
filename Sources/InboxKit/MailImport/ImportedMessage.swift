import AppContainer

/// What importing one message did: the `--json` object of `inbox import` (ARCHITECTURE.md, "Mail import").
public struct ImportedMessage: Sendable {
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
        public let item: InboxItem
        public let size: Int64
        public let sha256: String
        public let contentType: String
    }

    public let source: String
    public let messageID: String?
    public let subject: String?
    public let from: String?
    public let date: String?
    /// The SHA-256 of the message's bytes: its key.
    public let messageSHA256: String
    public let status: Status
    public let attachments: [Attachment]
    /// Why it was refused.
    public let reason: String?
}

extension ImportedMessage {
    /// The same message with another status and attachments.
    func with(status: Status, attachments: [Attachment]) -> ImportedMessage {
        ImportedMessage(
            source: source, messageID: messageID, subject: subject, from: from, date: date,
            messageSHA256: messageSHA256, status: status, attachments: attachments, reason: reason)
    }

    /// The object `inbox import --json` prints for the message (ARCHITECTURE.md, "Mail import"): `source`,
    /// `message_id`, `subject`, `from`, `date`, `message_sha256`, `status`, `attachments` (each `name`, `path`,
    /// `size`, `sha256`, `content_type`), and `reason` when refused. Names and paths that are not UTF-8 also
    /// come exact, as `name_b64` and `path_b64`.
    public var json: String {
        var buffer: [UInt8] = []
        func member(_ key: String, _ value: String?, first: Bool = false) {
            if !first { buffer.append(UInt8(ascii: ",")) }
            EventEncoding.appendKey(key, to: &buffer)
            if let value { EventEncoding.appendString(value, to: &buffer) } else { buffer += Array("null".utf8) }
        }
        buffer.append(UInt8(ascii: "{"))
        member("source", source, first: true)
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
            member("sha256", attachment.sha256)
            member("content_type", attachment.contentType)
            buffer.append(UInt8(ascii: "}"))
        }
        buffer += Array("]}".utf8)
        return String(decoding: buffer, as: UTF8.self)
    }
}
