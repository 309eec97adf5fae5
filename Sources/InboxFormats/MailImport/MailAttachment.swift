import AppContainer
import InboxKit

/// One attachment of a message, ready to decode (ARCHITECTURE.md, "Mail import").
public struct MailAttachment {
    /// The reduced name (ARCHITECTURE.md, "Mail import"), before the Inbox's clash naming.
    public let name: FileName
    /// Lowercased `type/subtype`.
    public let contentType: String

    fileprivate enum Source {
        case part(PartContent?)
        case memory([UInt8])  // a file from a winmail.dat
    }

    fileprivate let source: Source
    fileprivate let message: MailMessage
    fileprivate let budget: DecodeBudget

    /// Decodes the attachment into `fd` at its current offset; returns the bytes written. Call it inside
    /// `forEachAttachment`'s body; calling it again writes the same bytes again (and counts them once).
    /// - Throws: `.refused` when the message's attachments pass `maxBytes`, `.io` when a read or write fails.
    public func decode(into fd: CInt) throws(MailError) -> Int64 {
        try decode(into: fd, hashing: nil)
    }

    /// Decodes like `decode(into:)`, and adds the bytes written to `digest` (begun by the caller) as they go.
    func decode(into fd: CInt, hashing digest: SHA256Digest?) throws(MailError) -> Int64 {
        var sink = DescriptorSink(
            fd: fd, limit: budget.limit - budget.committed, limitText: "--max-bytes \(message.limits.maxBytesText)",
            digest: digest)
        switch source {
        case .part(let content): try content?.decode(from: message.fd, into: &sink)
        case .memory(let bytes): try bytes.withBytes { (buffer) throws(MailError) in try sink.write(buffer) }
        }
        budget.current = Swift.max(budget.current, sink.written)
        return sink.written
    }
}

/// The decoded bytes of a message's attachments so far, against `MailLimits.maxBytes`.
private final class DecodeBudget {
    let limit: Int64
    var committed: Int64 = 0
    var current: Int64 = 0

    init(limit: Int64) {
        self.limit = limit
    }

    /// The attachment just handed over is done: its bytes count from now on.
    func commit() {
        committed += current
        current = 0
    }
}

extension MailMessage {
    /// Calls `body` with each attachment in order (ARCHITECTURE.md, "Mail import"): every leaf part with a
    /// filename or the disposition `attachment`, at any depth, forwarded messages walked into; signatures,
    /// `message/partial` and `message/external-body` left out; a winmail.dat replaced by its files.
    ///
    /// The bytes `decode(into:)` writes count against `limits.maxBytes` over the whole message; an attachment
    /// that `body` does not decode counts nothing.
    /// - Throws: `.refused` (a limit; before any attachment for the parts and depth), `.io`, or what `body` throws.
    public func forEachAttachment(_ body: (MailAttachment) throws(MailError) -> Void) throws(MailError) {
        let budget = DecodeBudget(limit: limits.maxBytes)
        var nameless = 0
        func name(_ filename: [UInt8]?, _ contentType: String) -> FileName {
            if let filename, let reduced = AttachmentName.reduced(filename) { return reduced }
            nameless += 1
            return AttachmentName.nameless(nameless, contentType: contentType)
        }
        for leaf in try leaves() {
            if leaf.isTnef, let files = try tnefFiles(leaf) {
                for file in files {
                    let attachment = MailAttachment(
                        name: name(file.filename, file.contentType), contentType: file.contentType,
                        source: .memory(file.data), message: self, budget: budget)
                    try body(attachment)
                    budget.commit()
                }
                continue
            }
            guard leaf.isAttachment else { continue }
            let attachment = MailAttachment(
                name: name(leaf.filename, leaf.contentType), contentType: leaf.contentType,
                source: .part(try content(of: leaf)), message: self, budget: budget)
            try body(attachment)
            budget.commit()
        }
    }

    /// The files of a winmail.dat; nil when libytnef cannot read it or finds no file in it, so that it is delivered
    /// as it is (nothing is lost).
    private func tnefFiles(_ leaf: MimeLeaf) throws(MailError) -> [TnefFile]? {
        guard let content = try content(of: leaf) else { return nil }
        var sink = MemorySink(limit: limits.maxTnefBytes, what: "a winmail.dat")
        try content.decode(from: fd, into: &sink)
        guard let files = Tnef.files(in: sink.bytes, maxFiles: limits.maxParts + 1), !files.isEmpty else { return nil }
        if files.count > limits.maxParts {
            throw .refused("a winmail.dat of more than \(MailLimits.count(limits.maxParts)) files")
        }
        return files
    }
}
