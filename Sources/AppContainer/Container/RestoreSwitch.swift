import Glibc

/// The switch that makes a restore all or nothing (ARCHITECTURE.md, "Bundle, backup and setup").
///
/// A restore is extracted into `.inbox-restore` at the container root: on the container's filesystem, outside the
/// places (no cleanup purges it), holding a `Documents` and a `Library` of its own. Once they are whole and synced,
/// `switch` is written in it, naming the two staged folders by device and inode; each is exchanged with the
/// container's (`renameat2(RENAME_EXCHANGE)`, or where the filesystem refuses it a two-step rename journaled in
/// `exchange` in the staging folder, rolled back first when cut short: `exchange`, ARCHITECTURE.md, "Network and
/// FUSE filesystems"); removing `switch` commits. A `switch` found later belongs to a switch
/// cut short: each folder it names that is in place is swapped back, and the container is as it was. What is left
/// in the staging folder, an unfinished extraction or the container's old folders, is then removed. One restore at
/// a time: a restore holds `flock` on the container root, and another waits for it.
package final class RestoreSwitch {
    /// The staging folder, at the container root.
    package static let stagingName = FileName(".inbox-restore").unsafelyUnwrapped
    static let markerName = FileName("switch").unsafelyUnwrapped
    /// The intent of an exchange made in two steps, in the staging folder.
    static let exchangeIntent = FileName("exchange").unsafelyUnwrapped
    /// The folders a restore replaces, each whole.
    static let switched = ["Documents", "Library"].map { FileName($0).unsafelyUnwrapped }

    private let container: Container
    private let root: FileDescriptor

    /// The staging folder's absolute path.
    package var stagingPath: [UInt8] { Self.stagingPath(container) }

    static func stagingPath(_ container: Container) -> [UInt8] { container.rootBytes + [0x2F] + stagingName.bytes }

    /// Whether a restore was cut short in a two-step exchange, which may have moved a folder of the container aside.
    /// A failure to look throws: never taken for "no", which would leave the folder aside.
    static func isCutShortInExchange(_ container: Container) throws(ContainerError) -> Bool {
        let path = stagingPath(container) + [0x2F] + exchangeIntent.bytes
        do {
            return try fileStatusIfPresent(in: currentDirectory, path) != nil
        } catch {
            throw error.failure("look at", path)
        }
    }

    /// Takes the restore lock, waiting for a restore under way to end, and settles what a restore cut short left: a
    /// switch is swapped back, the staging folder removed.
    package init(container: Container) throws(ContainerError) {
        self.container = container
        root = try container.openFolder([])
        _ = try Self.lock(root.rawValue, container, waiting: true)
        if let leftover = try Self.settle(root.rawValue, container) { throw leftover }
    }

    /// Makes the staging folder, empty, and returns it open: the archive's entries create the places' folders,
    /// with their modes and times.
    package func makeStaging() throws(ContainerError) -> FileDescriptor {
        do {
            try system_mkdirat(root.rawValue, Self.stagingName, mode: 0o700)
            return try FileDescriptor(at: root.rawValue, Self.stagingName, [.directory, .noFollow])
        } catch {
            throw discarding(after: error.failure("create", stagingPath))
        }
    }

    /// Makes the folders of the places that the staged tree lacks (Documents, the Inbox, Library and those in it,
    /// the service's state folder), each folder it goes in keeping its times.
    private func completeStaging(_ staging: CInt) throws(Errno) {
        let folders = Place.allCases.filter { $0 != .bundle && $0 != .tmp }.map { $0.relativePath(appName: "") }
        for path in folders + [Container.stateRelativePath] {
            let parts = path.split(separator: "/").map(String.init)
            let above = parts.dropLast().joined(separator: "/")
            let parent = try FileDescriptor(at: staging, above.isEmpty ? "." : above, [.directory, .noFollow])
            let times = try parent.fileStatus()
            do {
                try system_mkdirat(parent.rawValue, parts[parts.count - 1], mode: 0o755)
            } catch .fileExists {
                continue
            }
            try system_futimens(
                parent.rawValue, accessed: times.accessed.timespecValue, modified: times.modified.timespecValue)
        }
    }

    /// Removes the staging folder after `failure`, which it returns, noting a staging folder it could not remove
    /// (the next restore removes it, or says why not).
    package func discarding(after failure: ContainerError) -> ContainerError {
        guard let leftover = Self.removeStaging(root.rawValue, container) else { return failure }
        return ContainerError(failure.code, failure.message + "; " + leftover.message, cause: failure.cause)
    }

    /// Switches the staged folders in: makes the places' folders the archive lacked, syncs the filesystem, writes
    /// `switch`, exchanges Documents and Library, and commits. A failure before the commit swaps back what was
    /// exchanged and removes the staging folder: the container is as it was. After the commit the staging folder
    /// goes and the filesystem is synced. Returns a failure to remove the staging folder: the restore is complete,
    /// and the next command removes it.
    package func switchIn(_ staging: borrowing FileDescriptor) throws(ContainerError) -> ContainerError? {
        var exchanged: [FileName] = []
        var doing = "make the places' folders in"
        do throws(Errno) {
            try completeStaging(staging.rawValue)
            doing = "sync"
            try system_syncfs(staging.rawValue)
            var marker = ""
            for name in Self.switched {
                let id = try fileStatus(in: staging.rawValue, name).fileID
                marker += "\(name) \(id.device) \(id.inode)\n"
            }
            doing = "switch in the restored folders of"
            try staging.replaceFile(Self.markerName, with: Array(marker.utf8), mode: 0o600)
            for name in Self.switched {
                try exchange(staging.rawValue, name, root.rawValue, name, intent: Self.exchangeIntent)
                exchanged.append(name)
            }
            try system_unlinkat(staging.rawValue, Self.markerName)
        } catch {
            throw swapBack(exchanged, staging, after: error.failure(doing, container.root))
        }
        let leftover = Self.removeStaging(root.rawValue, container)
        do {
            try system_syncfs(root.rawValue)
        } catch {
            throw error.failure("sync", container.root)
        }
        return leftover
    }

    /// Undoes the exchanges made, then removes the staging folder; returns `failure`. When an exchange cannot be
    /// undone, `switch` stays for the next command that opens the container.
    private func swapBack(_ exchanged: [FileName], _ staging: borrowing FileDescriptor, after failure: ContainerError)
        -> ContainerError
    {
        let later = "the next command that opens it does"
        do throws(Errno) {
            // An exchange cut short whose rollback failed too: the next command rolls it back, then swaps back.
            if try isExchangePending(staging.rawValue, intent: Self.exchangeIntent) {
                let note = "; cannot undo the exchange cut short yet: \(later)"
                return ContainerError(failure.code, failure.message + note, cause: failure.cause)
            }
            for name in exchanged.reversed() {
                try exchange(staging.rawValue, name, root.rawValue, name, intent: Self.exchangeIntent)
            }
        } catch {
            let note = "; cannot swap the old folders back yet (\(error)): \(later)"
            return ContainerError(failure.code, failure.message + note, cause: failure.cause)
        }
        return discarding(after: failure)
    }

    /// `flock` on the container root; without `waiting`, false while another restore holds it.
    static func lock(_ root: CInt, _ container: Container, waiting: Bool) throws(ContainerError) -> Bool {
        do {
            try system_flock(root, waiting ? LOCK_EX : LOCK_EX | LOCK_NB)
            return true
        } catch .wouldBlock {
            return false
        } catch {
            throw error.failure("lock", container.root)
        }
    }

    /// With the lock held: swaps back a switch cut short, then removes the staging folder. Throws when a switch
    /// cannot be swapped back; returns a failure to remove the staging folder.
    static func settle(_ root: CInt, _ container: Container) throws(ContainerError) -> ContainerError? {
        let failure = { (error: Errno) in error.failure("undo the restore cut short in", container.root) }
        let status: FileStatus?
        do {
            status = try fileStatusIfPresent(in: root, stagingName)
        } catch {
            throw failure(error)
        }
        guard let status else { return nil }
        if status.kind == .directory {
            let staging: FileDescriptor
            do {
                staging = try FileDescriptor(at: root, stagingName, [.directory, .noFollow])
            } catch {
                throw failure(error)
            }
            do {
                try rollBackExchange(staging.rawValue, root, intent: exchangeIntent)
            } catch {
                throw failure(error)
            }
            if let staged = try readMarker(staging.rawValue, container) {
                do {
                    for (name, id) in staged where Self.switched.contains(name) {
                        if try fileStatus(in: root, name).fileID == id {
                            try exchange(staging.rawValue, name, root, name, intent: exchangeIntent)
                        }
                    }
                    try system_fsync(root)
                    try system_unlinkat(staging.rawValue, markerName)
                    try system_fsync(staging.rawValue)
                } catch {
                    throw failure(error)
                }
            }
        }
        return removeStaging(root, container)
    }

    /// The staged folders `switch` names, or nil when there is no `switch`.
    private static func readMarker(_ staging: CInt, _ container: Container) throws(ContainerError) -> [(
        FileName, FileID
    )]? {
        let text: [UInt8]
        do {
            text = try FileDescriptor(at: staging, markerName, [.readOnly, .noFollow, .nonBlocking]).readToEnd(
                limit: 4096)
        } catch .noSuchFile {
            return nil
        } catch {
            throw error.failure("read", stagingPath(container) + [0x2F] + markerName.bytes)
        }
        var staged: [(FileName, FileID)] = []
        for line in text.split(separator: 0x0A) {
            let parts = line.split(separator: 0x20)
            guard parts.count == 3, let name = FileName(bytes: parts[0]),
                let device = UInt64(String(decoding: parts[1], as: UTF8.self)),
                let inode = UInt64(String(decoding: parts[2], as: UTF8.self))
            else {
                let shown = "\(String(decoding: stagingPath(container), as: UTF8.self))/\(markerName)"
                throw ContainerError(
                    .badData, "'\(shown)' is not a restore's switch: the container may be half restored")
            }
            staged.append((name, FileID(device: device, inode: inode)))
        }
        return staged
    }

    /// Removes the staging folder and all it holds, and syncs the root; nil when it is gone.
    private static func removeStaging(_ root: CInt, _ container: Container) -> ContainerError? {
        do throws(ContainerError) {
            try FolderWalk.remove(stagingName, in: root, shown: String(decoding: stagingPath(container), as: UTF8.self))
        } catch {
            if error.cause == .noSuchFile { return nil }
            return error
        }
        do {
            try system_fsync(root)
        } catch {
            return error.failure("remove the staging folder", stagingPath(container))
        }
        return nil
    }
}

extension Container {
    /// Settles a restore cut short (`RestoreSwitch`) unless a restore is under way: `open` and `create` call it, so
    /// that the next command finds the container either restored or as it was.
    func settleInterruptedRestore() throws(ContainerError) {
        let path = RestoreSwitch.stagingPath(self)
        do {
            guard try fileStatusIfPresent(in: currentDirectory, path) != nil else { return }
        } catch {
            throw error.failure("look at", path)
        }
        let folder = try openFolder([])
        guard try RestoreSwitch.lock(folder.rawValue, self, waiting: false) else { return }
        // Once swapped back, a staging folder holds none of the container's files: one that cannot be removed now
        // is left for the next restore, which removes it or says why not.
        _ = try RestoreSwitch.settle(folder.rawValue, self)
    }
}
