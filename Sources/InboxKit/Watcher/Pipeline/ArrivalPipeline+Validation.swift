import AppContainer
import Glibc

extension ArrivalPipeline {
    /// Validates one name (ARCHITECTURE.md, "How an arrival flows"): a regular file is opened read-only, made private
    /// if it has other hard links, sealed 0444 and inspected; a link, FIFO, socket or device node is removed without
    /// being opened or followed and logged `rejected`. Nil for names that are gone, already handled (in `arrived`, or
    /// in `skipping`: a batch still being applied), still being written (looked at again soon), or rejected; throws
    /// when the item cannot be arrived (it stays).
    func prepare(_ name: FileName, arrived: Set<Identity>, skipping: Set<FileID>, rejections: inout [Event])
        throws(ContainerError) -> Prepared?
    {
        for _ in 0..<3 {
            let seen: FileStatus
            do {
                guard let present = try fileStatusIfPresent(in: inboxFolder.rawValue, name) else { return nil }
                seen = present
            } catch {
                throw error.failure("read", inbox.itemPath(name))
            }
            switch seen.kind {
            case .regular:
                break
            case .directory:
                return try prepareFolder(name, seen, arrived: arrived, skipping: skipping)
            default:
                if let rejection = try reject(name, seen.kind) { rejections.append(rejection) }
                return nil
            }
            if !arrived.isEmpty && arrived.contains(Identity(seen)) { return nil }
            // Checked before the open: a file that batch may be moving is never sealed again after its move.
            if !skipping.isEmpty && skipping.contains(seen.fileID) { return nil }
            let file: SharedDescriptor
            do {
                file = SharedDescriptor(
                    try FileDescriptor(at: inboxFolder.rawValue, name, [.noFollow, .nonBlocking]))
            } catch .noSuchFile, .tooManySymbolicLinks {
                continue  // replaced between the two looks: look again
            } catch {
                throw error.failure("open", inbox.itemPath(name))
            }
            let status: FileStatus
            do {
                // Fresh: a FUSE or NFS client may still hold the link count of before another name was linked
                // (ARCHITECTURE.md, "Network and FUSE filesystems"), and a seal must never reach a foreign name.
                status = try file.descriptor.freshFileStatus()
            } catch {
                throw error.failure("read", inbox.itemPath(name))
            }
            guard status.isSameFile(as: seen), status.kind == .regular else { continue }
            if Self.mayBeUnderCreation(status) {
                busy.schedule(name, ())
                return nil
            }
            return try whenNotBeingWritten(name, file) { () throws(ContainerError) in
                status.linkCount > 1
                    ? try makePrivate(name, file: file, status: status) : try seal(name, file: file, status: status)
            }
        }
        return nil
    }

    /// An empty file made less than a second ago may be one whose creator's `open` has not finished: its
    /// `IN_CREATE` comes before the creator holds it open for writing, so no lease can tell yet. It is looked at
    /// again shortly; a file that stays empty arrives after that second.
    static func mayBeUnderCreation(_ status: FileStatus, now: Timestamp = .now()) -> Bool {
        guard status.size == 0 else { return false }
        let age =
            (now.seconds - status.modified.seconds) * 1_000_000_000 + now.nanoseconds - status.modified.nanoseconds
        return age < 1_000_000_000
    }

    /// Runs `body` under a read lease on `file`, so that a writer that opens it meanwhile is seen: when one has
    /// it open for writing, before or during `body`, the name is looked at again soon and nil returned (its
    /// close may also bring it back). This also covers a file whose creator's open had not yet finished
    /// when its `IN_CREATE` was read. Where leases are unavailable, `body` runs unguarded.
    private func whenNotBeingWritten(
        _ name: FileName, _ file: SharedDescriptor, _ body: () throws(ContainerError) -> Prepared?
    ) throws(ContainerError) -> Prepared? {
        let leased = system_takeReadLease(file.rawValue)
        if leased == false {
            busy.schedule(name, ())
            return nil
        }
        // A lease that fails to be let go here goes with the file's close, once its batch is done: a writer that
        // waits for it waits until then, and nothing is lost.
        defer { if leased == true { try? system_releaseLease(file.rawValue) } }
        let prepared = try body()
        guard leased == true else { return prepared }
        let held: Bool
        do {
            held = try system_readLeaseHeld(file.rawValue)
        } catch {
            throw error.failure("see whether a writer opened", inbox.itemPath(name))
        }
        if !held {
            busy.schedule(name, ())
            return nil
        }
        return prepared
    }

    /// A folder dropped into the Inbox arrives as one item of type `folder`, its size the bytes of the regular
    /// files inside (links never followed). It is not sealed; a move takes it whole into Documents.
    private func prepareFolder(_ name: FileName, _ seen: FileStatus, arrived: Set<Identity>, skipping: Set<FileID>)
        throws(ContainerError) -> Prepared?
    {
        guard !arrived.contains(Identity(seen)), !skipping.contains(seen.fileID) else { return nil }
        let folder: SharedDescriptor
        do {
            folder = SharedDescriptor(try FileDescriptor(at: inboxFolder.rawValue, name, [.directory, .noFollow]))
        } catch .noSuchFile, .notDirectory, .tooManySymbolicLinks {
            return nil  // replaced meanwhile: its own event brings the new one
        } catch {
            throw error.failure("open", inbox.itemPath(name))
        }
        guard let status = try? folder.descriptor.fileStatus(), status.isSameFile(as: seen) else { return nil }
        let size = (try? folder.descriptor.regularFileBytes()) ?? 0
        let inspection = Inspection(sha256: "", type: "folder", mime: "inode/directory")
        return Prepared(name: name, file: folder, status: status, inspection: inspection, size: size)
    }

    /// Makes the file read-only (0444) and inspects it. A chmod changes nothing else `FileStatus` holds.
    private func seal(_ name: FileName, file: SharedDescriptor, status: FileStatus) throws(ContainerError)
        -> Prepared
    {
        var status = status
        do {
            if status.mode != 0o444 {
                try system_fchmod(file.rawValue, 0o444)
                status = status.withMode(0o444)
            }
        } catch {
            throw error.failure("seal", inbox.itemPath(name))
        }
        let inspection = try InspectorShelf.shared.inspect(file.rawValue, size: status.size)
        return Prepared(name: name, file: file, status: status, inspection: inspection)
    }

    /// The intent of a private copy's exchange made in two steps, in the Inbox (a dot-name: never an arrival).
    static let exchangeIntent = FileName(".inbox-exchange").unsafelyUnwrapped

    /// Replaces a file that shares its inode with another (a hard link) by a private copy, so that sealing
    /// and moving never reach the other name. The swap is atomic (`RENAME_EXCHANGE`), or on a filesystem that
    /// refuses it a journaled two-step rename (`exchange`; ARCHITECTURE.md, "Network and FUSE filesystems"); if
    /// another file took the name meanwhile, that file is put back under a free name, never lost.
    private func makePrivate(_ name: FileName, file: SharedDescriptor, status: FileStatus)
        throws(ContainerError) -> Prepared?
    {
        let staging = Inbox.stagingName()
        let copied: FileStatus?
        do {
            copied = try swapInPrivateCopy(name, of: file, status: status, staging: staging)
        } catch {
            throw error.failure("make a private copy of", inbox.itemPath(name))
        }
        // Handlers get the item opened read-only, as every other arrival.
        guard let copied,
            let reopened = try? SharedDescriptor(
                FileDescriptor(at: inboxFolder.rawValue, name, [.noFollow, .nonBlocking])),
            (try? reopened.descriptor.fileStatus())?.isSameFile(as: copied) == true
        else { return nil }
        return try seal(name, file: reopened, status: copied)
    }

    /// Copies the file into an `UnnamedFile`, names it `staging`, and exchanges it with `name`; returns the copy's
    /// status, nil when `name` vanished meanwhile. Every failure leaves the item as it was or the private copy in
    /// its place; an unused copy left at `staging` is a copy only, swept with abandoned staging files.
    private func swapInPrivateCopy(_ name: FileName, of file: SharedDescriptor, status: FileStatus, staging: FileName)
        throws(Errno) -> FileStatus?
    {
        let folder = inboxFolder.rawValue
        let copied: FileStatus
        do {
            // Closed before the exchange: a FUSE client keeps a name unlinked while its file is open as a second,
            // hidden name, and the copy must count one link.
            let copy = try UnnamedFile(in: folder, .readWrite, mode: 0o444)
            do throws(Errno) {
                try copy.descriptor.copyFile(from: file.descriptor, status: status)
                try copy.name(staging, unique: true)
            } catch {
                try copy.discard()
                throw error
            }
            do throws(Errno) {
                copied = try copy.descriptor.fileStatus()
            } catch {
                try system_unlinkat(folder, staging)  // our copy, not swapped in
                throw error
            }
        }
        do {
            try exchange(folder, staging, folder, name, intent: Self.exchangeIntent, naming: .inbox)
        } catch {
            // An exchange in two steps whose rollback failed: the next start rolls it back (`recoverInterruptedBatch`).
            if try isExchangePending(folder, intent: Self.exchangeIntent) { throw error }
            try system_unlinkat(folder, staging)  // our copy, not swapped in
            if error == .noSuchFile { return nil }
            throw error
        }
        // `staging` now names what was at `name`: the shared inode (its other names keep it), unless another
        // file took the name meanwhile, which goes back beside it.
        let old = try fileStatusIfPresent(in: folder, staging)
        if let old, !old.isSameFile(as: status) {
            try putBack(staging, from: folder, into: inboxFolder.rawValue, as: name)
        } else if old != nil {
            try system_unlinkat(folder, staging)
        }
        try inboxFolder.sync()
        return copied
    }

    /// Removes a name that is not a regular file, the entry itself and never its target.
    private func reject(_ name: FileName, _ kind: FileKind) throws(ContainerError) -> Event? {
        let reason: String
        switch kind {
        case .symbolicLink: reason = "symbolic link"
        case .fifo: reason = "FIFO"
        case .socket: reason = "socket"
        case .characterDevice, .blockDevice: reason = "device node"
        default: reason = "not a regular file"
        }
        do {
            try system_unlinkat(inboxFolder.rawValue, name)
        } catch .noSuchFile {
            return nil
        } catch {
            throw error.failure("remove", inbox.itemPath(name))
        }
        return Event(.rejected, ["path": .path(inbox.loggedPath(.inbox, name)), "reason": .string(reason)])
    }
}
