import AppContainer
import Glibc

/// The attachments of one message, staged in the Inbox and ready to be delivered once.
package struct StagedMessage {
    /// The SHA-256 of the message's bytes: its key in the import index.
    package let key: [UInt8]
    package let messageID: String?
    /// The source as given (`-` for standard input), byte for byte.
    package let source: [UInt8]
    /// In the message's order: an attachment's index is its ordinal.
    package var attachments: [StagedDelivery]
    /// By ordinal, why a winmail.dat is delivered as it is (`MailAttachment.notExpanded`): its `delivered` record's
    /// `not_expanded`.
    package var notExpanded: [Int: String] = [:]

    package init(key: [UInt8], messageID: String?, source: [UInt8], attachments: [StagedDelivery]) {
        self.key = key
        self.messageID = messageID
        self.source = source
        self.attachments = attachments
    }

    package var keyHex: String { SHA256Digest.hex(key) }
}

/// What placing a message did.
package struct ImportPlacement {
    /// The attachments delivered now, with their ordinals.
    package var delivered: [(ordinal: Int, item: InboxItem)] = []
    /// The message as the index knew it when it was imported before, whole: nothing was delivered.
    package var duplicateOf: ImportIndex.Imported?
    package var duplicate: Bool { duplicateOf != nil }
    package var error: ContainerError?
}

extension ImportLedger {
    /// Delivers the attachments of staged messages that the import index does not show delivered, exactly once
    /// across processes and crashes (ARCHITECTURE.md, "Mail import"), and logs `delivered` for each (with
    /// `message_sha256` and `ordinal`) and one `imported` record per message. Returns what became of each message,
    /// in order. Every staged file is placed or removed (or, when the index may still name it, left for the sweep).
    ///
    /// Under `import.lock`: first the placing records a crash left, of any message, are settled and their records
    /// written (`settlePlacingRecords`); then the attachments are recorded as placing (staging name and inode),
    /// durably and in one commit, before they are renamed into the Inbox together, and delivered after.
    /// The messages must have distinct keys.
    func placeOnce(_ messages: [StagedMessage], writes: StagedWrites, folder: CInt) -> [ImportPlacement] {
        var outcomes = messages.map { _ in ImportPlacement() }
        // Staging files to remove at the end: only ones no placing record names (see above).
        var leftOver = messages.flatMap { $0.attachments.map(\.staging) }
        defer {
            // A hidden staging file the unlink misses is swept later.
            for staging in leftOver { _ = try? system_unlinkat(folder, staging) }
        }
        var toPlace: [(message: Int, ordinal: Int)] = []
        do throws(ContainerError) {
            try index.locked { () throws(ContainerError) in
                try inbox.settlePlacingRecords(index: index)
                var done: [Set<Int>] = []
                for (number, message) in messages.enumerated() {
                    if let imported = try index.imported(message.key) {
                        outcomes[number].duplicateOf = imported
                        done.append(Set(message.attachments.indices))
                        continue
                    }
                    let delivered = try index.parts(of: message.key).compactMap { ordinal, part in
                        if case .delivered = part { ordinal } else { nil }
                    }
                    done.append(Set(delivered))
                    toPlace += message.attachments.indices.filter { !delivered.contains($0) }.map { (number, $0) }
                }
                // From here the index may name any file about to be placed: only this run's copies of what was
                // delivered before may go, until the index forgets the others.
                leftOver = done.enumerated().flatMap { number, ordinals in
                    ordinals.filter { $0 < messages[number].attachments.count }.map {
                        messages[number].attachments[$0].staging
                    }
                }
                let staging = toPlace.map { messages[$0.message].attachments[$0.ordinal].staging }
                do throws(ContainerError) {
                    try index.markPlacing(
                        toPlace.map {
                            let message = messages[$0.message]
                            return (
                                message.key, $0.ordinal, message.attachments[$0.ordinal],
                                message.notExpanded[$0.ordinal]
                            )
                        },
                        of: Set(toPlace.map(\.message)).sorted().map { messages[$0] }.map {
                            ImportIndex.PendingMessage(
                                key: $0.key, messageID: $0.messageID, source: $0.source, count: $0.attachments.count)
                        })
                } catch {
                    // The commit may have happened all the same: the files go only once the index has forgotten them.
                    try forgetPlacing(messages, toPlace)
                    leftOver += staging
                    throw error
                }
                let placement = inbox.place(
                    toPlace.map { messages[$0.message].attachments[$0.ordinal] }, writes: writes, in: folder,
                    records: { delivered in importRecords(messages, outcomes, toPlace, delivered) })
                for (placed, item) in placement.placed {
                    outcomes[toPlace[placed].message].delivered.append((toPlace[placed].ordinal, item))
                }
                var settlements = messages.map {
                    ImportIndex.Settlement(key: $0.key, count: $0.attachments.count, messageID: $0.messageID)
                }
                for notPlaced in placement.notPlaced {
                    let (number, ordinal) = toPlace[notPlaced]
                    settlements[number].notPlaced.append(ordinal)
                    outcomes[number].error = placement.error
                }
                // The index is a cache of the log: what it says delivered, the log holds durably first.
                if placement.recorded { try inbox.log.sync() }
                for number in messages.indices where !outcomes[number].duplicate {
                    settlements[number].delivered = outcomes[number].delivered.map { ($0.ordinal, $0.item.name) }
                    // Without its records, no message is complete: the next import logs what is missing.
                    if !placement.recorded { outcomes[number].error = outcomes[number].error ?? placement.error }
                    settlements[number].complete = outcomes[number].error == nil
                }
                try index.settle(settlements.filter { !$0.delivered.isEmpty || !$0.notPlaced.isEmpty || $0.complete })
                leftOver += placement.notPlaced.map {
                    messages[toPlace[$0].message].attachments[toPlace[$0].ordinal].staging
                }
            }
        } catch {
            for number in outcomes.indices where !outcomes[number].duplicate && outcomes[number].error == nil {
                outcomes[number].error = error
            }
        }
        return outcomes
    }

    /// Forgets, durably, the placing records of the attachments `toPlace` names.
    private func forgetPlacing(_ messages: [StagedMessage], _ toPlace: [(message: Int, ordinal: Int)])
        throws(ContainerError)
    {
        var settlements = messages.map {
            ImportIndex.Settlement(key: $0.key, count: $0.attachments.count, messageID: $0.messageID)
        }
        for (number, ordinal) in toPlace { settlements[number].notPlaced.append(ordinal) }
        try index.settle(settlements.filter { !$0.notPlaced.isEmpty })
    }

    /// The records of a batch placed: each message's `delivered` records (with `message_sha256`, `ordinal`, and
    /// `not_expanded` for a winmail.dat delivered as it is), then its
    /// `imported` record once none of its attachments is missing; a message imported before gets its `imported`
    /// record as a duplicate.
    private func importRecords(
        _ messages: [StagedMessage], _ outcomes: [ImportPlacement], _ toPlace: [(message: Int, ordinal: Int)],
        _ delivered: [(index: Int, record: Event)]
    ) -> [Event] {
        var placedOf = messages.map { _ in [Event]() }
        for (index, record) in delivered {
            var record = record
            let (number, ordinal) = toPlace[index]
            record.fields += [
                ("message_sha256", .string(messages[number].keyHex)), ("ordinal", .int(Int64(ordinal))),
            ]
            if let why = messages[number].notExpanded[ordinal] { record.fields.append(("not_expanded", .string(why))) }
            placedOf[number].append(record)
        }
        var missingOf = messages.map { _ in 0 }
        for part in toPlace { missingOf[part.message] += 1 }
        var records: [Event] = []
        for (number, message) in messages.enumerated() {
            if outcomes[number].duplicate {
                records.append(importedRecord(message, delivered: 0, duplicate: true))
                continue
            }
            records += placedOf[number]
            if placedOf[number].count == missingOf[number] {
                records.append(importedRecord(message, delivered: placedOf[number].count, duplicate: false))
            }
        }
        return records
    }

    /// The `imported` record of a message.
    private func importedRecord(_ message: StagedMessage, delivered: Int, duplicate: Bool) -> Event {
        var event = Event(.imported, ["message_sha256": .string(message.keyHex)])
        if let id = message.messageID { event.fields.append(("message_id", .string(id))) }
        event.fields += [
            ("source", .path(message.source)), ("attachments", .int(Int64(delivered))),
            ("duplicate", .bool(duplicate)),
        ]
        return event
    }
}
