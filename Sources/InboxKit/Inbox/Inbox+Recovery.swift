import AppContainer
import Glibc

extension Inbox {
    /// Finishes or rolls back the copying moves whose process died (see `MoveJournal`), logging `recovered`.
    /// A move whose copy was named in Documents is finished; any other is undone, the item back in the Inbox.
    public func recoverInterruptedMoves() {
        let journal = MoveJournal(container: container)
        journal.forEachAbandoned { intent, record in
            defer { journal.end(record) }
            guard let inboxFolder = try? container.openFolder(.inbox),
                let documents = try? container.openFolder(.documents),
                (try? fileStatus(in: inboxFolder.rawValue, intent.claim)) != nil
            else { return }  // no claim left: the move never began or had finished
            if let done = completedCopy(intent, inboxFolder: inboxFolder, documents: documents) {
                try? system_unlinkat(inboxFolder.rawValue, intent.claim)
                try? inboxFolder.sync()
                _ = try? log.append(
                    Event(
                        .recovered,
                        [
                            "path": .path(loggedPath(.inbox, intent.name)), "to": .path(loggedPath(.documents, done)),
                            "action": .string("finished the move"),
                        ]))
                return
            }
            guard
                let back = try? ClashNaming.inbox.firstFree(
                    for: intent.name,
                    { candidate throws(Errno) in
                        try system_renameat2(
                            inboxFolder.rawValue, intent.claim, inboxFolder.rawValue, candidate, .noReplace)
                    })
            else { return }
            try? inboxFolder.sync()
            _ = try? log.append(
                Event(
                    .recovered,
                    ["path": .path(loggedPath(.inbox, back)), "action": .string("rolled back the move")]))
        }
    }

    /// The name in Documents that holds a complete copy of the claimed item, if the move got that far.
    private func completedCopy(
        _ intent: MoveJournal.Intent, inboxFolder: borrowing FileDescriptor, documents: borrowing FileDescriptor
    ) -> FileName? {
        if let linked = intent.linked {
            // Named in Documents, unless the undo of a failed move had removed it again when the process died.
            return (try? fileStatus(in: documents.rawValue, linked))?.kind == .regular ? linked : nil
        }
        guard let tried = intent.tried.last,
            let original = try? FileDescriptor(at: inboxFolder.rawValue, intent.claim, [.noFollow, .nonBlocking]),
            let copy = try? FileDescriptor(at: documents.rawValue, tried, [.noFollow, .nonBlocking]),
            let originalBytes = try? original.readToEnd(),
            let copyBytes = try? copy.readToEnd(),
            originalBytes == copyBytes
        else { return nil }
        return tried
    }
}
