import AppContainer
import InboxKit

/// One attachment of a message, ready to decode (ARCHITECTURE.md, "Mail import").
public struct MailAttachment {
    /// The reduced name (ARCHITECTURE.md, "Mail import"), before the Inbox's clash naming.
    public let name: FileName
    /// Lowercased `type/subtype`.
    public let contentType: String
    /// Why a winmail.dat is delivered as it is, not expanded into its files (its size over
    /// `MailLimits.maxTnefBytes`): the `not_expanded` of its `delivered` record. nil for any other attachment.
    let notExpanded: String?

    fileprivate enum Source {
        case part(PartContent?)
        case memory(UnsafeRawBufferPointer)  // a file from a winmail.dat, in libytnef's memory
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
        case .memory(let bytes): try sink.write(bytes)
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
    /// `message/partial` and `message/external-body` left out; a winmail.dat replaced by its files, or delivered as
    /// it is when it decodes to more than `limits.maxTnefBytes` (named or not; `notExpanded` says so).
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
            var notExpanded: String?
            if leaf.isTnef, let content = try content(of: leaf) {
                let expanded = try withTnefFiles(content) { files throws(MailError) in
                    for file in files {
                        let attachment = MailAttachment(
                            name: name(file.filename, file.contentType), contentType: file.contentType,
                            notExpanded: nil, source: .memory(file.data), message: self, budget: budget)
                        try body(attachment)
                        budget.commit()
                    }
                }
                switch expanded {
                case .expanded: continue
                case .unreadable: break
                case .overBound: notExpanded = "a winmail.dat over \(MailLimits.size(limits.maxTnefBytes))"
                }
            }
            // One too large to expand is delivered, named or not: it may hold files.
            guard leaf.isAttachment || notExpanded != nil else { continue }
            let attachment = MailAttachment(
                name: name(leaf.filename, leaf.contentType), contentType: leaf.contentType, notExpanded: notExpanded,
                source: .part(try content(of: leaf)), message: self, budget: budget)
            try body(attachment)
            budget.commit()
        }
    }

    /// What became of a winmail.dat.
    private enum TnefOutcome {
        /// Replaced by its files.
        case expanded
        /// libytnef cannot read it, or finds no file in it: delivered as it is when it is an attachment.
        case unreadable
        /// It decodes to more than `limits.maxTnefBytes`: delivered as it is, never read by libytnef.
        case overBound
    }

    /// Calls `body` with the files of a winmail.dat (ARCHITECTURE.md, "Mail import", TNEF), one winmail.dat at a time:
    /// decoded into an unnamed file in `$TMPDIR` (up to `maxTnefBytes`: past it, it is not expanded), read from
    /// there by libytnef, and all of it released before the next.
    private func withTnefFiles(_ content: PartContent, _ body: ([TnefFile]) throws(MailError) -> Void)
        throws(MailError) -> TnefOutcome
    {
        let spool: SharedDescriptor
        do {
            spool = try TemporaryCopy.empty(shown: "a winmail.dat")
        } catch {
            throw .io(error)
        }
        var sink = DescriptorSink(fd: spool.rawValue, limit: Int64(limits.maxTnefBytes), limitText: "")
        do {
            try content.decode(from: fd, into: &sink)
        } catch {
            // The sink is what refuses: the winmail.dat is larger than the bound.
            if case .refused = error { return .overBound }
            throw error
        }
        return try Tnef.withFiles(in: spool.rawValue, maxFiles: limits.maxParts, body) ? .expanded : .unreadable
    }
}
