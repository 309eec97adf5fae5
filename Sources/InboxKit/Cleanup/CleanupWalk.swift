import AppContainer

// The folder walks of the cleanup: each opens folders relative to their parent with O_NOFOLLOW, checks that
// the folder opened is the one listed, and stays on the filesystem it started on.

extension CleanupWalker {
    /// How deep a walk or a removal goes; each level holds two descriptors.
    static let maxDepth = 128

    /// What an entry weighs and how recently it changed.
    struct Measure {
        var bytes: Int64
        var modified: Timestamp
        /// The newest ctime: never the file's own dates, which any program sets (ARCHITECTURE.md, "Age from arrival").
        var changed: Timestamp
    }

    /// Reads `folder` a name at a time, calling `body` with each name and its status (a symbolic link is
    /// described, never followed). Names gone since the folder was read are skipped, as are entries a clean
    /// has set aside (`CleanupJournal`).
    func read(
        _ folder: borrowing FileDescriptor, _ shown: String,
        _ body: (FileName, FileStatus) throws(ContainerError) -> Void
    ) throws(ContainerError) {
        guard !stopped else { return }
        let fd = folder.rawValue
        var failure: ContainerError?
        do {
            try folder.forEachEntry { name throws(Errno) in
                guard tick() else { return false }
                guard !CleanupJournal.isAside(name), let status = try? fileStatus(in: fd, name) else { return true }
                do throws(ContainerError) { try body(name, status) } catch {
                    failure = error
                    return false
                }
                return true
            }
        } catch {
            throw error.failure("read", shown)
        }
        if let failure { throw failure }
    }

    /// A file's size, modification time and ctime; for a folder, the bytes of the regular files below it and the
    /// newest of those times of the folder and anything in it.
    func measure(_ name: FileName, _ status: FileStatus, in parent: CInt) -> Measure {
        var measure = Measure(
            bytes: status.kind == .regular ? status.size : 0, modified: status.modified,
            changed: status.changed)
        if status.kind == .directory, let folder = openFolder(name, status, in: parent) {
            add(folder, device: status.device, depth: 1, to: &measure)
        }
        return measure
    }

    private func add(_ folder: borrowing FileDescriptor, device: UInt64, depth: Int, to measure: inout Measure) {
        let fd = folder.rawValue
        try? folder.forEachEntry { name throws(Errno) in
            guard tick() else { return false }
            guard let status = try? fileStatus(in: fd, name) else { return true }
            measure.bytes += status.kind == .regular ? status.size : 0
            measure.modified = max(measure.modified, status.modified)
            measure.changed = max(measure.changed, status.changed)
            if status.kind == .directory, status.device == device, depth < Self.maxDepth,
                let sub = openFolder(name, status, in: fd)
            {
                add(sub, device: device, depth: depth + 1, to: &measure)
            }
            return true
        }
    }

    /// Calls `body` with every entry but a folder below `folder`, depth first, and the index in `folders`
    /// of the folder that holds it (0 for `folder` itself; with `register`, each folder entered is added).
    func walkFiles(
        _ folder: borrowing FileDescriptor, _ shown: String, device: UInt64, register: Bool, index: Int = 0,
        depth: Int = 0, _ body: (Int, FileName, FileStatus) -> Void
    ) throws(ContainerError) {
        guard !stopped else { return }
        let fd = folder.rawValue
        do {
            try folder.forEachEntry { name throws(Errno) in
                guard tick() else { return false }
                guard !CleanupJournal.isAside(name), let status = try? fileStatus(in: fd, name) else { return true }
                guard status.kind == .directory else {
                    body(index, name, status)
                    return true
                }
                guard status.device == device, depth + 1 < Self.maxDepth, let sub = openFolder(name, status, in: fd)
                else { return true }
                var subIndex = 0
                if register {
                    folders.append((index, name))
                    subIndex = folders.count - 1
                }
                try? walkFiles(
                    sub, shown, device: device, register: register, index: subIndex, depth: depth + 1, body)
                return true
            }
        } catch {
            throw error.failure("read", shown)
        }
    }

    /// Opens the folder `name` in `parent` without following a symbolic link; nil unless it is still the
    /// folder `status` describes.
    private func openFolder(_ name: FileName, _ status: FileStatus, in parent: CInt) -> FileDescriptor? {
        guard let folder = try? FileDescriptor(at: parent, name, [.directory, .noFollow]),
            (try? folder.fileStatus())?.isSameFile(as: status) == true
        else { return nil }
        return folder
    }
}

/// The oldest candidates whose bytes together reach `excess`, from one pass over any number: a heap with the
/// newest on top, dropped while the others still reach `excess`. Only what the limit needs is held.
struct OldestFirst {
    struct Candidate {
        let time: Timestamp
        let bytes: Int64
        /// The index of the candidate's folder, for a walk of several.
        var folder = 0
        let name: FileName
        let status: FileStatus
    }

    let excess: Int64
    private var heap: [Candidate] = []
    private var total: Int64 = 0

    init(excess: Int64) {
        self.excess = excess
    }

    /// A later time, or the same time and a later place in the walk.
    static func isNewer(_ lhs: Candidate, _ rhs: Candidate) -> Bool {
        if lhs.time != rhs.time { return lhs.time > rhs.time }
        if lhs.folder != rhs.folder { return lhs.folder > rhs.folder }
        return rhs.name < lhs.name
    }

    mutating func add(_ candidate: Candidate) {
        heap.append(candidate)
        total += candidate.bytes
        siftUp(heap.count - 1)
        while let top = heap.first, total - top.bytes >= excess {
            removeTop()
            total -= top.bytes
        }
    }

    /// The candidates kept, oldest first.
    func sorted() -> [Candidate] {
        heap.sorted { Self.isNewer($1, $0) }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard Self.isNewer(heap[child], heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func removeTop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            var newest = parent
            for child in [2 * parent + 1, 2 * parent + 2] where child < heap.count {
                if Self.isNewer(heap[child], heap[newest]) { newest = child }
            }
            if newest == parent { return }
            heap.swapAt(parent, newest)
            parent = newest
        }
    }
}

extension FileDescriptor {
    /// Deletes everything in this folder, depth first, with `unlinkat` relative to each folder: a symbolic link
    /// is deleted itself, never followed, and a folder on another device than `device` is not entered (its
    /// removal fails). Goes on past a failure and throws the first.
    func removeContents(device: UInt64, depth: Int = 0) throws(Errno) {
        let fd = rawValue
        var firstError: Errno?
        try forEachEntry { name throws(Errno) in
            do throws(Errno) {
                let status = try AppContainer.fileStatus(in: fd, name)
                if status.kind == .directory {
                    if status.device == device, depth + 1 < CleanupWalker.maxDepth {
                        let folder = try FileDescriptor(at: fd, name, [.directory, .noFollow])
                        guard try folder.fileStatus().isSameFile(as: status) else { throw Errno.noSuchFile }
                        folder.allowRemoval(status)
                        try folder.removeContents(device: device, depth: depth + 1)
                    }
                    try system_unlinkat(fd, name, removeDirectory: true)
                } else {
                    try system_unlinkat(fd, name)
                }
            } catch .noSuchFile {
                // Gone (or replaced) since the folder was read.
            } catch {
                firstError = firstError ?? error
            }
            return true
        }
        if let firstError { throw firstError }
    }

    /// Gives the owner read, write and search on this folder (a read-only tree), so its entries can go.
    func allowRemoval(_ status: FileStatus) {
        if status.mode & 0o700 != 0o700 { try? system_fchmod(rawValue, status.mode | 0o700) }
    }
}
