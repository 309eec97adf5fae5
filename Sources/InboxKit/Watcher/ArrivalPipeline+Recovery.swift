import AppContainer
import Foundation
import Glibc

/// The watcher's memory across restarts. The event log is the truth: every `arrived` record carries the
/// arrival's identity and, when it was to be moved or deleted, that disposition. A checkpoint file holds the
/// identities still in the Inbox as of one seq, so that a start reads only the log written since.
extension ArrivalPipeline {
    var checkpointPath: String { container.stateDirectory + "/arrived.checkpoint" }

    /// Loads the checkpoint, replays the log after it, and finishes dispositions a crash interrupted or a
    /// failure left: an item logged `arrived` for a move that the log does not show as `moved` is moved now,
    /// or, when the rename had happened, found in Documents and logged. A deletion cut short goes back first.
    func recoverInterruptedBatch() throws(ContainerError) {
        var putBack = EncodedEvents()
        do {
            for (name, error) in try mover.restoreInterruptedDeletions() {
                fail(during: "put back an interrupted deletion", name, error, folder: loggedInbox, to: &putBack)
            }
        } catch {
            throw error.failure("read", container.path(.inbox))
        }
        try commit(putBack, durable: false)
        var pending: [Identity: (name: FileName, disposition: Disposition)] = [:]
        var since = loadCheckpoint { id, name, disposition in pending[id] = (name, disposition) }
        if since > EventLog.maxSeq {
            // Crafted or damaged: set aside, and the whole log read instead.
            try setAsideCheckpoint(because: "its seq \(since) is past any real count")
            arrived.removeAll()
            pending.removeAll()
            lastSeq = 0
            since = 0
        }
        // A log truncated or replaced since the checkpoint goes on after it, so that nothing logged from now on
        // hides behind the checkpoint's seq.
        try inbox.log.continueSeq(after: since, because: "the event log is behind the watcher's checkpoint")
        // Arrivals whose handler was asked and whose answer the log does not hold.
        var unanswered: [Identity: (name: FileName, handler: String)] = [:]
        for record in try inbox.log.records(since: since) {
            lastSeq = max(lastSeq, record.seq)
            guard let id = record.fields["id"].flatMap(Identity.init(text:)) else { continue }
            let name = Self.inboxName(record, key: "path")
            let disposition = record.fields["disposition"].flatMap(Disposition.init(rawValue:))
            switch record.event {
            case EventKind.arrived.rawValue:
                arrived.insert(id)
                if let name, let handler = record.fields["handler"] {
                    unanswered[id] = (name, handler)
                } else if let name, let disposition, disposition != .keep {
                    pending[id] = (name, disposition)
                }
            case EventKind.handled.rawValue:
                unanswered[id] = nil
                if let name, let disposition, disposition != .keep { pending[id] = (name, disposition) }
            case EventKind.moved.rawValue, EventKind.deleted.rawValue:
                arrived.remove(id)
                pending[id] = nil
                unanswered[id] = nil
            default:
                break
            }
        }
        var finished = EncodedEvents()
        for (id, item) in unanswered.sorted(by: { $0.value.name < $1.value.name }) {
            // Asked, and cut off before its answer was logged: kept, and never asked again.
            finished.append(
                Event(
                    .handled,
                    [
                        "path": .path(inbox.loggedPath(.inbox, item.name)), "handler": .string(item.handler),
                        "interrupted": .bool(true), "id": .string(id.text), "disposition": .string("keep"),
                    ]))
        }
        for (id, item) in pending.sorted(by: { $0.value.name < $1.value.name }) {
            finish(item.name, id: id, item.disposition, to: &finished)
        }
        try commitApplied(finished)
    }

    /// Applies an interrupted disposition, or records the one the disk already holds.
    private func finish(_ name: FileName, id: Identity, _ disposition: Disposition, to records: inout EncodedEvents) {
        let status: FileStatus?
        do {
            status = try fileStatusIfPresent(in: inboxFolder.rawValue, name)
        } catch {
            // Cannot tell now: tried again later, as a failed disposition.
            fail(during: "read", name, error, folder: loggedInbox, to: &records)
            failed.schedule(name, Pending(identity: id, disposition: disposition))
            return
        }
        if let status, Identity(status) == id {
            let decided = Decided(name: name, status: status, disposition: disposition)
            if apply(decided, reason: "recovered", to: &records) { arrived.remove(id) }
            return
        }
        if disposition == .delete {
            // Decided, logged, and gone: the unlink happened before the crash (an aside was put back above).
            arrived.remove(id)
            records.begin(.deleted)
            records.field("path", folder: loggedInbox, name)
            records.field("reason", "recovered")
            records.field("id", identity: id)
            records.end()
            return
        }
        // The rename happened before the crash: find the name it took in Documents by its inode.
        if let moved = inbox.find(id, in: documents.descriptor, near: name) {
            arrived.remove(id)
            records.appendMoved(
                from: name, to: moved, reason: "recovered", identity: id, inbox: loggedInbox,
                documents: loggedDocuments)
        }
    }

    /// The Inbox name in a record's path field (`Documents/Inbox/<name>`), exact to the byte.
    static func inboxName(_ record: EventRecord, key: String) -> FileName? {
        guard let bytes = record.pathBytes(key), let slash = bytes.lastIndex(of: 0x2F) else { return nil }
        return FileName(bytes: bytes[(slash + 1)...])
    }

    /// Reads the checkpoint into `arrived`, and calls `pending` with each disposition it holds that has yet to
    /// be applied; returns the seq it holds (0 when there is none).
    private func loadCheckpoint(pending: (Identity, FileName, Disposition) -> Void) -> UInt64 {
        guard let bytes = try? FileDescriptor(checkpointPath, [.noFollow]).readToEnd() else { return 0 }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        guard let first = lines.first, first.hasPrefix("seq "), let seq = UInt64(first.dropFirst(4)) else { return 0 }
        for line in lines.dropFirst() {
            let parts = line.split(separator: " ")
            if parts.count == 4, parts[0] == "pending", let disposition = Disposition(rawValue: String(parts[1])),
                let id = Identity(text: parts[2]), let bytes = Data(base64Encoded: String(parts[3])),
                let name = FileName(bytes: bytes)
            {
                arrived.insert(id)
                pending(id, name, disposition)
            } else if let id = Identity(text: line) {
                arrived.insert(id)
            }
        }
        lastSeq = seq
        return seq
    }

    /// Renames a damaged checkpoint aside (`arrived.checkpoint.damaged`) and logs why.
    private func setAsideCheckpoint(because reason: String) throws(ContainerError) {
        let aside = checkpointPath + ".damaged"
        do {
            try system_renameat2(currentDirectory, checkpointPath, currentDirectory, aside, [])
        } catch {
            throw error.failure("set aside the damaged checkpoint", checkpointPath)
        }
        try commit(
            [
                Event(
                    .error,
                    [
                        "during": .string("read the checkpoint"), "path": .string(aside),
                        "message": .string("the checkpoint was set aside as '\(aside)': \(reason)"),
                    ])
            ], durable: true)
    }

    /// Writes the checkpoint atomically: a temporary file, fsynced, renamed over the old one. It holds the seq,
    /// the identities still in the Inbox, and the dispositions that failed and wait for a retry
    /// (`pending <disposition> <id> <name, base64>`).
    func saveCheckpoint() throws(ContainerError) {
        var text = "seq \(lastSeq)\n"
        for id in arrived { text += id.text + "\n" }
        for (name, entry) in failed.entries {
            let pending = entry.payload
            text += "pending \(pending.disposition.rawValue) \(pending.identity.text) "
            text += Data(name.bytes).base64EncodedString() + "\n"
        }
        do {
            let folder = try FileDescriptor(container.stateDirectory, [.directory])
            try folder.replaceFile(
                FileName("arrived.checkpoint").unsafelyUnwrapped, with: Array(text.utf8),
                temporary: FileName(".arrived.checkpoint.tmp"))
        } catch {
            throw error.failure("write the checkpoint", checkpointPath)
        }
    }
}
