import AppContainer
import Glibc

/// The one mover (ARCHITECTURE.md, "One mover"): takes one Inbox item, the file decided on, into Documents or
/// out of existence. `inbox move`, the library's move before edit and delete, the watcher's dispositions and
/// recovery all go through it.
///
/// - A file with one link, or a folder: a checked rename (`report 2.pdf` on a clash).
/// - A file with other hard links, a folder holding such a file (renamed whole, it would take that file along, other
///   names and all), or a file when Documents is on another filesystem (EXDEV): a copy under a journal intent
///   (`MoveJournal`), so that a crash at any step is finished or rolled back at the next start.
/// - A folder across filesystems is not copied: the move fails with EXDEV and the folder stays.
package struct Mover {
    let inbox: Inbox
    let inboxFolder: SharedDescriptor
    let documents: SharedDescriptor

    /// Moves `name`, which was `expected` when it was decided on. Returns where it went in Documents, or nil
    /// when another file had taken `name` meanwhile (that file is left in the Inbox). Throws ENOENT when the
    /// item is gone, and every other failure, the item then still in the Inbox.
    ///
    /// A copy runs under `intent`, or under an intent of its own when that is nil; either way the intent the
    /// copy used is returned in `copyIntent`, for the caller to end once the `moved` record is durable.
    func move(_ name: FileName, expected: FileStatus, intent: MoveJournal.Record? = nil) throws(Errno) -> Moved? {
        if expected.kind == .regular, expected.linkCount > 1, try otherLinks(expected) > 0 {
            return try copy(name, expected: expected, intent: intent)
        }
        if expected.kind == .directory, try holdsLinkedFile(name, expected: expected) {
            return try copy(name, expected: expected, intent: intent)
        }
        do {
            // Where rename flags are refused, an item goes through a private name its durable record gives
            // (ARCHITECTURE.md, "Moves without rename flags"): the intent's, or the watcher's `arrived` record's.
            let through = intent?.privateName ?? Self.privateName(inode: expected.inode)
            let moved = try checkedRenameWithStatus(
                name, in: inboxFolder.rawValue, into: documents.rawValue, naming: .documents, expected: expected.fileID,
                through: through)
            return moved.map { Moved(name: $0.name, copyIntent: nil, status: $0.status) }
        } catch .crossDevice where expected.kind == .regular {
            return try copy(name, expected: expected, intent: intent)
        }
    }

    /// Where a move went, and the intent of a copy, still open.
    struct Moved {
        let name: FileName
        let copyIntent: MoveJournal.Record?
        /// For a rename: the file's status read under its new name right after the rename, by the check.
        var status: FileStatus? = nil
    }

    /// Deletes the item `name`, which was `expected` when it was decided on: renamed aside in the Inbox
    /// (`.inbox-delete.<name>`), checked, unlinked. False when another file had taken `name` (that file is put
    /// back); throws ENOENT when it is gone, and any other failure once the item is back under its name.
    func delete(_ name: FileName, expected: FileStatus) throws(Errno) -> Bool {
        let folder = inboxFolder
        let aside: FileName?
        if expected.kind != .directory, RenameFlagSupport.mayRefuse(folder.rawValue) {
            aside = try asideByPlainRename(name, expected: expected)
        } else {
            aside = try checkedRename(
                name, in: folder.rawValue, into: folder.rawValue, as: Self.deletingName(for: name), naming: .inbox,
                expected: expected.fileID)
        }
        guard let aside else { return false }
        do {
            try system_unlinkat(folder.rawValue, aside, removeDirectory: expected.kind == .directory)
        } catch {
            try putBack(aside, from: folder.rawValue, into: folder.rawValue, as: name)
            throw error
        }
        return true
    }

    /// A file's aside where rename flags may be refused (ARCHITECTURE.md, "Moves without rename flags"): a plain
    /// `rename` onto the first aside name free a moment before, never `link` and `unlink` of `name` (a file another
    /// host renamed over `name` between the two would be unlinked), then a fresh look that it holds the item; another
    /// file goes back under `name` (nil). A crash leaves the aside, which the watcher's start puts back.
    private func asideByPlainRename(_ name: FileName, expected: FileStatus) throws(Errno) -> FileName? {
        let folder = inboxFolder.rawValue
        let aside = try ClashNaming.inbox.firstFree(for: Self.deletingName(for: name)) { candidate throws(Errno) in
            // A plain rename replaces what is there: only onto a free name (no one else makes a deletion's aside).
            guard try fileStatusIfPresent(in: folder, candidate) == nil else { throw Errno.fileExists }
            try system_renameat2(folder, name, folder, candidate, [])
        }
        let status: FileStatus
        do {
            status = try fileStatus(in: folder, aside, fresh: true)
        } catch {
            try putBack(aside, from: folder, into: inboxFolder.rawValue, as: name)
            throw error
        }
        guard status.fileID == expected.fileID else {
            try putBack(aside, from: folder, into: inboxFolder.rawValue, as: name)
            return nil
        }
        return aside
    }

    /// The private name of the watcher's move of the file of inode `inode` where rename flags are refused
    /// (ARCHITECTURE.md, "Moves without rename flags"): `.inbox-move.w<inode>`, which the item's `arrived` record,
    /// durable before such a move, gives its recovery (the device is left out: a remount changes it). One watcher
    /// serves a container and moves an item once at a time, and no two files share an inode: no other mover has that
    /// name.
    static func privateName(inode: UInt64) -> FileName { privateMoveName("w\(inode)") }

    /// The name a copy claims its item under: `.inbox-claim.<pid>.<random>`.
    package static let claimPrefix = Array(".inbox-claim.".utf8)

    /// Where a deletion puts an item just before unlinking it: `.inbox-delete.<name>`. Hidden, so the watcher
    /// leaves it alone; one a crash left there goes back under its name at the next start.
    private static let deletingPrefix = Array(".inbox-delete.".utf8)

    /// `.inbox-delete.<name>`, the name cut (at a character) to fit.
    static func deletingName(for name: FileName) -> FileName {
        let room = FileName.maxLength - deletingPrefix.count
        return FileName(bytes: deletingPrefix + FileName.truncated(name.bytes, toAtMost: room)).unsafelyUnwrapped
    }

    /// Puts back the deletions a crash cut short between the rename aside and the unlink, each under its name
    /// (a free one beside it if that is taken), where recovery or a new arrival handles it. Returns the names
    /// that could not be put back, with the failure.
    func restoreInterruptedDeletions() throws(Errno) -> [(FileName, Errno)] {
        var failures: [(FileName, Errno)] = []
        for name in try inboxFolder.descriptor.entries() where name.bytes.starts(with: Self.deletingPrefix) {
            guard let original = FileName(bytes: name.bytes.dropFirst(Self.deletingPrefix.count)) else { continue }
            do {
                // A folder's, cut between the `mkdir` of its aside name and the `rename` onto it: the item still has
                // its name, and the empty placeholder goes.
                if try removeFolderPlaceholder(in: inboxFolder.rawValue, name) { continue }
                try putBack(name, from: inboxFolder.rawValue, into: inboxFolder.rawValue, as: original)
            } catch {
                failures.append((original, error))
            }
        }
        return failures
    }

    /// Gives a moved file's owner back the write bit, unless it has another hard link now (the chmod would reach that
    /// name too; a client's hidden name is none: `otherLinks`). `file`, when given, is the item already open; `status`,
    /// when given, what the checked rename read of it under its new name (the same file: read again, it would say the
    /// same a moment later).
    func restoreOwnerWrite(_ moved: FileName, file: CInt? = nil, status known: FileStatus? = nil) throws(Errno) {
        if let file {
            let status: FileStatus
            if let known { status = known } else { status = try FileStatus(system_fstat(file)) }
            if status.kind == .regular, status.mode & S_IWUSR == 0, try otherLinks(status) == 0 {
                try system_fchmod(file, status.mode | S_IWUSR)
            }
            return
        }
        try Self.restoreOwnerWrite(moved, in: documents.rawValue)
    }

    /// How many names the file `status` has besides one, not counting the hidden names a FUSE or NFS client gives,
    /// in the Inbox, to a name unlinked while the file is open (`.fuse_hidden…`, `.nfs…`: ARCHITECTURE.md, "Network and
    /// FUSE filesystems"): the watcher holds an item open while it moves it. Only for a file of more than one link is
    /// the Inbox's filesystem asked, and read only on NFS or FUSE: elsewhere such a name is a user's hard link, and any
    /// other name (a foreign hard link) counts.
    func otherLinks(_ status: FileStatus) throws(Errno) -> Int {
        var links = Int(status.linkCount) - 1
        guard links > 0 else { return links }
        let type = try system_fstatfsType(inboxFolder.rawValue)
        guard type == Filesystem.fuseType || type == Filesystem.nfsType else { return links }
        for entry in try inboxFolder.descriptor.entries() where entry.isClientLeftover(onFilesystem: type) {
            if try fileStatusIfPresent(in: inboxFolder.rawValue, entry)?.isSameFile(as: status) == true { links -= 1 }
        }
        return links
    }

    /// Gives the owner of `moved` in `documents` the write bit back, opened by name (never through a link), unless it
    /// has another hard link: after a rename that a crash may have cut off from its `fchmod`, too.
    static func restoreOwnerWrite(_ moved: FileName, in documents: CInt) throws(Errno) {
        // A FUSE client may still hold the link count of a `link` the crash cut off from its `unlink` (ARCHITECTURE.md,
        // "Network and FUSE filesystems"): read afresh.
        try system_refreshAttributes(documents, moved)
        let opened = try FileDescriptor(at: documents, moved, [.noFollow, .nonBlocking])
        let status = try opened.fileStatus()
        if status.kind == .regular, status.linkCount == 1 { try opened.restoreOwnerWrite() }
    }

    /// The staging name of the copy of the item claimed as `claim`, where Documents has no unnamed files:
    /// `.inbox-unnamed.` and the claim's tag.
    static func stagingName(for claim: FileName) -> FileName {
        UnnamedFile.stagingName(String(decoding: claim.bytes.dropFirst(claimPrefix.count), as: UTF8.self))
    }

    /// Whether the folder item `name` (`expected`) holds a file of more than one link, read afresh where the Documents'
    /// filesystem refuses rename flags (ARCHITECTURE.md, "Network and FUSE filesystems": a link made on another host
    /// is invisible to a cached count). Throws ENOENT when the folder is gone or replaced.
    private func holdsLinkedFile(_ name: FileName, expected: FileStatus) throws(Errno) -> Bool {
        guard let folder = try FolderWalk.open(name, in: inboxFolder.rawValue, as: expected) else {
            throw Errno.noSuchFile
        }
        let fresh = RenameFlagSupport.isKnownRefusing(documents.rawValue)
        var linked = false
        do throws(ContainerError) {
            try FolderWalk(maxDepth: FolderWalk.removalDepth, sameFilesystem: true).run(
                folder, shown: inbox.itemPath(name), onError: FolderWalk.stop,
                visit: { entry throws(ContainerError) in
                    guard entry.status.kind == .regular else { return entry.status.kind == .directory ? .enter : .next }
                    var links = entry.status.linkCount
                    if fresh, links == 1 {
                        do throws(Errno) {
                            links = try fileStatus(in: entry.parent, entry.name, fresh: true).linkCount
                        } catch {
                            throw error.failure("read", inbox.itemPath(name))
                        }
                    }
                    linked = links > 1
                    return linked ? .stop : .next
                })
        } catch {
            throw error.cause ?? .ioError
        }
        return linked
    }

    /// The staging folder in Documents of the copy of a folder item claimed as `claim`: `.inbox-copy.` and the claim's
    /// tag. Renamed to the copy's name once whole.
    static func folderStagingName(for claim: FileName) -> FileName {
        FileName(bytes: Array(".inbox-copy.".utf8) + claim.bytes.dropFirst(claimPrefix.count)).unsafelyUnwrapped
    }

    /// Removes the staging folder of the copy of the folder item claimed as `claim` (`folderStagingName`), if any.
    static func removeFolderStaging(for claim: FileName, in documents: CInt) throws(Errno) {
        do {
            try remove(folderStagingName(for: claim), in: documents)
        } catch .noSuchFile {}
    }

    /// Removes the staging name a copy under the claim `claim` left in `documents` when its mover died (before or
    /// while the copy was named): the item is the claim, or the named copy.
    static func sweepStaging(for claim: FileName, in documents: CInt) throws(Errno) {
        try UnnamedFile.removeIfAbandoned(stagingName(for: claim), in: documents)
    }

    /// The copy path: claim the item by a checked rename to a staging name (one mover wins, and only the item
    /// decided on), copy it into Documents (a file into an `UnnamedFile`, a folder into a staging folder), name the
    /// copy, then remove the claim, each step noted in the journal intent first.
    private func copy(_ name: FileName, expected: FileStatus, intent: MoveJournal.Record?) throws(Errno) -> Moved? {
        let journal = MoveJournal(container: inbox.container)
        let claim =
            FileName(bytes: Self.claimPrefix + Array("\(getpid()).\(UInt64.random(in: 0...UInt64.max))".utf8)) ?? name
        let record: MoveJournal.Record
        if let intent {
            try journal.note("claim", claim, in: intent)
            record = intent
        } else {
            record = try journal.begin(MoveJournal.Intent(name: name, claim: claim, identity: Identity(expected)))
        }
        let folder = inboxFolder.rawValue
        let claimed: FileName?
        do {
            // A file's claim is its private name where rename flags are refused (ARCHITECTURE.md, "Moves without
            // rename flags"): a plain `rename`, never a `link` and `unlink` of the Inbox name.
            claimed = try checkedRename(
                name, in: inboxFolder.rawValue, into: folder, as: claim, naming: .inbox, expected: expected.fileID,
                through: expected.kind == .directory ? nil : claim)
        } catch {
            if intent == nil { try journal.end(record) }
            throw error
        }
        guard claimed != nil else {
            if intent == nil { try journal.end(record) }
            return nil
        }
        let linked: FileName
        do throws(Errno) {
            let noting = { (candidate: FileName) throws(Errno) in try journal.note("try", candidate, in: record) }
            if expected.kind == .directory {
                linked = try copyFolder(claim, as: name, trying: noting)
            } else {
                linked = try copyFile(claim, as: name, trying: noting)
            }
            do throws(Errno) {
                try journal.note("linked", linked, in: record)
                try documents.sync()
            } catch {
                try Self.remove(linked, in: documents.rawValue)
                throw error
            }
        } catch {
            // Undo: the copy goes, the claim gets its name back (or a free one): the item stays in the Inbox. If
            // the undo fails too, the intent stays and the next move or watcher start settles it.
            try putBack(claim, from: folder, into: inboxFolder.rawValue, as: name)
            if intent == nil { try journal.end(record) }
            throw error
        }
        // The copy is named and durable: from here on it is the item. Should removing the claim fail, the
        // intent stays, and recovery finishes the move.
        try Self.remove(claim, in: folder)
        try inboxFolder.sync()
        return Moved(name: linked, copyIntent: record)
    }

    /// Copies the claimed file `claim` into an `UnnamedFile` in Documents and names it after `name` (a clash name
    /// beside it), each name noted (`trying`) before it is tried; on a failure, the copy goes.
    private func copyFile(_ claim: FileName, as name: FileName, trying: (FileName) throws(Errno) -> Void)
        throws(Errno) -> FileName
    {
        let source = try FileDescriptor(at: inboxFolder.rawValue, claim, [.noFollow, .nonBlocking])
        let status = try source.fileStatus()
        // Staged, where it must be, under a name recovery finds from the claim (`sweepStaging`).
        let copy = try UnnamedFile(
            in: documents.rawValue, .writeOnly, mode: status.mode | S_IWUSR, staging: Self.stagingName(for: claim))
        do throws(Errno) {
            try copy.descriptor.copyFile(from: source, status: status)
            return try ClashNaming.documents.firstFree(for: name) { candidate throws(Errno) in
                try trying(candidate)
                try copy.name(candidate)
            }
        } catch {
            try copy.discard()
            throw error
        }
    }

    /// Copies the claimed folder `claim` into a staging folder in Documents (`folderStagingName`, the tree copy), then
    /// renames it after `name` (a clash name beside it), each name noted (`trying`) before it is tried; on a failure,
    /// the staging folder goes.
    private func copyFolder(_ claim: FileName, as name: FileName, trying: (FileName) throws(Errno) -> Void)
        throws(Errno) -> FileName
    {
        let source = try FileDescriptor(at: inboxFolder.rawValue, claim, [.directory, .noFollow])
        let status = try source.fileStatus()
        let staging = Self.folderStagingName(for: claim)
        try system_mkdirat(documents.rawValue, staging, mode: S_IRWXU)
        do throws(Errno) {
            let target = try FileDescriptor(at: documents.rawValue, staging, [.directory, .noFollow])
            do {
                try TreeCopy(mode: .item, shown: inbox.itemPath(claim)).copy(source, into: target)
            } catch {
                throw error.cause ?? .ioError
            }
            try system_fchmod(target.rawValue, status.mode & 0o7777 | S_IRWXU)
            try system_syncfs(target.rawValue)
            return try ClashNaming.documents.firstFree(for: name) { candidate throws(Errno) in
                try trying(candidate)
                try renameNoReplace(documents.rawValue, staging, documents.rawValue, candidate)
            }
        } catch {
            try Self.removeFolderStaging(for: claim, in: documents.rawValue)
            throw error
        }
    }

    /// Removes `name` from `folder`, a folder with all it holds (`FolderWalk.remove`).
    static func remove(_ name: FileName, in folder: CInt) throws(Errno) {
        do {
            try FolderWalk.remove(name, in: folder, shown: name.string)
        } catch {
            throw error.cause ?? .ioError
        }
    }
}

extension EncodedEvents {
    /// The one `moved` record (ARCHITECTURE.md, "The log never lies"): from, to, reason and the item's identity
    /// (unknown only for an intent written before intents carried it).
    mutating func appendMoved(
        from name: FileName, to moved: FileName, reason: String, identity: Identity?, inbox: [UInt8],
        documents: [UInt8]
    ) {
        begin(.moved)
        field("from", folder: inbox, name)
        field("to", folder: documents, moved)
        field("reason", reason)
        if let identity { field("id", identity: identity) }
        end()
    }
}
