import AppContainer
import Glibc
import InboxKit

/// The attachments of one message, staged in the Inbox and ready to be delivered once.
struct StagedMessage {
    /// The SHA-256 of the message's bytes: its key in the import index.
    let key: [UInt8]
    let messageID: String?
    /// The source as given (`-` for standard input).
    let source: String
    /// In the message's order: an attachment's index is its ordinal.
    var attachments: [StagedDelivery]

    var keyHex: String { SHA256Digest.hex(key) }
}

/// What placing a message did.
struct ImportPlacement {
    /// The attachments delivered now, with their ordinals.
    var delivered: [(ordinal: Int, item: InboxItem)] = []
    /// True when the message was imported before, whole: nothing was delivered.
    var duplicate = false
    var error: ContainerError?
}

extension Inbox {
    /// Delivers the attachments of staged messages that the import index does not show delivered, exactly once
    /// across processes and crashes (ARCHITECTURE.md, "Mail import"), and logs `delivered` for each (with
    /// `message_sha256`) and one `imported` record per message. Returns what became of each message, in order.
    /// Every staged file is placed or removed (or, when the index may still name it, left for the sweep).
    ///
    /// Under `import.lock`: the attachments are recorded as placing (staging name and inode), durably and in one
    /// commit, before they are renamed into the Inbox together, and delivered after. A placing record a crash
    /// left is settled by its staging name: still there with its inode, the rename never happened (the file is
    /// removed and delivered again); gone, it did (placement takes a failed file back to that same staging name).
    /// The messages must have distinct keys.
    func placeOnce(_ messages: [StagedMessage], writes: StagedWrites, index: ImportIndex, folder: CInt)
        -> [ImportPlacement]
    {
        var outcomes = messages.map { _ in ImportPlacement() }
        // Staging files to remove at the end: only ones no placing record names (see above).
        var leftOver = messages.flatMap { $0.attachments.map(\.staging) }
        defer {
            // A hidden staging file the unlink misses is swept later.
            for staging in leftOver { _ = try? system_unlinkat(folder, staging) }
        }
        var toPlace: [(message: Int, ordinal: Int)] = []
        do throws(ContainerError) {
            let lock = try importLock()
            defer { _ = lock.rawValue }
            var done: [Set<Int>] = []
            for (number, message) in messages.enumerated() {
                if try index.isComplete(message.key) {
                    outcomes[number].duplicate = true
                    done.append(Set(message.attachments.indices))
                    continue
                }
                let delivered = try settleInterruptedPlacements(message, index: index, folder: folder)
                done.append(delivered)
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
                    toPlace.map { (messages[$0.message].key, $0.ordinal, messages[$0.message].attachments[$0.ordinal]) }
                )
            } catch {
                // The commit may have happened all the same: the files go only once the index has forgotten them.
                try forgetPlacing(messages, toPlace, index: index)
                leftOver += staging
                throw error
            }
            let placement = place(
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
        } catch {
            for number in outcomes.indices where !outcomes[number].duplicate && outcomes[number].error == nil {
                outcomes[number].error = error
            }
        }
        return outcomes
    }

    /// Forgets, durably, the placing records of the attachments `toPlace` names.
    private func forgetPlacing(
        _ messages: [StagedMessage], _ toPlace: [(message: Int, ordinal: Int)], index: ImportIndex
    ) throws(ContainerError) {
        var settlements = messages.map {
            ImportIndex.Settlement(key: $0.key, count: $0.attachments.count, messageID: $0.messageID)
        }
        for (number, ordinal) in toPlace { settlements[number].notPlaced.append(ordinal) }
        try index.settle(settlements.filter { !$0.notPlaced.isEmpty })
    }

    /// The records of a batch placed: each message's `delivered` records (with `message_sha256`), then its
    /// `imported` record once none of its attachments is missing; a message imported before gets its `imported`
    /// record as a duplicate.
    private func importRecords(
        _ messages: [StagedMessage], _ outcomes: [ImportPlacement], _ toPlace: [(message: Int, ordinal: Int)],
        _ delivered: [(index: Int, record: Event)]
    ) -> [Event] {
        var placedOf = messages.map { _ in [Event]() }
        for (index, record) in delivered {
            var record = record
            record.fields.append(("message_sha256", .string(messages[toPlace[index].message].keyHex)))
            placedOf[toPlace[index].message].append(record)
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

    /// Settles the placing records a crash left for this message (see `placeOnce`); returns the ordinals the
    /// index now shows delivered.
    private func settleInterruptedPlacements(_ message: StagedMessage, index: ImportIndex, folder: CInt)
        throws(ContainerError) -> Set<Int>
    {
        var done: Set<Int> = []
        var placed: [(ordinal: Int, name: FileName?)] = []
        var notPlaced: [Int] = []
        var stale: [FileName] = []
        for (ordinal, part) in try index.parts(of: message.key) {
            switch part {
            case .delivered:
                done.insert(ordinal)
            case .placing(let staging, let device, let inode):
                let status: FileStatus?
                do {
                    status = try fileStatusIfPresent(in: folder, staging)
                } catch {
                    throw error.failure("read", container.path(.inbox) + "/" + staging.string)
                }
                if let status {
                    notPlaced.append(ordinal)
                    if status.device == device && status.inode == inode { stale.append(staging) }
                } else {
                    placed.append((ordinal, nil))
                    done.insert(ordinal)
                }
            }
        }
        guard !placed.isEmpty || !notPlaced.isEmpty else { return done }
        try index.settle([
            ImportIndex.Settlement(
                key: message.key, delivered: placed, notPlaced: notPlaced, count: message.attachments.count,
                messageID: message.messageID)
        ])
        for staging in stale {
            // Forgotten by the index above: a file no one will place. One left behind is swept later.
            _ = try? system_unlinkat(folder, staging)
        }
        return done
    }

    /// The `imported` record of a message.
    private func importedRecord(_ message: StagedMessage, delivered: Int, duplicate: Bool) -> Event {
        var event = Event(.imported, ["message_sha256": .string(message.keyHex)])
        if let id = message.messageID { event.fields.append(("message_id", .string(id))) }
        event.fields += [
            ("source", .string(message.source)), ("attachments", .int(Int64(delivered))),
            ("duplicate", .bool(duplicate)),
        ]
        return event
    }

    /// Holds `import.lock` in the state folder: one placement at a time per container, across processes.
    private func importLock() throws(ContainerError) -> FileDescriptor {
        try container.lockStateFile("import.lock")
    }
}
