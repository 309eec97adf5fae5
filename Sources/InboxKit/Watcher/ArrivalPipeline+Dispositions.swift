import AppContainer
import Glibc

/// Moves and deletions of Inbox items that touch only the file decided on. Between the look at an item and
/// its disposition another process may rename a different file over its name; a rename or unlink by name
/// would then take that file. So the item is renamed first (into Documents, or aside in the Inbox for a
/// deletion), the name it went to is checked to hold the file decided on (device and inode), and anything
/// else goes back into the Inbox, where it arrives in its own right.
extension ArrivalPipeline {
    /// Where a deletion puts an item just before unlinking it: `.inbox-delete.<name>`. Hidden, so the watcher
    /// leaves it alone; one a crash left there goes back under its name at the next start.
    private static let deletingPrefix = Array(".inbox-delete.".utf8)

    /// Moves a prepared item into Documents and gives its owner back the write bit, through the descriptor it
    /// was prepared with. The name it took, or nil when it is gone or the name held another file.
    func moveToDocuments(_ prepared: Prepared) -> FileName? {
        guard let moved = moveIfSame(prepared.name, prepared.identity) else { return nil }
        if prepared.status.mode & S_IWUSR == 0 {
            try? system_fchmod(prepared.file.rawValue, prepared.status.mode | S_IWUSR)
        }
        return moved
    }

    /// Renames the Inbox item `name` into Documents (`report 2.pdf` on a clash) when it is the file `id`
    /// names; nil when it is gone or another file held the name (that file is put back).
    func moveIfSame(_ name: FileName, _ id: Identity) -> FileName? {
        guard
            let moved = try? ClashNaming.documents.firstFree(
                for: name,
                { candidate throws(Errno) in
                    try system_renameat2(inboxFolder.rawValue, name, documents.rawValue, candidate, .noReplace)
                })
        else { return nil }
        guard let status = try? fileStatus(in: documents.rawValue, moved), id.isSameFile(as: status) else {
            putBack(moved, from: documents.rawValue, as: name)
            return nil
        }
        return moved
    }

    /// Deletes the Inbox item `name` when it is the file `id` names: renamed aside, checked, unlinked. False
    /// when it is gone or another file held the name (that file is put back).
    func deleteIfSame(_ name: FileName, _ id: Identity) -> Bool {
        let folder = inboxFolder.rawValue
        let aside = Self.deletingName(for: name)
        guard (try? system_renameat2(folder, name, folder, aside, .noReplace)) != nil else { return false }
        guard let status = try? fileStatus(in: folder, aside), id.isSameFile(as: status), status.kind != .directory,
            (try? system_unlinkat(folder, aside)) != nil
        else {
            putBack(aside, from: folder, as: name)
            return false
        }
        return true
    }

    /// Deletions a crash cut short between the rename aside and the unlink: each goes back under its name
    /// (a free one beside it if that is taken), where recovery or a new arrival handles it.
    func restoreInterruptedDeletions() {
        guard let names = try? inboxFolder.descriptor.entries() else { return }
        for name in names where name.bytes.starts(with: Self.deletingPrefix) {
            guard let original = FileName(bytes: name.bytes.dropFirst(Self.deletingPrefix.count)) else { continue }
            putBack(name, from: inboxFolder.rawValue, as: original)
        }
    }

    /// Renames `current` in `folder` back into the Inbox as `name`, or the first free name beside it.
    private func putBack(_ current: FileName, from folder: CInt, as name: FileName) {
        _ = try? ClashNaming.inbox.firstFree(
            for: name,
            { candidate throws(Errno) in
                try system_renameat2(folder, current, inboxFolder.rawValue, candidate, .noReplace)
            })
    }

    /// `.inbox-delete.<name>`, the name cut (at a character) to fit.
    static func deletingName(for name: FileName) -> FileName {
        let room = FileName.maxLength - deletingPrefix.count
        return FileName(bytes: deletingPrefix + FileName.truncated(name.bytes, toAtMost: room)).unsafelyUnwrapped
    }
}

extension Identity {
    /// Whether `status` describes this file: the same device and inode.
    func isSameFile(as status: FileStatus) -> Bool {
        status.device == device && status.inode == inode
    }
}
