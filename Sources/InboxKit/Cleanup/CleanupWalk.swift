import AppContainer

// The cleanup's reading of its places, with the walk (ARCHITECTURE.md, "Walks and removal"): never following a
// symbolic link, each folder checked to be the one listed, never leaving the place's filesystem. What cannot be
// read is passed over and told to `passedOver` (a doubt keeps an item: it is counted young, never deleted for it).

extension CleanupWalker {
    /// The walk below a place's folder.
    static let walk = FolderWalk(maxDepth: 128, sameFilesystem: true)
    /// The reading of one folder, entries alone.
    static let list = FolderWalk(maxDepth: 1, sameFilesystem: false)

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
        try Self.list.run(folder, shown: shown, onError: passOver) { entry throws(ContainerError) in
            guard tick() else { return .stop }
            if !CleanupJournal.isAside(entry.name) { try body(entry.name, entry.status) }
            return .next
        }
    }

    /// A file's size, modification time and ctime; for a folder, the bytes of the regular files below it and the
    /// newest of those times of the folder and anything in it. A folder not wholly read is as young as can be.
    func measure(_ name: FileName, _ status: FileStatus, in parent: CInt, _ shown: String) -> Measure {
        var measure = Measure(
            bytes: status.kind == .regular ? status.size : 0, modified: status.modified,
            changed: status.changed)
        guard status.kind == .directory else { return measure }
        var whole = true
        let onError = { (error: ContainerError) in
            whole = false
            self.passOver(error)
        }
        do throws(ContainerError) {
            let opened: FileDescriptor?
            do {
                opened = try FolderWalk.open(name, in: parent, as: status)
            } catch {
                throw error.failure("open the folder", shown + "/" + name.string)
            }
            guard let folder = opened else { return measure }  // replaced since it was listed
            try Self.walk.run(folder, shown: shown + "/" + name.string, onError: onError) { entry in
                guard tick() else { return .stop }
                measure.bytes += entry.status.kind == .regular ? entry.status.size : 0
                measure.modified = max(measure.modified, entry.status.modified)
                measure.changed = max(measure.changed, entry.status.changed)
                return .enter
            }
        } catch {
            onError(error)
        }
        if !whole {
            measure.modified = max(measure.modified, plan.now)
            measure.changed = max(measure.changed, plan.now)
        }
        return measure
    }

    /// Calls `body` with every entry but a folder below `folder`, depth first, and the index in `folders`
    /// of the folder that holds it (0 for `folder` itself; with `register`, each folder entered is added).
    func walkFiles(
        _ folder: borrowing FileDescriptor, _ shown: String, register: Bool,
        _ body: (Int, FileName, FileStatus) -> Void
    ) throws(ContainerError) {
        guard !stopped else { return }
        var within = [0]
        try Self.walk.run(
            folder, shown: shown, onError: passOver,
            visit: { entry in
                guard tick() else { return .stop }
                if CleanupJournal.isAside(entry.name) { return .next }
                guard entry.status.kind == .directory else {
                    body(within[within.count - 1], entry.name, entry.status)
                    return .next
                }
                return .enter
            },
            enter: { entry, _ in
                if register {
                    folders.append((within[within.count - 1], entry.name))
                    within.append(folders.count - 1)
                } else {
                    within.append(0)
                }
            },
            leave: { _, _ in within.removeLast() })
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
