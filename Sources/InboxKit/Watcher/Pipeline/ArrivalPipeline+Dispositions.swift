import AppContainer
import Glibc

/// Moves and deletions of Inbox items, each touching only the file decided on (ARCHITECTURE.md, "Only the file
/// decided on") and none failing in silence ("No silent failure"), both through the one mover. A failure writes
/// an `error` record and a line on stderr, leaves the item where it is and schedules the disposition again.
extension ArrivalPipeline {
    /// A disposition decided on and logged, to apply now or, after a failure, later.
    struct Decided {
        let name: FileName
        let status: FileStatus
        let disposition: Disposition
        /// The item still open from its preparation, if it is.
        var file: SharedDescriptor?
        var identity: Identity { Identity(status) }
        var pending: Pending { Pending(identity: identity, disposition: disposition) }
    }

    /// A disposition that failed, waiting to be tried again: the item is read again then. One whose recovery could
    /// not tell where the item is (`recovering`) is tried again as that recovery: it may be in Documents already.
    struct Pending {
        let identity: Identity
        let disposition: Disposition
        var recovering = false
    }

    var mover: Mover { Mover(inbox: inbox, inboxFolder: inboxFolder, documents: documents) }

    /// What applying a disposition did.
    enum Applied {
        /// Nothing was done: kept, gone already, or replaced by another file (which then arrives itself).
        case stayed
        /// The move or deletion failed: the item stays in the Inbox, and it is scheduled again.
        case failed
        /// Moved into Documents under this name.
        case moved(FileName)
        case deleted

        /// Whether the item left the Inbox.
        var left: Bool {
            switch self {
            case .stayed, .failed: false
            case .moved, .deleted: true
            }
        }
    }

    /// Applies a move or deletion and appends its record (`moved`, `deleted`, or `error`).
    func apply(_ decided: Decided, reason: String, to records: inout EncodedEvents) -> Applied {
        guard decided.disposition != .keep else { return .stayed }
        do {
            switch decided.disposition {
            case .keep:
                return .stayed
            case .delete:
                guard try mover.delete(decided.name, expected: decided.status) else { return .stayed }
                records.appendDeleted(
                    path: loggedInbox + decided.name.bytes, reason: reason, identity: decided.identity)
                failed.remove(decided.name)
                return .deleted
            case .move:
                guard let moved = try mover.move(decided.name, expected: decided.status) else { return .stayed }
                if let intent = moved.copyIntent { group.endWhenDurable(intent) }
                records.appendMoved(
                    from: decided.name, to: moved.name, reason: reason, identity: decided.identity,
                    inbox: loggedInbox, documents: loggedDocuments)
                do {
                    try mover.restoreOwnerWrite(moved.name, file: decided.file?.rawValue, status: moved.status)
                } catch {
                    // Moved all the same: only its write bit is missing.
                    fail(during: "restore the write bit", moved.name, error, folder: loggedDocuments, to: &records)
                }
                failed.remove(decided.name)
                return .moved(moved.name)
            }
        } catch {
            if error == .noSuchFile, !stillThere(decided) {
                failed.remove(decided.name)
                return .stayed
            }
            let during = decided.disposition == .move ? "move" : "delete"
            fail(during: during, decided.name, error, folder: loggedInbox, to: &records)
            failed.schedule(decided.name, decided.pending)
            return .failed
        }
    }

    /// Whether the item decided on is still under its name (a rename into a deleted Documents fails with
    /// ENOENT too); when that cannot be read, it is taken to be there, to be tried again.
    private func stillThere(_ decided: Decided) -> Bool {
        do {
            guard let status = try fileStatusIfPresent(in: inboxFolder.rawValue, decided.name) else { return false }
            return decided.identity.isSameFile(as: status)
        } catch {
            return true
        }
    }

    /// Writes the `error` record and the stderr line of a failure that leaves an item where it was, and keeps
    /// the first such failure for `watch --once`.
    func fail(during: String, _ name: FileName, _ error: Errno, folder: [UInt8], to records: inout EncodedEvents) {
        fail(during: during, name, error.failure(during, inbox.itemPath(name)), folder: folder, to: &records)
    }

    func fail(
        during: String, _ name: FileName, _ failure: ContainerError, folder: [UInt8], to records: inout EncodedEvents
    ) {
        logError(during: during, name, failure, folder: folder, to: &records)
        firstFailure = firstFailure ?? failure
        if failure.code == .cannotCreate, failure.cause == .notSupported { refusal = refusal ?? failure }
    }

    /// Writes the `error` record and the stderr line of a failure (`fail` then keeps it for `watch --once`). Alone
    /// for what `watch --once` does not count: a hook's answer that is not a disposition, whose item is kept as if
    /// answered `keep`.
    func logError(
        during: String, _ name: FileName, _ failure: ContainerError, folder: [UInt8], to records: inout EncodedEvents
    ) {
        records.begin(.error)
        records.field("during", during)
        records.field("path", folder: folder, name)
        records.field("errno", Int64(failure.cause?.rawValue ?? 0))
        records.field("message", failure.message)
        records.end()
        report(failure.message)
    }

    /// Applies the dispositions whose earlier try failed and whose time has come, when the item is still the one
    /// decided on; returns the records.
    func retryFailedDispositions() -> EncodedEvents {
        var records = EncodedEvents()
        for (name, entry) in failed.due() {
            if entry.payload.recovering {
                finish(name, id: entry.payload.identity, entry.payload.disposition, to: &records)
                continue
            }
            let status: FileStatus?
            do {
                // Fresh, as at validation: the mover takes a file of one link for one with no foreign hard link.
                status = try fileStatusIfPresent(in: inboxFolder.rawValue, name, fresh: true)
            } catch {
                fail(during: "read", name, error, folder: loggedInbox, to: &records)
                failed.schedule(name, entry.payload)
                continue
            }
            guard let status, entry.payload.identity == Identity(status) else {
                failed.remove(name)  // gone, or another file now: that one arrives itself
                continue
            }
            let decided = Decided(name: name, status: status, disposition: entry.payload.disposition)
            if apply(decided, reason: "retry", to: &records).left { arrived.remove(decided.identity) }
        }
        return records
    }
}
