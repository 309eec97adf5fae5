import AppContainer
import Glibc

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
    static let importStagingPrefix = ".inbox-import."

    /// Whether `name` is one `importStagingName` makes.
    static func isImportStagingName(_ name: FileName) -> Bool {
        name.bytes.starts(with: importStagingPrefix.utf8)
    }

    /// A fresh staging name for an imported attachment. Not one `sweepAbandonedStaging` removes: the import index
    /// may name it (see `placeOnce`).
    static func importStagingName() -> FileName {
        FileName(importStagingPrefix + "\(getpid()).\(UInt64.random(in: 0...UInt64.max))")
            ?? FileName(bytes: Array(".inbox-import".utf8)).unsafelyUnwrapped
    }

    /// Delivers the attachments of a staged message that the import index does not show delivered, exactly once
    /// across processes and crashes (ARCHITECTURE.md, "Mail import"), and logs `delivered` for each (with
    /// `message_sha256`) and one `imported` record. Every staged file is placed or removed.
    ///
    /// Under `import.lock`: an attachment is recorded as placing (its staging name and inode) durably before it
    /// is renamed into the Inbox, and delivered after. A placing record a crash left is settled by its staging
    /// name: still there with its inode, the rename never happened (the file is removed and delivered again);
    /// gone, it did (placement takes a failed file back to that same staging name).
    func placeOnce(_ message: StagedMessage, index: ImportIndex, folder: CInt) -> ImportPlacement {
        var outcome = ImportPlacement()
        var leftOver = Set(message.attachments.indices)
        defer {
            for ordinal in leftOver.sorted() {
                // A hidden staging file the unlink misses is swept later.
                _ = try? system_unlinkat(folder, message.attachments[ordinal].staging)
            }
        }
        do throws(ContainerError) {
            let lock = try importLock()
            defer { _ = lock.rawValue }
            if try index.isComplete(message.key) {
                outcome.duplicate = true
                try log.append(importedRecord(message, delivered: 0, duplicate: true), durable: true)
                return outcome
            }
            let done = try settleInterruptedPlacements(message, index: index, folder: folder)
            let missing = message.attachments.indices.filter { !done.contains($0) }
            try index.markPlacing(message.key, missing.map { ($0, message.attachments[$0]) })
            let placement = place(
                missing.map { message.attachments[$0] }, in: folder,
                fields: [("message_sha256", .string(message.keyHex))],
                then: { [self] count in
                    count == missing.count ? [importedRecord(message, delivered: count, duplicate: false)] : []
                })
            let placed = placement.placed.map { (ordinal: missing[$0.index], item: $0.item) }
            outcome.delivered = placed
            outcome.error = placement.error
            // This run's copies of what was delivered before go; so do files not placed after all, but only once
            // the index has forgotten them (a placing record whose staging name is gone means placed).
            let notPlaced = placement.notPlaced.map { missing[$0] }
            leftOver = done.filter { $0 < message.attachments.count }
            try index.settle(
                message.key, delivered: placed.map { ($0.ordinal, $0.item.name) }, notPlaced: notPlaced,
                complete: placement.error == nil, count: message.attachments.count, messageID: message.messageID)
            leftOver.formUnion(notPlaced)
        } catch {
            outcome.error = outcome.error ?? error
        }
        return outcome
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
        try index.settle(
            message.key, delivered: placed, notPlaced: notPlaced, complete: false, count: message.attachments.count,
            messageID: message.messageID)
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
