import AppContainer
import Glibc

extension Inbox {
    /// Repairs what a crashed import left (ARCHITECTURE.md, "The log never lies"): run by the next import and by the
    /// watcher's start, before anything else. Does nothing where the container has no import index.
    package func repairInterruptedImports() throws(ContainerError) {
        guard try ImportIndex.exists(in: container) else { return }
        try repairInterruptedImports(index: try ImportIndex(container: container, lockWait: lockWait))
    }

    /// As `repairInterruptedImports()`, for a watcher's start, which goes on whatever fails: a failure is logged
    /// `error` (`during: repair an interrupted import`); returned when the log cannot take that record either, for
    /// the caller to report another way.
    package func repairInterruptedImportsLogging() -> ContainerError? {
        do {
            try repairInterruptedImports()
            return nil
        } catch {
            do {
                try log.append(
                    Event(
                        .error,
                        [
                            "during": .string("repair an interrupted import"),
                            "path": .string(ImportIndex.relativePath), "errno": .int(Int64(error.cause?.rawValue ?? 0)),
                            "message": .string(error.message),
                        ]))
                return nil
            } catch let logFailure {
                return ContainerError(
                    logFailure.code,
                    "repairing an interrupted import: \(error.message); and the event log cannot record it: "
                        + logFailure.message, cause: logFailure.cause)
            }
        }
    }

    /// As `repairInterruptedImports()`, with the index open.
    package func repairInterruptedImports(index: ImportIndex) throws(ContainerError) {
        // Only a hint without the lock: a placement in progress has placing records too.
        guard try !index.placingParts().isEmpty else { return }
        try index.locked { () throws(ContainerError) in try settlePlacingRecords(index: index) }
    }

    /// Under `import.lock`, settles every placing record of the index: its placement crashed. A staging file still
    /// there with its inode was never renamed: the record is forgotten (durably) and the file removed. One gone
    /// was renamed into the Inbox (placement takes a failed file back to that name): found there by device and
    /// inode (one scan for all), it gets the `delivered` record the crash kept from the log (with `message_sha256`,
    /// `ordinal`, its size and SHA-256, read again), and its message the `imported` record once complete; no longer
    /// there (moved on or deleted), it gets a `recovered` record instead, for a `delivered` record would claim
    /// the Inbox holds it. Records the log already holds (the crash came after them) are not written again.
    /// The records are durable before the index says delivered.
    package func settlePlacingRecords(index: ImportIndex) throws(ContainerError) {
        let placing = try index.placingParts()
        guard !placing.isEmpty else { return }
        let folder = try container.openFolder(.inbox)
        var gone: [ImportIndex.PlacingPart] = []
        var notPlaced: [ImportIndex.PlacingPart] = []
        var stale: [FileName] = []
        for part in placing {
            let status: FileStatus?
            do {
                status = try fileStatusIfPresent(in: folder.rawValue, part.staging)
            } catch {
                throw error.failure("read", itemPath(part.staging))
            }
            guard let status else {
                gone.append(part)
                continue
            }
            notPlaced.append(part)
            if status.fileID == part.fileID { stale.append(part.staging) }
        }
        try finishInterruptedRenames(&notPlaced, into: &gone, stale: &stale, in: folder.rawValue)
        var records: [Event] = []
        var delivered: [[UInt8]: [(ordinal: Int, name: FileName?)]] = [:]
        if !gone.isEmpty {
            let logged = try loggedImports(of: Set(gone.map(\.key)))
            let unlogged = gone.filter { !logged.ordinals.contains(ImportedPart(key: $0.key, ordinal: $0.ordinal)) }
            let found = try findByIdentity(
                Set(unlogged.map(\.fileID)), in: folder.rawValue)
            for part in gone {
                var name: FileName?
                if !logged.ordinals.contains(ImportedPart(key: part.key, ordinal: part.ordinal)) {
                    if let file = found[part.fileID] {
                        records.append(try deliveredRecord(part, file.name, file.status, in: folder.rawValue))
                        name = file.name
                    } else {
                        records.append(recoveredRecord(part))
                    }
                }
                delivered[part.key, default: []].append((part.ordinal, name))
            }
            records += try importedRecords(delivered, logged: logged.imported, index: index)
        }
        try log.append(records, durable: true)
        var settlements: [[UInt8]: ImportIndex.Settlement] = [:]
        for (key, parts) in delivered {
            let pending = try index.pendingMessage(key)
            var settlement = ImportIndex.Settlement(
                key: key, delivered: parts, count: pending?.count ?? 0, messageID: pending?.messageID)
            if let pending { settlement.complete = try isComplete(pending, adding: parts, index: index) }
            settlements[key] = settlement
        }
        for part in notPlaced {
            let empty = ImportIndex.Settlement(key: part.key, count: 0, messageID: nil)
            settlements[part.key, default: empty].notPlaced.append(part.ordinal)
        }
        try index.settle(Array(settlements.values))
        for staging in stale {
            // Forgotten by the index above: a file no one will place. One left behind is swept later.
            _ = try? system_unlinkat(folder.rawValue, staging)
        }
    }

    /// A staging file still there with its inode may also be in the Inbox under its new name: a rename made by `link`
    /// and `unlink` (ARCHITECTURE.md, "Network and FUSE filesystems") that the crash cut between the two. Such a
    /// staging name is unlinked, finishing the rename, and its part counted as renamed (`gone`), never as not placed,
    /// which would place it again.
    private func finishInterruptedRenames(
        _ notPlaced: inout [ImportIndex.PlacingPart], into gone: inout [ImportIndex.PlacingPart],
        stale: inout [FileName], in folder: CInt
    ) throws(ContainerError) {
        // Not told by the link count, which a FUSE client may keep from before the `link` for the staging name.
        let linked = notPlaced.filter { stale.contains($0.staging) }
        guard !linked.isEmpty else { return }
        let found = try findByIdentity(Set(linked.map(\.fileID)), in: folder)
        for part in linked {
            guard let file = found[part.fileID] else { continue }
            do {
                guard try finishInterruptedMove(folder, part.staging, folder, file.name) else { continue }
            } catch {
                throw error.failure("finish the delivery of", itemPath(file.name))
            }
            notPlaced.removeAll { $0.staging == part.staging }
            stale.removeAll { $0 == part.staging }
            gone.append(part)
        }
    }

    /// Whether the message's attachments are all delivered once `adding` are.
    private func isComplete(
        _ message: ImportIndex.PendingMessage, adding parts: [(ordinal: Int, name: FileName?)], index: ImportIndex
    ) throws(ContainerError) -> Bool {
        var done = Set(parts.map(\.ordinal))
        for (ordinal, part) in try index.parts(of: message.key) {
            if case .delivered = part { done.insert(ordinal) }
        }
        return (0..<message.count).allSatisfy(done.contains)
    }

    /// The `imported` record of each message these deliveries complete, unless the log holds one.
    private func importedRecords(
        _ delivered: [[UInt8]: [(ordinal: Int, name: FileName?)]], logged: Set<[UInt8]>, index: ImportIndex
    ) throws(ContainerError) -> [Event] {
        var records: [Event] = []
        for key in delivered.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) where !logged.contains(key) {
            let parts = delivered[key] ?? []
            guard let pending = try index.pendingMessage(key), try isComplete(pending, adding: parts, index: index)
            else { continue }
            var event = Event(.imported, ["message_sha256": .string(SHA256Digest.hex(key))])
            if let id = pending.messageID { event.fields.append(("message_id", .string(id))) }
            event.fields += [
                ("source", .path(pending.source)), ("attachments", .int(Int64(parts.count))),
                ("duplicate", .bool(false)),
            ]
            records.append(event)
        }
        return records
    }

    /// The `delivered` record of an attachment a crash left in the Inbox without one.
    private func deliveredRecord(
        _ part: ImportIndex.PlacingPart, _ name: FileName, _ status: FileStatus, in folder: CInt
    )
        throws(ContainerError) -> Event
    {
        let sha256: [UInt8]
        do {
            let file = try FileDescriptor(at: folder, name, [.readOnly, .noFollow, .nonBlocking])
            sha256 = try SHA256Digest().hash(file.rawValue, from: 0, to: nil, shown: itemPath(name))
        } catch let error as ContainerError {
            throw error
        } catch {
            throw ContainerError(.failure, "cannot read '\(itemPath(name))': \(error)")
        }
        var event = Event(
            .delivered,
            [
                "path": .path(loggedPath(.inbox, name)), "size": .int(status.size),
                "sha256": .string(SHA256Digest.hex(sha256)), "message_sha256": .string(SHA256Digest.hex(part.key)),
                "ordinal": .int(Int64(part.ordinal)),
            ])
        if let why = part.notExpanded { event.fields.append(("not_expanded", .string(why))) }
        event.fields += [("recovered", .bool(true)), ("id", .string(Identity(status).text))]
        return event
    }

    /// The record of an attachment renamed into the Inbox by a crashed import and gone from it since.
    private func recoveredRecord(_ part: ImportIndex.PlacingPart) -> Event {
        Event(
            .recovered,
            [
                "message_sha256": .string(SHA256Digest.hex(part.key)), "ordinal": .int(Int64(part.ordinal)),
                "action": .string("delivered by an interrupted import, no longer in the Inbox"),
            ])
    }

    /// The Inbox's files (not hidden) with these identities, by one scan of the folder.
    private func findByIdentity(_ wanted: Set<FileID>, in folder: CInt) throws(ContainerError)
        -> [FileID: (name: FileName, status: FileStatus)]
    {
        var found: [FileID: (name: FileName, status: FileStatus)] = [:]
        guard !wanted.isEmpty else { return found }
        do {
            try FileDescriptor(owning: try system_dup(folder, atLeast: 3)).forEachEntry { name throws(Errno) in
                guard !name.isHidden, let status = try fileStatusIfPresent(in: folder, name),
                    status.kind == .regular
                else { return true }
                if wanted.contains(status.fileID) { found[status.fileID] = (name, status) }
                return found.count < wanted.count
            }
        } catch {
            throw error.failure("read", container.path(.inbox))
        }
        return found
    }

    /// What the log holds of these messages: the attachments with a `delivered` or `recovered` record, and the
    /// messages with an `imported` record.
    private func loggedImports(of keys: Set<[UInt8]>) throws(ContainerError)
        -> (ordinals: Set<ImportedPart>, imported: Set<[UInt8]>)
    {
        var ordinals: Set<ImportedPart> = []
        var imported: Set<[UInt8]> = []
        try log.forEachRecord(kinds: [.imported, .delivered, .recovered]) { record in
            guard let hex = record.fields["message_sha256"], let key = ImportIndex.key(hex: hex), keys.contains(key)
            else { return true }
            if record.kind == .imported {
                imported.insert(key)
            } else if let ordinal = record.fields["ordinal"].flatMap({ Int($0) }) {
                ordinals.insert(ImportedPart(key: key, ordinal: ordinal))
            }
            return true
        }
        return (ordinals, imported)
    }
}

/// One attachment of one message.
private struct ImportedPart: Hashable {
    let key: [UInt8]
    let ordinal: Int
}
