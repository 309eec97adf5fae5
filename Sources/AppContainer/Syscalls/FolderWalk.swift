import Glibc

/// The one walk of a folder tree (ARCHITECTURE.md, "Walks and removal"): depth first below an open folder, each
/// folder opened relative to its parent with O_NOFOLLOW and checked to be the folder listed, so that no symbolic
/// link is ever followed. What its users need differently is a parameter: how deep it goes, whether it stays on the
/// root's filesystem, whether each folder's names come sorted (else they are read one at a time, in constant
/// memory), and, in `run`, what a failure does. A network or FUSE client's leftover is never visited: `.nfs…` in a
/// folder on NFS, `.fuse_hidden…` in one on FUSE; elsewhere such names are a user's. The filesystem is asked once a
/// walk (`fstatfs`), and again only for a folder on another device than its parent's.
package struct FolderWalk: Sendable {
    /// A folder this many levels below the root is not read: its reading is a failure (`nested too deep`).
    /// Each level holds a descriptor or two, so the bound keeps a deep tree from running out of them.
    package let maxDepth: Int
    /// Whether a folder on another filesystem than the root's (a mount point) is left unentered. It is still
    /// visited; that is no failure.
    package let sameFilesystem: Bool
    /// Whether each folder's names come sorted (read whole first) or as the folder lists them.
    package let sorted: Bool

    /// A walk that goes `maxDepth` folders deep at the most.
    package init(maxDepth: Int, sameFilesystem: Bool, sorted: Bool = false) {
        self.maxDepth = maxDepth
        self.sameFilesystem = sameFilesystem
        self.sorted = sorted
    }

    /// One entry below the root.
    package struct Entry {
        /// The open folder that holds it, for the `*at` calls.
        package let parent: CInt
        /// Its names below the root, its own last.
        package let path: [FileName]
        /// Its status, a symbolic link's own.
        package let status: FileStatus

        /// Its own name.
        package var name: FileName { path[path.count - 1] }
    }

    /// What to do after an entry: go on to the next, go into it (when it is a folder), or end the walk.
    package enum Step {
        case next, enter, stop
    }

    /// The error policy that ends a walk at its first failure: pass it as `onError`.
    package static func stop(_ error: ContainerError) throws(ContainerError) { throw error }

    /// Calls `visit` for every entry below `root` (named `shown` in messages) until it returns `.stop`; `enter` gets
    /// each folder entered, open, before its entries, and `leave` after them. An entry gone or replaced since
    /// its folder was read is passed over. Any other failure below the root, a folder nested deeper than
    /// `maxDepth` among them, goes to `onError`: throwing it ends the walk with it, returning passes over what it
    /// concerns (report and skip). A failure to read `root` itself is thrown. Returns false when stopped.
    @discardableResult
    package func run(
        _ root: borrowing FileDescriptor, shown: String,
        onError: (ContainerError) throws(ContainerError) -> Void,
        visit: (Entry) throws(ContainerError) -> Step,
        enter: (Entry, _ folder: CInt) throws(ContainerError) -> Void = { _, _ in },
        leave: (Entry, _ folder: CInt) throws(ContainerError) -> Void = { _, _ in }
    ) throws(ContainerError) -> Bool {
        let rootDevice: UInt64
        let rootType: Int64
        do {
            rootDevice = try root.fileStatus().device
            rootType = try system_fstatfsType(root.rawValue)
        } catch {
            throw error.failure("read", shown)
        }
        /// The folders on the root's filesystem are the only ones entered, when `sameFilesystem`.
        let device = sameFilesystem ? rootDevice : nil
        /// Where a folder is: its device, and its filesystem's `f_type` (which client's leftovers it holds).
        struct Place {
            var device: UInt64
            var type: Int64
        }
        /// Walks the folder at `path`, on `place`; false once stopped.
        func folder(_ folder: borrowing FileDescriptor, _ path: [FileName], _ place: Place) throws(ContainerError)
            -> Bool
        {
            let fd = folder.rawValue
            var going = true
            var failure: ContainerError?
            do {
                if sorted {
                    for name in try folder.entries().sorted() {
                        do throws(ContainerError) {
                            going = try entry(name, in: fd, path, place)
                        } catch {
                            failure = error
                        }
                        if !going || failure != nil { break }
                    }
                } else {
                    try folder.forEachEntry { name throws(Errno) in
                        do throws(ContainerError) {
                            going = try entry(name, in: fd, path, place)
                        } catch {
                            failure = error
                        }
                        return going && failure == nil
                    }
                }
            } catch {
                let error = error.failure("read the folder", path.isEmpty ? shown : shown + "/" + Tree.text(path))
                if path.isEmpty { throw error }
                try onError(error)
            }
            if let failure { throw failure }
            return going
        }
        /// Visits `name` in the folder `fd` at `path`, on `place`, and goes into it if asked; false once stopped.
        func entry(_ name: FileName, in fd: CInt, _ path: [FileName], _ place: Place) throws(ContainerError) -> Bool {
            guard !name.isClientLeftover(onFilesystem: place.type) else { return true }
            let path = path + [name]
            let status: FileStatus
            do {
                status = try fileStatus(in: fd, name)
            } catch .noSuchFile {
                return true  // gone since the folder was read
            } catch {
                try onError(error.failure("read", shown + "/" + Tree.text(path)))
                return true
            }
            let entry = Entry(parent: fd, path: path, status: status)
            switch try visit(entry) {
            case .stop: return false
            case .next: return true
            case .enter: break
            }
            guard status.kind == .directory, device == nil || status.device == device else { return true }
            let shownEntry = shown + "/" + Tree.text(path)
            guard path.count < maxDepth else {
                try onError(ContainerError(.badData, "'\(shownEntry)' is nested too deep (over \(maxDepth) folders)"))
                return true
            }
            let opened: FileDescriptor?
            do {
                opened = try Self.open(name, in: fd, as: status)
            } catch {
                try onError(error.failure("open the folder", shownEntry))
                return true
            }
            guard let inner = opened else { return true }
            var innerPlace = place
            if status.device != place.device {
                // A mount point: another filesystem, maybe another client's names.
                do {
                    innerPlace = Place(device: status.device, type: try system_fstatfsType(inner.rawValue))
                } catch {
                    try onError(error.failure("read", shownEntry))
                    return true
                }
            }
            try enter(entry, inner.rawValue)
            guard try folder(inner, path, innerPlace) else { return false }
            try leave(entry, inner.rawValue)
            return true
        }
        return try folder(root, [], Place(device: rootDevice, type: rootType))
    }
}

extension FolderWalk {
    /// Removes `name` in `folder` and, for a folder, everything in it (ARCHITECTURE.md, "Walks and removal"),
    /// with the walk: no symbolic link is followed and no other filesystem entered, and each folder gets its owner's
    /// read, write and search bits back first, so that a sealed tree goes too. With `expected`, only while the name
    /// holds that file (nothing is done otherwise). Goes on past a failure and throws the first; what is gone
    /// meanwhile is no failure, but a missing `name` is thrown (its cause `.noSuchFile`). `shown` names `name`.
    package static func remove(_ name: FileName, in fd: CInt, shown: String, expected: FileID? = nil)
        throws(ContainerError)
    {
        let status: FileStatus
        do {
            status = try fileStatus(in: fd, name)
            guard expected.map({ $0 == status.fileID }) ?? true else { return }
            guard status.kind == .directory else { return try system_unlinkat(fd, name) }
        } catch {
            throw error.failure("delete", shown)
        }
        let opened: FileDescriptor?
        do {
            opened = try open(name, in: fd, as: status)
        } catch {
            throw error.failure("delete", shown)
        }
        guard let top = opened else { return }  // gone or replaced since its status was read
        Self.allowRemoval(top.rawValue, status)
        var first: ContainerError?
        let keep = { (error: ContainerError) in first = first ?? error }
        try FolderWalk(maxDepth: FolderWalk.removalDepth, sameFilesystem: true).run(
            top, shown: shown, onError: keep,
            visit: { entry in
                guard entry.status.kind != .directory else { return .enter }
                do throws(Errno) {
                    try system_unlinkat(entry.parent, entry.name)
                } catch .noSuchFile {
                } catch {
                    keep(error.failure("delete", shown + "/" + Tree.text(entry.path)))
                }
                return .next
            },
            enter: { entry, folder in Self.allowRemoval(folder, entry.status) },
            leave: { entry, _ in
                do throws(Errno) {
                    try system_unlinkat(entry.parent, entry.name, removeDirectory: true)
                } catch .noSuchFile {
                } catch {
                    keep(error.failure("delete", shown + "/" + Tree.text(entry.path)))
                }
            })
        if let first { throw first }
        do {
            try system_unlinkat(fd, name, removeDirectory: true)
        } catch {
            throw error.failure("delete", shown)
        }
    }

    /// The folder `name` in `parent`, opened without following a symbolic link; nil when it is gone or no longer
    /// the folder `status` describes (replaced since it was listed).
    package static func open(_ name: FileName, in parent: CInt, as status: FileStatus) throws(Errno)
        -> FileDescriptor?
    {
        let folder: FileDescriptor
        do {
            folder = try FileDescriptor(at: parent, name, [.directory, .noFollow])
        } catch .noSuchFile, .notDirectory, .tooManySymbolicLinks {
            return nil
        }
        guard try folder.fileStatus().isSameFile(as: status) else { return nil }
        return folder
    }

    /// Gives the owner read, write and search on a folder (a read-only tree), so that its entries can go. A failure
    /// shows as the removal's own.
    private static func allowRemoval(_ folder: CInt, _ status: FileStatus) {
        if status.mode & 0o700 != 0o700 { try? system_fchmod(folder, status.mode | 0o700) }
    }

    /// How deep a removal goes: as deep as any walk that made or kept the tree.
    package static let removalDepth = 256
}
