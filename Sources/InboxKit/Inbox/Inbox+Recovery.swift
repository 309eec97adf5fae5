import AppContainer
import Glibc

extension Inbox {
    /// Settles the moves whose process died (see `MoveJournal`): a move that reached Documents is finished and
    /// logged `moved` (reason `recovered`) unless its record was written; a copy that did not get that far is
    /// rolled back, the item under its name in the Inbox again (logged `recovered`). An intent that cannot be
    /// read or settled now (a folder cannot be opened, a rename fails) stays for the next try; one that no mover
    /// of ours wrote is set aside (`<name>.intent.refused`), untouched and never acted on. Each is logged `error`.
    /// `report` is given each failure the log took, for a line on stderr; the failures the log could not take (the
    /// log failing too) are returned, for the caller to report another way.
    package func recoverInterruptedMoves(report: (ContainerError) -> Void = { _ in }) -> [ContainerError] {
        let journal = MoveJournal(container: container)
        var unlogged: [ContainerError] = []
        journal.forEachAbandoned { finding in
            switch finding {
            case .abandoned(let intent, let record):
                let entry = journalEntryPath(record.recordName)
                do throws(ContainerError) {
                    try settle(
                        intent, inboxFolder: try container.openFolder(.inbox),
                        documents: try container.openFolder(.documents))
                } catch {
                    logRecoveryError(error, path: loggedPath(.inbox, intent.name), unlogged: &unlogged, report: report)
                    guard error.code == .badData else { return }
                    do throws(Errno) {
                        try journal.setAside(record.recordName)
                    } catch {
                        logRecoveryError(
                            error.failure("set aside the move journal entry", journal.directory), path: entry,
                            unlogged: &unlogged, report: report)
                    }
                    return
                }
                do throws(Errno) {
                    try journal.end(record)
                } catch {
                    // Settled: the intent left is settled again at the next try, as nothing.
                    logRecoveryError(
                        error.failure("end the move journal intent in", journal.directory), path: entry,
                        unlogged: &unlogged, report: report)
                }
            case .failed(let recordName, let error):
                logRecoveryError(error, path: journalEntryPath(recordName), unlogged: &unlogged, report: report)
            }
        }
        return unlogged
    }

    /// `Library/Application Support/inbox/journal/<entry>` as bytes: how the event log names a journal entry (nil: the
    /// journal itself).
    private func journalEntryPath(_ recordName: FileName?) -> [UInt8] {
        Array((Container.stateRelativePath + "/journal").utf8) + (recordName.map { [0x2F] + $0.bytes } ?? [])
    }

    /// Logs `error` as an `error` record and gives it to `report`; when the log fails too, both go into `unlogged`
    /// as one error (the log's code and errno). What recovery does with the entry is the same either way.
    private func logRecoveryError(
        _ error: ContainerError, path: [UInt8], unlogged: inout [ContainerError], report: (ContainerError) -> Void
    ) {
        do {
            _ = try log.append(errorEvent(during: "recover a move", path: path, error))
            report(error)
        } catch let logFailure {
            unlogged.append(
                ContainerError(
                    logFailure.code,
                    "recovering a move: \(error.message); and the event log cannot record it: "
                        + logFailure.message, cause: logFailure.cause))
        }
    }

    /// The `error` record of `error`, met while doing `during` to `path`.
    func errorEvent(during: String, path: [UInt8], _ error: ContainerError) -> Event {
        Event(
            .error,
            [
                "during": .string(during), "path": .path(path), "errno": .int(Int64(error.cause?.rawValue ?? 0)),
                "message": .string(error.message),
            ])
    }

    private func settle(
        _ intent: MoveJournal.Intent, inboxFolder: borrowing FileDescriptor, documents: borrowing FileDescriptor
    ) throws(ContainerError) {
        do {
            // A folder's claim cut between the `mkdir` of its placeholder and the `rename` onto it (ARCHITECTURE.md,
            // "Moves without rename flags"): the folder still has its name, and nothing else was done.
            if let claim = intent.claim, try removeFolderPlaceholder(in: inboxFolder.rawValue, claim) { return }
        } catch {
            throw error.failure("settle the move of", itemPath(intent.name))
        }
        if try refuseUnlessOwn(intent, inboxFolder: inboxFolder, documents: documents) { return }
        do {
            if let claim = intent.claim { try Mover.sweepStaging(for: claim, in: documents.rawValue) }
        } catch {
            throw error.failure("settle the move of", itemPath(intent.name))
        }
        if let claim = intent.claim, try present(claim, in: inboxFolder, intent) {
            if let done = try completedCopy(intent, claim: claim, inboxFolder: inboxFolder, documents: documents) {
                do {
                    try Mover.remove(claim, in: inboxFolder.rawValue)
                    try inboxFolder.sync()
                } catch {
                    throw error.failure("finish the move of", itemPath(intent.name))
                }
                try logRecoveredMove(intent, to: done)
                return
            }
            let back: FileName
            do {
                // A folder's copy (`Mover.copyFolder`): its staging folder goes, and the placeholder of a rename of it
                // that the crash cut short (ARCHITECTURE.md, "Moves without rename flags").
                try Mover.removeFolderStaging(for: claim, in: documents.rawValue)
                _ = try removeFolderPlaceholders(for: intent.name, in: documents.rawValue, naming: .documents)
                _ = try removeFolderPlaceholder(in: inboxFolder.rawValue, intent.name)  // an earlier put-back's
                back = try putBack(claim, from: inboxFolder.rawValue, into: inboxFolder.rawValue, as: intent.name)
                try inboxFolder.sync()
            } catch {
                throw error.failure("roll back the move of", itemPath(intent.name))
            }
            try log.append(
                Event(.recovered, ["path": .path(loggedPath(.inbox, back)), "action": .string("rolled back the move")]))
            return
        }
        if intent.claim == nil, let identity = intent.identity, let privateName = intent.privateName,
            try putBackPrivateName(privateName, intent, identity, inboxFolder: inboxFolder, documents: documents)
        {
            return
        }
        // No claim: a rename that may have happened, or a copy whose claim was removed. Was it logged?
        guard let identity = intent.identity, try !movedLogged(intent, identity) else { return }
        if let linked = intent.linked, try present(linked, in: documents, intent) {
            try logRecoveredMove(intent, to: linked)
        } else if intent.claim == nil {
            // Renamed, or not: only Documents read to the end tells. A failure to read it leaves the intent, to be
            // tried again, never taken for "not renamed" (the file would stay in Documents without its record).
            let found: FileName?
            do {
                found = try find(identity, in: documents, near: intent.name)
            } catch {
                throw error.failure("look in Documents for", itemPath(intent.name))
            }
            guard let moved = found else {
                // Not renamed. A folder's move by `mkdir` and `rename` (ARCHITECTURE.md, "Network and FUSE
                // filesystems") may have stopped between the two: the empty folder it made goes, so that the item
                // takes its own name when moved again, not the next one beside it.
                do {
                    _ = try removeFolderPlaceholders(for: intent.name, in: documents.rawValue, naming: .documents)
                } catch {
                    throw error.failure("settle the move of", itemPath(intent.name))
                }
                return
            }
            // Renamed: the write bit may not have come back before the crash. Given first, so that a failure leaves
            // the intent, to be tried again. A rename made by `link` and `unlink` (ARCHITECTURE.md, "Network and FUSE
            // filesystems") may have stopped between the two: the Inbox name (or the private name, "Moves without
            // rename flags") still on the file is unlinked first.
            do {
                for name in [intent.name] + (intent.privateName.map { [$0] } ?? [])
                where try finishInterruptedMove(inboxFolder.rawValue, name, documents.rawValue, moved) {
                    try inboxFolder.sync()
                }
                try Mover.restoreOwnerWrite(moved, in: documents.rawValue)
            } catch {
                throw error.failure("finish moving", itemPath(intent.name))
            }
            try logRecoveredMove(intent, to: moved)
        }
    }

    /// The private name of a file's move (ARCHITECTURE.md, "Moves without rename flags") that the mover's death cut
    /// short before the file was linked into Documents: the item there goes back under its name (a clash name beside
    /// it if a new file took that), logged `recovered`; another file there (a writer's, renamed over the item's name
    /// just before the `rename`) goes back to arrive itself, and the item is logged `error`. Returns whether it did
    /// either; false when the private name is gone or holds the item linked into Documents already (the rest of the
    /// recovery finds it there and unlinks the private name).
    private func putBackPrivateName(
        _ privateName: FileName, _ intent: MoveJournal.Intent, _ identity: Identity,
        inboxFolder: borrowing FileDescriptor, documents: borrowing FileDescriptor
    ) throws(ContainerError) -> Bool {
        let back: FileName
        let isItem: Bool
        do {
            guard let status = try fileStatusIfPresent(in: inboxFolder.rawValue, privateName, fresh: true) else {
                return false
            }
            isItem = identity.isSameFile(as: status)
            if isItem, try find(identity, in: documents, near: intent.name) != nil { return false }
            // A folder's rename from there onto the placeholder it made in Documents, cut short: the placeholder goes.
            if status.kind == .directory {
                _ = try removeFolderPlaceholders(for: intent.name, in: documents.rawValue, naming: .documents)
            }
            back = try putBack(privateName, from: inboxFolder.rawValue, into: inboxFolder.rawValue, as: intent.name)
            try inboxFolder.sync()
        } catch {
            throw error.failure("roll back the move of", itemPath(intent.name))
        }
        if isItem {
            try log.append(
                Event(.recovered, ["path": .path(loggedPath(.inbox, back)), "action": .string("rolled back the move")]))
        } else {
            let failure = Errno.staleFile.failure("move", itemPath(intent.name))
            try log.append(errorEvent(during: "move", path: loggedPath(.inbox, intent.name), failure))
        }
        return true
    }

    /// An intent is acted on only if a mover of ours could have written it: its claim is a claim name, and the
    /// claimed file is the item it names (device and inode). Anything else (a crafted or foreign intent, as a
    /// restored archive could hold) would make recovery unlink or rename a file it never claimed. But a file's claim
    /// is made by a plain `rename` where rename flags are refused (ARCHITECTURE.md, "Moves without rename flags"): a
    /// plain file found there instead of the item took the item's name just before the claim, and goes back into the
    /// Inbox to arrive itself (`putBackPrivateName`: the item is an `error`). Returns whether that settled the intent.
    private func refuseUnlessOwn(
        _ intent: MoveJournal.Intent, inboxFolder: borrowing FileDescriptor, documents: borrowing FileDescriptor
    ) throws(ContainerError) -> Bool {
        guard let claim = intent.claim else { return false }
        let shown = "the move journal intent for '\(itemPath(intent.name))'"
        guard claim.bytes.starts(with: Mover.claimPrefix), !claim.bytes.contains(0x2F) else {
            throw ContainerError(.badData, "\(shown) claims '\(claim)', which no mover names a claim: not acted on")
        }
        guard let identity = intent.identity else { return false }
        let status: FileStatus?
        do {
            status = try fileStatusIfPresent(in: inboxFolder.rawValue, claim, fresh: true)
        } catch {
            throw error.failure("settle the move of", itemPath(intent.name))
        }
        guard let status, !identity.isSameFile(as: status) else { return false }
        guard status.kind == .regular, status.linkCount == 1 else {
            throw ContainerError(.badData, "\(shown) claims '\(claim)', which is another file: not acted on")
        }
        return try putBackPrivateName(claim, intent, identity, inboxFolder: inboxFolder, documents: documents)
    }

    /// Whether `name` is in `folder`; a failure to tell leaves the intent for the next try.
    private func present(_ name: FileName, in folder: borrowing FileDescriptor, _ intent: MoveJournal.Intent)
        throws(ContainerError) -> Bool
    {
        do {
            return try fileStatusIfPresent(in: folder.rawValue, name) != nil
        } catch {
            throw error.failure("settle the move of", itemPath(intent.name))
        }
    }

    /// Whether a `moved` record of the item was logged after the intent was written.
    private func movedLogged(_ intent: MoveJournal.Intent, _ identity: Identity) throws(ContainerError) -> Bool {
        try log.records(since: intent.seq, kinds: [.moved]).contains {
            $0.fields["id"] == identity.text
        }
    }

    private func logRecoveredMove(_ intent: MoveJournal.Intent, to moved: FileName) throws(ContainerError) {
        var record = EncodedEvents(reservingCapacity: 1)
        record.appendMoved(
            from: intent.name, to: moved, reason: "recovered",
            identity: intent.identity,
            inbox: loggedFolder(.inbox), documents: loggedFolder(.documents))
        _ = try log.append(record, durable: true)
    }

    /// The name in Documents of the file `identity` names (device and inode): the names a clash would give
    /// `name` first, then every entry; nil when no name holds it. Only "no such file" means a name does not: any
    /// other failure to read Documents throws, as it cannot tell. With `index`, Documents is read whole at most once
    /// for every ask that passes it: the clash names are looked at up to the first free one, then the index answers.
    func find(
        _ identity: Identity, in documents: borrowing FileDescriptor, near name: FileName,
        index: DocumentsIndex? = nil
    ) throws(Errno) -> FileName? {
        if let found = index?.files { return found[identity.fileID] }
        for attempt in ClashNaming.attempts().prefix(120) {
            let candidate = ClashNaming.documents.candidate(for: name, attempt: attempt)
            let status = try fileStatusIfPresent(in: documents.rawValue, candidate)
            if let status, identity.isSameFile(as: status) { return candidate }
            // A free name ends the clash names the mover took; past it, the index is one read for every ask.
            if status == nil, index != nil { break }
        }
        var found: FileName?
        var all: [FileID: FileName] = [:]
        try documents.forEachEntry { entry throws(Errno) in
            // An entry gone since it was read is passed over, as it would have been had it gone before.
            guard let status = try fileStatusIfPresent(in: documents.rawValue, entry) else { return true }
            if identity.isSameFile(as: status) { found = entry }
            if index != nil { all[status.fileID] = entry }
            return found == nil || index != nil
        }
        index?.files = all
        return found
    }

    /// The name in Documents that holds a complete copy of the claimed item, if the move got that far; a
    /// failure to read throws, leaving the intent for the next try.
    private func completedCopy(
        _ intent: MoveJournal.Intent, claim: FileName, inboxFolder: borrowing FileDescriptor,
        documents: borrowing FileDescriptor
    ) throws(ContainerError) -> FileName? {
        // Named in Documents, unless the undo of a failed move had removed it again when the process died.
        if let linked = intent.linked { return try present(linked, in: documents, intent) ? linked : nil }
        guard let tried = intent.tried.last else { return nil }
        do {
            // A tried name is linked only once the copy is whole: it holds the copy, or another file.
            guard let named = try fileStatusIfPresent(in: documents.rawValue, tried) else { return nil }
            if try fileStatus(in: inboxFolder.rawValue, claim).kind == .directory {
                // A folder's copy is renamed from its staging folder: named once that is gone, and not a placeholder.
                let staging = Mover.folderStagingName(for: claim)
                guard named.kind == .directory, named.mode != 0,
                    try fileStatusIfPresent(in: documents.rawValue, staging) == nil
                else { return nil }
                return tried
            }
            let original = try FileDescriptor(at: inboxFolder.rawValue, claim, [.noFollow, .nonBlocking])
            let copy = try FileDescriptor(at: documents.rawValue, tried, [.noFollow, .nonBlocking])
            return try original.readToEnd() == copy.readToEnd() ? tried : nil
        } catch {
            throw error.failure("settle the move of", itemPath(intent.name))
        }
    }
}

/// The files of Documents by place, read whole once by `Inbox.find` and kept for the asks that follow, so that a
/// recovery with many identities pending looks at each name once (ARCHITECTURE.md, "Network and FUSE filesystems").
/// Good for one recovery: what the recovery itself moves into Documents is never asked for again.
final class DocumentsIndex {
    fileprivate(set) var files: [FileID: FileName]?
}
