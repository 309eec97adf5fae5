import AppContainer
import Foundation
import Glibc

extension Inbox {
    /// Moves the Inbox item `name` into Documents (DESIGN §2) and returns the writable document.
    ///
    /// A rename where it can (`renameat2(RENAME_NOREPLACE)`, `report 2.pdf` on a clash); a copy under a
    /// journal intent where it must (a file with other hard links, or Documents on another filesystem).
    /// The owner's write bit is restored, both folders are fsynced, and `moved` is logged durably.
    /// When several processes move the same item, one wins and the others fail with exit status 66.
    public func moveToDocuments(_ name: FileName, reason: String) throws(ContainerError) -> Document {
        guard !name.isHidden else {
            throw ContainerError(.refused, "'\(itemPath(name))' is a staging name, not an Inbox item")
        }
        recoverInterruptedMoves()
        try container.checkWritable(components: container.components(of: .documents))
        let inboxFolder = try container.openFolder(.inbox)
        let documents = try container.openFolder(.documents)
        let status: FileStatus
        do {
            status = try fileStatus(in: inboxFolder.rawValue, name)
        } catch .noSuchFile {
            throw ContainerError(.noSuchItem, "no item '\(name)' in the Inbox '\(container.path(.inbox))'")
        } catch {
            throw error.failure("read", itemPath(name))
        }
        try refuseUnlessRegular(name, status)
        var final: FileName?
        if status.linkCount == 1 {
            do {
                final = try ClashNaming.documents.firstFree(for: name) { candidate throws(Errno) in
                    try system_renameat2(inboxFolder.rawValue, name, documents.rawValue, candidate, .noReplace)
                }
            } catch .noSuchFile {
                throw movedByOther(name)
            } catch .crossDevice {
                final = nil
            } catch {
                throw error.failure("move", itemPath(name))
            }
        }
        let moved: FileName
        if let final {
            moved = final
        } else {
            moved = try copyIntoDocuments(name, inboxFolder: inboxFolder, documents: documents)
        }
        let document = Document(path: Array(container.path(.documents).utf8) + [0x2F] + moved.bytes, name: moved)
        do {
            let file = try FileDescriptor(at: documents.rawValue, moved, [.noFollow, .nonBlocking])
            // A hard link made since the check would let the chmod reach another name: leave it read-only.
            if try file.fileStatus().linkCount == 1 { try file.restoreOwnerWrite() }
            try documents.sync()
            try inboxFolder.sync()
        } catch {
            throw error.failure("finish moving", String(decoding: document.path, as: UTF8.self))
        }
        try log.append(
            Event(
                .moved,
                [
                    "from": .path(loggedPath(.inbox, name)), "to": .path(loggedPath(.documents, moved)),
                    "reason": .string(reason),
                ]),
            durable: true)
        return document
    }

    /// Symbolic links, folders and special files are never moved, opened or followed.
    private func refuseUnlessRegular(_ name: FileName, _ status: FileStatus) throws(ContainerError) {
        let what: String
        switch status.kind {
        case .regular: return
        case .symbolicLink: what = "a symbolic link, which is never followed"
        case .directory: what = "a folder, not a file"
        default: what = "not a regular file"
        }
        throw ContainerError(.refused, "'\(itemPath(name))' is \(what); not moved")
    }

    private func movedByOther(_ name: FileName) -> ContainerError {
        ContainerError(.noSuchItem, "'\(itemPath(name))' is gone: another process moved or deleted it")
    }

    /// The copy path: claim the item by renaming it to a staging name (one mover wins), copy it into an
    /// unnamed file in Documents, name that file, then remove the claim, all under a journal intent.
    private func copyIntoDocuments(
        _ name: FileName, inboxFolder: borrowing FileDescriptor, documents: borrowing FileDescriptor
    ) throws(ContainerError) -> FileName {
        let journal = MoveJournal(container: container)
        let claim = FileName(".inbox-claim.\(getpid()).\(UInt64.random(in: 0...UInt64.max))") ?? name
        let record: MoveJournal.Record
        do {
            record = try journal.begin(MoveJournal.Intent(name: name, claim: claim))
        } catch {
            throw error.failure("write the move journal in", journal.directory)
        }
        do {
            try system_renameat2(inboxFolder.rawValue, name, inboxFolder.rawValue, claim, .noReplace)
        } catch {
            journal.end(record)
            if error == .noSuchFile { throw movedByOther(name) }
            throw error.failure("move", itemPath(name))
        }
        var linked: FileName?
        var claimRemoved = false
        do {
            let source = try FileDescriptor(at: inboxFolder.rawValue, claim, [.noFollow, .nonBlocking])
            let status = try source.fileStatus()
            let copy = try FileDescriptor(
                at: documents.rawValue, ".", [.temporaryFile, .writeOnly], mode: status.mode | S_IWUSR)
            try copy.copyFile(from: source, status: status)
            linked = try ClashNaming.documents.firstFree(for: name) { candidate throws(Errno) in
                try journal.note("try", candidate, in: record)
                try system_linkOpenFile(copy.rawValue, documents.rawValue, candidate)
            }
            if let linked { try journal.note("linked", linked, in: record) }
            try documents.sync()
            try system_unlinkat(inboxFolder.rawValue, claim)
            claimRemoved = true
            try inboxFolder.sync()
        } catch {
            // Once the claim is gone the copy is the item: keep it, and report the failed sync.
            if claimRemoved {
                journal.end(record)
                throw error.failure("sync", container.path(.inbox))
            }
            // Undo: the copy goes, the claim gets its name back (or a free one): the item stays in the Inbox.
            if let linked { try? system_unlinkat(documents.rawValue, linked) }
            _ = try? ClashNaming.inbox.firstFree(for: name) { candidate throws(Errno) in
                try system_renameat2(inboxFolder.rawValue, claim, inboxFolder.rawValue, candidate, .noReplace)
            }
            journal.end(record)
            throw error.failure("copy into Documents", itemPath(name))
        }
        journal.end(record)
        return linked ?? name
    }
}
