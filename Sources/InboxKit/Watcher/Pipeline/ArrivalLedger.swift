import AppContainer
import FoundationEssentials

/// What the watcher's checkpoint and the event log after it say of the items that arrived and are still in the
/// Inbox (ARCHITECTURE.md, "Settled before cleaned"): which arrived, which have a disposition decided and not
/// yet done, and which a handler was asked about without an answer in the log. The watcher's recovery starts
/// from it; cleanup deletes only the items it shows settled.
struct ArrivalLedger {
    /// A move or deletion decided and logged, not yet done.
    struct Decision {
        let name: FileName
        let disposition: Disposition
    }

    /// A handler asked about an item, with no answer logged.
    struct Question {
        let name: FileName
        let handler: String
    }

    var arrived: Set<Identity> = []
    var pending: [Identity: Decision] = [:]
    var unanswered: [Identity: Question] = [:]

    /// The checkpoint's name in the state folder.
    static let checkpointName = "arrived.checkpoint"

    static func checkpointPath(_ container: Container) -> [UInt8] {
        container.statePath(checkpointName)
    }

    /// Arrived, kept, and with nothing decided or asked: an item the watcher is done with.
    func isSettled(_ id: Identity) -> Bool {
        arrived.contains(id) && pending[id] == nil && unanswered[id] == nil
    }

    /// Reads the checkpoint at `path`; returns the seq it holds (0 when there is none or it is unreadable).
    mutating func loadCheckpoint(_ path: [UInt8]) -> UInt64 {
        guard let bytes = try? FileDescriptor(path, [.noFollow]).readToEnd() else { return 0 }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n")
        guard let first = lines.first, first.hasPrefix("seq "), let seq = UInt64(first.dropFirst(4)) else { return 0 }
        for line in lines.dropFirst() {
            let parts = line.split(separator: " ")
            if parts.count == 4, parts[0] == "pending", let disposition = Disposition(rawValue: String(parts[1])),
                let id = Identity(text: parts[2]), let bytes = Data(base64Encoded: String(parts[3])),
                let name = FileName(bytes: bytes)
            {
                arrived.insert(id)
                pending[id] = Decision(name: name, disposition: disposition)
            } else if let id = Identity(text: line) {
                arrived.insert(id)
            }
        }
        return seq
    }

    /// Takes in one record of the log, in order.
    mutating func replay(_ record: EventRecord) {
        guard let id = record.fields["id"].flatMap(Identity.init(text:)) else { return }
        let name = Self.inboxName(record, key: "path")
        let disposition = record.fields["disposition"].flatMap(Disposition.init(rawValue:))
        switch record.kind {
        case .arrived:
            arrived.insert(id)
            if let name, let handler = record.fields["handler"] {
                unanswered[id] = Question(name: name, handler: handler)
            } else if let name, let disposition, disposition != .keep {
                pending[id] = Decision(name: name, disposition: disposition)
            }
        case .handled:
            unanswered[id] = nil
            if let name, let disposition, disposition != .keep {
                pending[id] = Decision(name: name, disposition: disposition)
            }
        case .moved, .deleted:
            arrived.remove(id)
            pending[id] = nil
            unanswered[id] = nil
        default:
            break
        }
    }

    /// Takes the identities logged under an earlier mount of the Inbox's filesystem as the current mount's, where
    /// that filesystem is a network or FUSE one (a new device number at every mount): items kept in the Inbox do
    /// not arrive again after a remount (ARCHITECTURE.md, "Network and FUSE filesystems"). Every identity here is
    /// an Inbox item's, on the Inbox's filesystem. On a local filesystem nothing changes.
    mutating func followRemount(ofInbox folder: CInt) throws(Errno) {
        let device = FileStatus(try system_fstat(folder)).device
        let elsewhere = { (id: Identity) in id.device != device }
        guard
            arrived.contains(where: elsewhere) || pending.keys.contains(where: elsewhere)
                || unanswered.keys.contains(where: elsewhere),
            try Filesystem(of: folder).pollReason != nil
        else { return }
        arrived = Set(arrived.map { $0.onDevice(device) })
        pending = Dictionary(pending.map { ($0.key.onDevice(device), $0.value) }) { _, latest in latest }
        unanswered = Dictionary(unanswered.map { ($0.key.onDevice(device), $0.value) }) { _, latest in latest }
    }

    /// The Inbox name in a record's path field (`Documents/Inbox/<name>`), exact to the byte.
    static func inboxName(_ record: EventRecord, key: String) -> FileName? {
        guard let bytes = record.pathBytes(key), let slash = bytes.lastIndex(of: 0x2F) else { return nil }
        return FileName(bytes: bytes[(slash + 1)...])
    }

    /// The ledger of a container as it stands, for a process other than its watcher; nil when no watcher serves
    /// the container (it holds no checkpoint and no watcher runs), so that nothing will ever handle its items.
    static func current(of container: Container, inbox folder: borrowing FileDescriptor) throws(ContainerError)
        -> ArrivalLedger?
    {
        let path = checkpointPath(container)
        let hasCheckpoint: Bool
        do {
            hasCheckpoint = try fileStatusIfPresent(in: currentDirectory, path) != nil
        } catch {
            throw error.failure("read", path)
        }
        guard hasCheckpoint || WatcherLock.holder(of: container) != nil else { return nil }
        var ledger = ArrivalLedger()
        var since = ledger.loadCheckpoint(path)
        if since > EventLog.maxSeq {
            // Damaged: the watcher sets it aside at its start; until then the whole log says what arrived.
            ledger = ArrivalLedger()
            since = 0
        }
        for record in try EventLog(container: container).records(since: since) { ledger.replay(record) }
        do {
            try ledger.followRemount(ofInbox: folder.rawValue)
        } catch {
            throw error.failure("read", container.path(.inbox))
        }
        return ledger
    }
}
