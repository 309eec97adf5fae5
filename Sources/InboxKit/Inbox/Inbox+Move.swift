import AppContainer
import FoundationEssentials
import Glibc

extension Inbox {
    /// Moves the Inbox item `name`, a file or a folder (whole), into Documents (ARCHITECTURE.md, "How an arrival
    /// flows") and returns the writable document.
    ///
    /// Through the one mover (`Mover`): a checked rename where it can (`report 2.pdf` on a clash), a copy where
    /// it must (a file with other hard links, or Documents on another filesystem), all under a journal intent
    /// written first, so that a crash at any point is finished at the next start with its `moved` record. The
    /// owner's write bit is restored, both folders are fsynced, and `moved` is logged durably. When several
    /// processes move the same item, one wins and the others fail with exit status 66.
    public func moveToDocuments(_ name: FileName, reason: String) throws(ContainerError) -> Document {
        guard !name.isHidden else {
            throw ContainerError(.refused, "'\(itemPath(name))' is a staging name, not an Inbox item")
        }
        // A log that cannot record what recovery met cannot record this move either: nothing is done.
        if let unlogged = recoverInterruptedMoves().first { throw unlogged }
        try container.checkWritable(components: container.components(of: .documents))
        let mover = Mover(
            inbox: self, inboxFolder: SharedDescriptor(try container.openFolder(.inbox)),
            documents: SharedDescriptor(try container.openFolder(.documents)))
        let status: FileStatus
        do {
            status = FileStatus(try system_statx(mover.inboxFolder.rawValue, name, fresh: true))  // its link count
        } catch .noSuchFile {
            throw ContainerError(.noSuchItem, "no item '\(name)' in the Inbox '\(container.path(.inbox))'")
        } catch {
            throw error.failure("read", itemPath(name))
        }
        try refuseUnlessMovable(name, status)
        let identity = Identity(status)
        let journal = MoveJournal(container: container)
        let seq = try log.lastSeq()
        let intent: MoveJournal.Record
        do {
            intent = try journal.begin(MoveJournal.Intent(name: name, identity: identity, seq: seq))
        } catch {
            throw error.failure("write the move journal in", journal.directory)
        }
        let moved: FileName
        do throws(Errno) {
            guard let done = try mover.move(name, expected: status, intent: intent) else { throw Errno.noSuchFile }
            moved = done.name
        } catch {
            if error == .noSuchFile || error == .staleFile {
                // Another mover had it first, or another file took its name (put back): this one moved nothing, and
                // a leftover intent would only be settled as nothing by the next recovery.
                try? journal.end(intent)
                if error == .noSuchFile { throw movedByOther(name) }
            }
            // The intent stays: the next move or watcher start settles whatever step failed (a copy already
            // named in Documents is finished then, with its `moved` record). Logged too ("No silent failure"):
            // another file that took the name just before (ESTALE), a folder made for it in Documents that
            // something was put into (ENOTEMPTY).
            let failure = error.failure("move", itemPath(name))
            if error == .staleFile || error == .notEmpty {
                _ = try? log.append(errorEvent(during: "move", path: loggedPath(.inbox, name), failure), durable: true)
            }
            throw failure
        }
        let document = Document(path: container.pathBytes(.documents) + [0x2F] + moved.bytes, name: moved)
        do {
            try mover.restoreOwnerWrite(moved)
            try mover.documents.sync()
            try mover.inboxFolder.sync()
        } catch {
            // Moved, but not yet durable: the intent stays, and the next move or start logs it.
            throw error.failure("finish moving", String(decoding: document.path, as: UTF8.self))
        }
        var record = EncodedEvents(reservingCapacity: 1)
        record.appendMoved(
            from: name, to: moved, reason: reason, identity: identity, inbox: loggedFolder(.inbox),
            documents: loggedFolder(.documents))
        _ = try log.append(record, durable: true)
        do {
            try journal.end(intent)
        } catch {
            throw error.failure("end the move journal intent in", journal.directory)
        }
        return document
    }

    /// `Documents/Inbox/`, `Documents/`: how the log names a place's items, without the name.
    func loggedFolder(_ place: Place) -> [UInt8] {
        Array(place.relativePath(appName: container.appName).utf8) + [0x2F]
    }

    /// Files and folders move; symbolic links and special files are never moved, opened or followed.
    private func refuseUnlessMovable(_ name: FileName, _ status: FileStatus) throws(ContainerError) {
        let what: String
        switch status.kind {
        case .regular, .directory: return
        case .symbolicLink: what = "a symbolic link, which is never followed"
        default: what = "not a regular file or folder"
        }
        throw ContainerError(.refused, "'\(itemPath(name))' is \(what); not moved")
    }

    private func movedByOther(_ name: FileName) -> ContainerError {
        ContainerError(.noSuchItem, "'\(itemPath(name))' is gone: another process moved or deleted it")
    }
}
