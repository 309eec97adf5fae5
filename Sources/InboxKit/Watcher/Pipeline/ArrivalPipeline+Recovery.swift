import AppContainer
import FoundationEssentials
import Glibc

/// The watcher's memory across restarts. The event log is the truth: every `arrived` record carries the
/// arrival's identity and, when it was to be moved or deleted, that disposition (or, where a handler decides,
/// its `handled` record does). A checkpoint file holds the identities still in the Inbox as of one seq, so that
/// a start reads only the log written since (`ArrivalLedger`).
extension ArrivalPipeline {
    var checkpointPath: [UInt8] { ArrivalLedger.checkpointPath(container) }

    /// Loads the checkpoint, replays the log after it, and finishes dispositions a crash interrupted or a
    /// failure left: an item logged `arrived` for a move that the log does not show as `moved` is moved now,
    /// or, when the rename had happened, found in Documents and logged. A private copy's exchange cut short is
    /// rolled back, and a deletion cut short goes back, first.
    func recoverInterruptedBatch() throws(ContainerError) {
        var putBack = EncodedEvents()
        do {
            // A private copy cut short in its two-step exchange: the shared file goes back to its name.
            try rollBackExchange(
                inboxFolder.rawValue, inboxFolder.rawValue, intent: Self.exchangeIntent, naming: .inbox)
            for (name, error) in try mover.restoreInterruptedDeletions() {
                fail(during: "put back an interrupted deletion", name, error, folder: loggedInbox, to: &putBack)
            }
        } catch {
            throw error.failure("read", container.path(.inbox))
        }
        try commit(putBack, durable: false)
        var ledger = ArrivalLedger()
        var since = ledger.loadCheckpoint(checkpointPath)
        // A log truncated or replaced since the checkpoint goes on after it, so that nothing logged from now on
        // hides behind the checkpoint's seq. A checkpoint no log could have reached (crafted or damaged) is set
        // aside, and the whole log read instead.
        if !(try inbox.log.continueSeq(after: since, because: "the event log is behind the watcher's checkpoint")) {
            try setAsideCheckpoint(because: "its seq \(since) is past any real count")
            ledger = ArrivalLedger()
            since = 0
        }
        lastSeq = since
        for record in try inbox.log.records(since: since) {
            lastSeq = max(lastSeq, record.seq)
            ledger.replay(record)
        }
        do {
            try ledger.followRemount(ofInbox: inboxFolder.rawValue)
        } catch {
            throw error.failure("read", container.path(.inbox))
        }
        arrived = ledger.arrived
        var finished = EncodedEvents()
        for (id, question) in ledger.unanswered.sorted(by: { $0.value.name < $1.value.name }) {
            // Asked, and cut off before its answer was logged: kept, and never asked again.
            finished.append(
                Event(
                    .handled,
                    [
                        "path": .path(inbox.loggedPath(.inbox, question.name)), "handler": .string(question.handler),
                        "interrupted": .bool(true), "id": .string(id.text), "disposition": .string("keep"),
                    ]))
        }
        // Each name looked at once, however many identities the log holds pending for it (a filesystem that gave an
        // item a new inode at every look once left thousands).
        let looks = RecoveryLooks()
        for (id, decision) in ledger.pending.sorted(by: { $0.value.name < $1.value.name }) {
            finish(decision.name, id: id, decision.disposition, to: &finished, looks: looks)
        }
        try commitApplied(finished)
    }

    /// Applies an interrupted disposition, or records the one the disk already holds. What cannot be read now is
    /// tried again later as this recovery (`Pending.recovering`), and kept in the checkpoint for the next start.
    /// `looks`, shared by the asks of one recovery, keeps what it read of each name.
    func finish(
        _ name: FileName, id: Identity, _ disposition: Disposition, to records: inout EncodedEvents,
        looks: RecoveryLooks? = nil
    ) {
        let unsettled = Pending(identity: id, disposition: disposition, recovering: true)
        var name = name
        if disposition == .move {
            do {
                name = try putBackPrivateName(name, id: id, to: &records, looks: looks)
            } catch {
                fail(during: "look in Documents for", name, error, folder: loggedInbox, to: &records)
                failed.schedule(name, unsettled)
                return
            }
        }
        let status: FileStatus?
        // Whatever is done below is done to `name`: a later ask reads it again.
        let known = looks?.inbox.removeValue(forKey: name)
        do {
            // Fresh: a FUSE or NFS client may still give the item the one link it had before a `link` that the
            // crash cut off from its `unlink` (ARCHITECTURE.md, "Network and FUSE filesystems"). Moved again on
            // that word, it would clash with its own second name in Documents and take a name beside it.
            if let known {
                status = known
            } else {
                status = try fileStatusIfPresent(in: inboxFolder.rawValue, name, fresh: true)
            }
        } catch {
            fail(during: "read", name, error, folder: loggedInbox, to: &records)
            failed.schedule(name, unsettled)
            return
        }
        // A folder's move by `mkdir` and `rename` (ARCHITECTURE.md, "Network and FUSE filesystems") may have stopped
        // between the two: the empty folder it made goes, so that the folder takes its own name when moved again.
        if disposition == .move, let status, status.kind == .directory, Identity(status) == id {
            do {
                _ = try removeFolderPlaceholders(for: name, in: documents.rawValue, naming: .documents)
            } catch {
                fail(during: "look in Documents for", name, error, folder: loggedInbox, to: &records)
                failed.schedule(name, unsettled)
                return
            }
        }
        if let status, Identity(status) == id, !(disposition == .move && status.linkCount > 1) {
            failed.remove(name)
            let decided = Decided(name: name, status: status, disposition: disposition)
            if apply(decided, reason: "recovered", to: &records).left { arrived.remove(id) }
            return
        }
        if disposition == .delete {
            failed.remove(name)
            // Decided, logged, and gone: the unlink happened before the crash (an aside was put back above).
            arrived.remove(id)
            records.appendDeleted(path: loggedInbox + name.bytes, reason: "recovered", identity: id)
            return
        }
        // The rename happened before the crash: find the name it took in Documents by its inode, and give it the
        // write bit the crash may have come before. Documents that cannot be read is never taken for "not there".
        // A rename made by `link` and `unlink` may have stopped between the two (ARCHITECTURE.md, "Network and FUSE
        // filesystems"): the item's Inbox name, still on the file found, is unlinked, never taken for a hard link
        // of someone else's and copied. An item with other links that Documents does not hold is moved now.
        let found: FileName?
        do {
            found = try inbox.find(id, in: documents.descriptor, near: name, index: looks?.documents)
            // Neither the item's nor in Documents: the name is as it was read, for the next identity pending there.
            if found == nil, let status, Identity(status) != id { looks?.inbox[name] = status }
            if found == nil, status == nil { looks?.inbox[name] = .some(nil) }
            // Linked into Documents from its private name (ARCHITECTURE.md, "Moves without rename flags"), which the
            // crash left on it: unlinked.
            let privateName = Mover.privateName(inode: id.inode)
            if let found, try looks?.holdsPrivateName(privateName, in: inboxFolder) ?? true,
                try finishInterruptedMove(inboxFolder.rawValue, privateName, documents.rawValue, found)
            {
                try inboxFolder.sync()
            }
            if let found, status != nil {
                if try finishInterruptedMove(inboxFolder.rawValue, name, documents.rawValue, found) {
                    try inboxFolder.sync()
                }
            } else if let status, found == nil, Identity(status) == id {
                failed.remove(name)
                let decided = Decided(name: name, status: status, disposition: disposition)
                if apply(decided, reason: "recovered", to: &records).left { arrived.remove(id) }
                return
            }
        } catch {
            fail(during: "look in Documents for", name, error, folder: loggedInbox, to: &records)
            failed.schedule(name, unsettled)
            return
        }
        failed.remove(name)
        if let moved = found {
            arrived.remove(id)
            records.appendMoved(
                from: name, to: moved, reason: "recovered", identity: id, inbox: loggedInbox,
                documents: loggedDocuments)
            do {
                try Mover.restoreOwnerWrite(moved, in: documents.rawValue)
            } catch {
                fail(during: "restore the write bit", moved, error, folder: loggedDocuments, to: &records)
            }
        }
    }

    /// What one recovery read of the Inbox's names (their fresh status, nil for none), of its private move names,
    /// and of Documents.
    final class RecoveryLooks {
        var inbox: [FileName: FileStatus?] = [:]
        let documents = DocumentsIndex()
        private var privateNames: Set<FileName>?

        /// Whether the Inbox holds `privateName`, from one read of the folder for every ask.
        func holdsPrivateName(_ privateName: FileName, in inbox: SharedDescriptor) throws(Errno) -> Bool {
            if privateNames == nil {
                privateNames = Set(try inbox.descriptor.entries().filter { $0.bytes.starts(with: privateMovePrefix) })
            }
            return privateNames.unsafelyUnwrapped.contains(privateName)
        }
    }

    /// The private name of a move of the item `id` that a crash cut short (ARCHITECTURE.md, "Moves without rename
    /// flags"): where it holds another file (a writer's, renamed over `name` just before the item's `rename`), that
    /// file goes back into the Inbox to arrive itself, and the item is an `error`; where it holds the item, not yet in
    /// Documents, the item goes back (a clash name beside `name` if a new file took it). Returns the name to go on
    /// with in the Inbox.
    private func putBackPrivateName(
        _ name: FileName, id: Identity, to records: inout EncodedEvents, looks: RecoveryLooks?
    ) throws(Errno) -> FileName {
        let privateName = Mover.privateName(inode: id.inode)
        guard try looks?.holdsPrivateName(privateName, in: inboxFolder) ?? true,
            let status = try fileStatusIfPresent(in: inboxFolder.rawValue, privateName, fresh: true)
        else {
            return name
        }
        if id.isSameFile(as: status) {
            // Linked into Documents already: the rest of the recovery finds it there and unlinks the private name.
            guard try inbox.find(id, in: documents.descriptor, near: name, index: looks?.documents) == nil else {
                return name
            }
            let back = try putBack(privateName, from: inboxFolder.rawValue, into: inboxFolder.rawValue, as: name)
            try inboxFolder.sync()
            looks?.inbox.removeAll()  // what was read of the Inbox's names may be so no longer
            return back
        }
        try putBack(privateName, from: inboxFolder.rawValue, into: inboxFolder.rawValue, as: name)
        try inboxFolder.sync()
        looks?.inbox.removeAll()
        fail(during: "move", name, Errno.staleFile, folder: loggedInbox, to: &records)
        return name
    }

    /// Renames a damaged checkpoint aside (`arrived.checkpoint.damaged-<time>`) and logs why.
    private func setAsideCheckpoint(because reason: String) throws(ContainerError) {
        let aside: [UInt8]
        do {
            let name = FileName(ArrivalLedger.checkpointName).unsafelyUnwrapped
            let folder = try FileDescriptor(folder: container.stateDirectoryBytes)
            aside = container.statePath(try setAside(name, in: folder.rawValue, suffix: damagedSuffix()).string)
        } catch {
            throw error.failure("set aside the damaged checkpoint", checkpointPath)
        }
        try commit(
            [
                Event(
                    .error,
                    [
                        "during": .string("read the checkpoint"), "path": .path(aside),
                        "message": .string(
                            "the checkpoint was set aside as '\(String(decoding: aside, as: UTF8.self))': \(reason)"),
                    ])
            ], durable: true)
    }

    /// Writes the checkpoint atomically: a temporary file, fsynced, renamed over the old one. It holds the seq,
    /// the identities still in the Inbox, and the dispositions that failed and wait for a retry
    /// (`pending <disposition> <id> <name, base64>`).
    ///
    /// Skipped when the identities and dispositions are those of the last checkpoint written and fewer than
    /// `checkpointReplayLimit` records came since: the recovery then replays those few records (a scan of an
    /// empty Inbox, after each inotify overflow in every container of a fleet, costs no fsync).
    func saveCheckpoint() throws(ContainerError) {
        // The checkpoint stands for the log up to `lastSeq`: those records are durable first.
        try group.sync()
        var body = ""
        for id in arrived { body += id.text + "\n" }
        for (name, entry) in failed.entries {
            let pending = entry.payload
            body += "pending \(pending.disposition.rawValue) \(pending.identity.text) "
            body += Data(name.bytes).base64EncodedString() + "\n"
        }
        if let saved = savedCheckpoint, saved.body == body,
            lastSeq - min(lastSeq, saved.seq) < Self.checkpointReplayLimit
        {
            return
        }
        let text = "seq \(lastSeq)\n" + body
        do {
            let folder = try FileDescriptor(container.stateDirectoryBytes, [.directory])
            try folder.replaceFile(
                FileName("arrived.checkpoint").unsafelyUnwrapped, with: Array(text.utf8),
                temporary: FileName(".arrived.checkpoint.tmp"))
        } catch {
            throw error.failure("write the checkpoint", checkpointPath)
        }
        savedCheckpoint = (lastSeq, body)
    }

    /// How many records at most a recovery replays after a checkpoint skipped as unchanged.
    static let checkpointReplayLimit: UInt64 = 1_024
}
