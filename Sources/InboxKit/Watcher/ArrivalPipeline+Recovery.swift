import AppContainer
import Foundation
import Glibc

/// The watcher's memory across restarts. The event log is the truth: every `arrived` record carries the
/// arrival's identity and, when it was to be moved or deleted, that disposition. A checkpoint file holds the
/// identities still in the Inbox as of one seq, so that a start reads only the log written since.
extension ArrivalPipeline {
    var checkpointPath: String { container.stateDirectory + "/arrived.checkpoint" }

    /// Loads the checkpoint, replays the log after it, and finishes dispositions a crash interrupted:
    /// an item logged `arrived` for a move that the log does not show as `moved` is moved now, or, when
    /// the rename had happened, found in Documents and logged. A deletion cut short goes back first.
    func recoverInterruptedBatch() throws(ContainerError) {
        restoreInterruptedDeletions()
        let since = loadCheckpoint()
        var pending: [Identity: (name: FileName, disposition: Disposition)] = [:]
        for record in try inbox.log.records(since: since) {
            lastSeq = max(lastSeq, record.seq)
            guard let id = record.fields["id"].flatMap(Identity.init(text:)) else { continue }
            switch record.event {
            case EventKind.arrived.rawValue:
                arrived.insert(id)
                if let disposition = record.fields["disposition"].flatMap(Disposition.init(rawValue:)),
                    disposition != .keep, let name = Self.inboxName(record, key: "path")
                {
                    pending[id] = (name, disposition)
                }
            case EventKind.moved.rawValue, EventKind.deleted.rawValue:
                arrived.remove(id)
                pending[id] = nil
            default:
                break
            }
        }
        var finished: [Event] = []
        for (id, item) in pending.sorted(by: { $0.value.name < $1.value.name }) {
            if let event = finish(item.name, id: id, item.disposition) { finished.append(event) }
        }
        if !finished.isEmpty {
            try? documents.sync()
            try? inboxFolder.sync()
            try commit(finished, durable: true)
        }
    }

    /// Applies an interrupted disposition, or records the one the disk already holds.
    private func finish(_ name: FileName, id: Identity, _ disposition: Disposition) -> Event? {
        arrived.remove(id)
        let from = EventValue.path(inbox.loggedPath(.inbox, name))
        if let status = try? fileStatus(in: inboxFolder.rawValue, name), Identity(status) == id {
            switch disposition {
            case .delete:
                guard deleteIfSame(name, id) else { return nil }
                return Event(.deleted, ["path": from, "reason": .string("recovered"), "id": .string(id.text)])
            case .move, .keep:
                guard let moved = moveIfSame(name, id) else { return nil }
                if let file = try? FileDescriptor(at: documents.rawValue, moved, [.noFollow, .nonBlocking]) {
                    try? file.restoreOwnerWrite()
                }
                return Event(
                    .moved,
                    [
                        "from": from, "to": .path(inbox.loggedPath(.documents, moved)), "reason": .string("recovered"),
                        "id": .string(id.text),
                    ])
            }
        }
        guard disposition == .move else { return nil }
        // The rename happened before the crash: find the name it took in Documents by its inode.
        for attempt in 0..<10_000 {
            let candidate = ClashNaming.documents.candidate(for: name, attempt: attempt)
            guard let status = try? fileStatus(in: documents.rawValue, candidate) else { return nil }
            if status.device == id.device && status.inode == id.inode {
                return Event(
                    .moved,
                    [
                        "from": from, "to": .path(inbox.loggedPath(.documents, candidate)),
                        "reason": .string("recovered"), "id": .string(id.text),
                    ])
            }
        }
        return nil
    }

    /// The Inbox name in a record's path field (`Documents/Inbox/<name>`), exact to the byte.
    static func inboxName(_ record: EventRecord, key: String) -> FileName? {
        guard let bytes = record.pathBytes(key), let slash = bytes.lastIndex(of: 0x2F) else { return nil }
        return FileName(bytes: bytes[(slash + 1)...])
    }

    /// Reads the checkpoint into `arrived`; returns the seq it holds (0 when there is none).
    private func loadCheckpoint() -> UInt64 {
        guard let bytes = try? FileDescriptor(checkpointPath, [.noFollow]).readToEnd() else { return 0 }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        guard let first = lines.first, first.hasPrefix("seq "), let seq = UInt64(first.dropFirst(4)) else { return 0 }
        for line in lines.dropFirst() {
            if let id = Identity(text: line) { arrived.insert(id) }
        }
        lastSeq = seq
        return seq
    }

    /// Writes the checkpoint atomically: a temporary file, fsynced, renamed over the old one.
    func saveCheckpoint() throws(ContainerError) {
        var text = "seq \(lastSeq)\n"
        for id in arrived { text += id.text + "\n" }
        let temporary = container.stateDirectory + "/.arrived.checkpoint.tmp"
        do {
            let file = try FileDescriptor(temporary, [.writeOnly, .create, .truncate, .noFollow], mode: 0o644)
            try file.writeAll(Array(text.utf8))
            try file.sync()
            try system_renameat2(currentDirectory, temporary, currentDirectory, checkpointPath, [])
        } catch {
            throw error.failure("write the checkpoint", checkpointPath)
        }
    }
}
