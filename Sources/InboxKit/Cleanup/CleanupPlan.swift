import AppContainer

/// One deletion the cleanup policy asks for.
package struct CleanupEntry: Sendable, Equatable {
    /// Where it is: `.inbox`, `.tmp` or `.caches`.
    package let place: Place
    /// Its names below the place's folder: one for an Inbox item or a tmp entry, more for a file deep in Caches.
    package let components: [FileName]
    /// Why it goes: `older than 30 days`, `inbox over 1073741824 bytes`, `tmp: app not running`, `caches over …`.
    package let reason: String
    /// What deleting it frees: a file's size, or the bytes of the regular files below a folder.
    package let bytes: Int64
    /// The device and inode when planned: the name is deleted only while it still holds this file.
    package let device: UInt64
    /// The inode when planned (see `device`).
    package let inode: UInt64

    /// An entry to delete: `components` below the folder of `place`, with its reason, size and identity when planned.
    package init(place: Place, components: [FileName], reason: String, bytes: Int64, device: UInt64, inode: UInt64) {
        self.place = place
        self.components = components
        self.reason = reason
        self.bytes = bytes
        self.device = device
        self.inode = inode
    }

    /// The path below the container root, as the event log names it: `tmp/upload.part`.
    package func relativePath(appName: String) -> [UInt8] {
        var path = Array(place.relativePath(appName: appName).utf8)
        for component in components { path += [0x2F] + component.bytes }
        return path
    }
}

/// The cleanup policy of ARCHITECTURE.md, "Cleanup" applied to one container at one moment: which entries of the Inbox,
/// tmp and Library/Caches go, and why.
///
/// Entries are produced as the folders are read, never all held at once: only the two size limits need an
/// order, and for them a first pass sums the bytes and a second keeps just the oldest entries the limit
/// needs (the Inbox's also reads the log once for every item's arrival: ARCHITECTURE.md, "Age from arrival").
/// Walks never follow a symbolic link nor leave the place's filesystem. On an unchanged container a
/// dry run and a real run produce the same entries in the same order. Nothing else is ever read or deleted:
/// not Documents outside the Inbox, Application Support, Preferences, nor the bundle.
package struct CleanupPlan: Sendable {
    /// The container cleaned.
    package let container: Container
    /// The limits applied: the container's preferences, overridden by flags.
    package let policy: Preferences
    /// Whether a watcher holds the container (the app "is running"): tmp then loses only its old entries.
    package let appIsRunning: Bool
    /// The moment ages are measured from.
    package let now: Timestamp

    /// A plan for `container`; `appIsRunning` nil asks whether a watcher holds the container's lock.
    package init(container: Container, policy: Preferences, appIsRunning: Bool? = nil, now: Timestamp = .now()) {
        self.container = container
        self.policy = policy
        self.appIsRunning = appIsRunning ?? (WatcherLock.holder(of: container) != nil)
        self.now = now
    }

    /// Calls `body` with each entry to delete, in this order: Inbox items that arrived more than `inboxMaxAge` ago;
    /// then, oldest arrival first, the others while the Inbox holds more than `inboxMaxBytes`; tmp entries older
    /// than `tmpMaxAge` (all of them when the app is not running); then the least recently used files of Caches
    /// while it holds more than `cachesMaxBytes`. A missing place is skipped. `body` may delete each entry.
    ///
    /// `progress` hears how many entries have been checked, after each; `shouldStop` is asked as often and ends the walk early. `passedOver`
    /// hears of each entry or folder that could not be read: it is kept, and what it holds is never deleted for it.
    package func forEachEntry(
        progress: @escaping (Int) -> Void = { _ in }, shouldStop: @escaping () -> Bool = { false },
        passedOver: @escaping (ContainerError) -> Void = { _ in },
        _ body: (CleanupEntry) throws(ContainerError) -> Void
    ) throws(ContainerError) {
        let walker = CleanupWalker(plan: self, progress: progress, shouldStop: shouldStop, passedOver: passedOver)
        try walker.inbox(body)
        try walker.tmp(body)
        try walker.caches(body)
    }

    /// Every entry, in order. For small containers and tests; a large clean streams with `forEachEntry`.
    package func entries() throws(ContainerError) -> [CleanupEntry] {
        var entries: [CleanupEntry] = []
        try forEachEntry { entries.append($0) }
        return entries
    }

    /// Whether `time` lies more than `maxAge` seconds before `now`, to the nanosecond.
    func isOlder(_ time: Timestamp, than maxAge: Int64) -> Bool {
        time.isMore(than: maxAge, secondsBefore: now)
    }
}

/// One walk of a plan: the place folders read in turn, each entry counted and checked against `shouldStop`.
final class CleanupWalker {
    let plan: CleanupPlan
    let progress: (Int) -> Void
    private var checked = 0
    let shouldStop: () -> Bool
    private(set) var stopped = false
    /// The folders of Caches seen by the second pass, as (parent index, name); index 0 is Caches itself.
    var folders: [(parent: Int, name: FileName?)] = []

    /// Told of what could not be read (see `CleanupPlan.forEachEntry`).
    let passedOver: (ContainerError) -> Void

    init(
        plan: CleanupPlan, progress: @escaping (Int) -> Void, shouldStop: @escaping () -> Bool,
        passedOver: @escaping (ContainerError) -> Void
    ) {
        self.plan = plan
        self.progress = progress
        self.shouldStop = shouldStop
        self.passedOver = passedOver
    }

    /// The walks' error policy: report and skip.
    func passOver(_ error: ContainerError) {
        passedOver(error)
    }

    /// Counts one entry checked; false once the walk should end.
    func tick() -> Bool {
        checked += 1
        progress(checked)
        if !stopped && shouldStop() { stopped = true }
        return !stopped
    }

    /// Opens a place's folder (refusing a symbolic link at any step); nil when it does not exist.
    func open(_ place: Place) throws(ContainerError) -> FileDescriptor? {
        do {
            return try plan.container.openFolder(place)
        } catch {
            if error.cause == .noSuchFile { return nil }
            throw error
        }
    }

    /// Old Inbox items, then the oldest of the rest while the Inbox is over its limit, by their arrival
    /// (ARCHITECTURE.md, "Age from arrival"): an item whose ctime is recent is young without a look at the log;
    /// the others (all of them where ctime is faked) are decided a batch at a time, after one pass over the log for
    /// their records. Staging names (a leading `.`) are delivery's and the mover's, never items. Where a watcher
    /// serves the container, only the items it is done with count and go (ARCHITECTURE.md, "Settled before
    /// cleaned"): not one that has yet to arrive, nor one whose move or deletion is decided, nor one whose handler
    /// has not answered.
    func inbox(_ body: (CleanupEntry) throws(ContainerError) -> Void) throws(ContainerError) {
        guard let folder = try open(.inbox) else { return }
        let policy = plan.policy
        let shown = plan.container.path(.inbox)
        let fd = folder.rawValue
        let ledger = try ArrivalLedger.current(of: plan.container, inbox: folder)
        let clock = try ArrivalClock(container: plan.container, inbox: folder)
        let isItem = { (name: FileName, status: FileStatus) in
            !name.isHidden && ledger?.isSettled(Identity(status)) != false
        }
        var kept: Int64 = 0
        var suspects: [OldestFirst.Candidate] = []
        func decide() throws(ContainerError) {
            let records = try clock.latestRecords(for: suspects.map { Identity($0.status) })
            for suspect in suspects {
                let record = records[suspect.status.fileID]
                if let arrival = clock.arrival(changed: suspect.time, record: record),
                    plan.isOlder(arrival, than: policy.inboxMaxAge)
                {
                    try body(
                        entry(
                            .inbox, [suspect.name], CleanupPolicy.olderThan(policy.inboxMaxAge), suspect.bytes,
                            suspect.status))
                } else {
                    kept += suspect.bytes
                }
            }
            suspects.removeAll(keepingCapacity: true)
        }
        try read(folder, shown) { name, status throws(ContainerError) in
            guard isItem(name, status) else { return }
            let measure = measure(name, status, in: fd, shown)
            if clock.keepsChangeTime && !plan.isOlder(measure.changed, than: policy.inboxMaxAge) {
                kept += measure.bytes
                return
            }
            suspects.append(
                OldestFirst.Candidate(time: measure.changed, bytes: measure.bytes, name: name, status: status))
            if suspects.count == Self.suspectsAtOnce { try decide() }
        }
        guard !stopped else { return }
        try decide()
        guard kept > policy.inboxMaxBytes, !stopped else { return }
        // The order needs every item's arrival: their identities, one pass over the log, then the oldest kept.
        var identities: [Identity] = []
        try read(folder, shown) { name, status throws(ContainerError) in
            if isItem(name, status) { identities.append(Identity(status)) }
        }
        guard !stopped else { return }
        let records = try clock.latestRecords(for: identities)
        identities = []
        var oldest = OldestFirst(excess: kept - policy.inboxMaxBytes)
        try read(folder, shown) { name, status throws(ContainerError) in
            guard isItem(name, status) else { return }
            let measure = measure(name, status, in: fd, shown)
            let record = records[status.fileID]
            // One with no known arrival counts as arriving now.
            let arrival = clock.arrival(changed: measure.changed, record: record) ?? plan.now
            guard !plan.isOlder(arrival, than: policy.inboxMaxAge) else { return }
            oldest.add(OldestFirst.Candidate(time: arrival, bytes: measure.bytes, name: name, status: status))
        }
        guard !stopped else { return }
        for candidate in oldest.sorted() {
            try body(
                entry(
                    .inbox, [candidate.name], CleanupPolicy.inboxOver(policy.inboxMaxBytes), candidate.bytes,
                    candidate.status))
        }
    }

    /// How many Inbox items old by their ctime are decided on after one pass over the log.
    static let suspectsAtOnce = 4096

    /// Every tmp entry when the app is not running; else those whose newest modification is older than
    /// `tmpMaxAge`. A folder goes whole; a symbolic link goes itself, never what it points at.
    func tmp(_ body: (CleanupEntry) throws(ContainerError) -> Void) throws(ContainerError) {
        guard let folder = try open(.tmp) else { return }
        let maxAge = plan.policy.tmpMaxAge
        let fd = folder.rawValue
        let shown = plan.container.path(.tmp)
        try read(folder, shown) { name, status throws(ContainerError) in
            let measure = measure(name, status, in: fd, shown)
            if !plan.appIsRunning {
                try body(entry(.tmp, [name], CleanupPolicy.appNotRunning, measure.bytes, status))
            } else if plan.isOlder(measure.modified, than: maxAge) {
                try body(entry(.tmp, [name], CleanupPolicy.olderThan(maxAge), measure.bytes, status))
            }
        }
    }

    /// The least recently used files of Caches while it holds more than `cachesMaxBytes`. A file's last use is
    /// its access time, or its modification time when later (where atime is not kept up to date).
    func caches(_ body: (CleanupEntry) throws(ContainerError) -> Void) throws(ContainerError) {
        guard !stopped, let folder = try open(.caches) else { return }
        let limit = plan.policy.cachesMaxBytes
        let shown = plan.container.path(.caches)
        var total: Int64 = 0
        try walkFiles(folder, shown, register: false) { _, _, status in
            total += status.kind == .regular ? status.size : 0
        }
        guard total > limit, !stopped else { return }
        folders = [(0, nil)]
        var oldest = OldestFirst(excess: total - limit)
        try walkFiles(folder, shown, register: true) { index, name, status in
            let bytes = status.kind == .regular ? status.size : 0
            oldest.add(
                OldestFirst.Candidate(
                    time: max(status.accessed, status.modified), bytes: bytes, folder: index, name: name,
                    status: status))
        }
        guard !stopped else { return }
        for candidate in oldest.sorted() {
            let components = path(ofFolder: candidate.folder) + [candidate.name]
            try body(entry(.caches, components, CleanupPolicy.cachesOver(limit), candidate.bytes, candidate.status))
        }
    }

    /// The names from Caches down to the folder at `index`.
    private func path(ofFolder index: Int) -> [FileName] {
        var names: [FileName] = []
        var index = index
        while index > 0, let name = folders[index].name {
            names.append(name)
            index = folders[index].parent
        }
        return names.reversed()
    }

    private func entry(_ place: Place, _ components: [FileName], _ reason: String, _ bytes: Int64, _ status: FileStatus)
        -> CleanupEntry
    {
        CleanupEntry(
            place: place, components: components, reason: reason, bytes: bytes, device: status.device,
            inode: status.inode)
    }
}

/// The cleanup policy's units and reasons (ARCHITECTURE.md, "Cleanup"). Its values are `Preferences`: `inboxMaxAge`,
/// `inboxMaxBytes`, `tmpMaxAge` and `cachesMaxBytes`, which `inbox clean` flags can override.
package enum CleanupPolicy {
    /// `30 days`, `1 day`, `12 hours`, `90 seconds`: the largest unit that divides `seconds` exactly.
    package static func describe(seconds: Int64) -> String {
        let units: [(Int64, String)] = [(604_800, "week"), (86_400, "day"), (3600, "hour"), (60, "minute")]
        for (size, name) in units where seconds != 0 && seconds % size == 0 {
            let count = seconds / size
            return "\(count) \(name)\(count == 1 ? "" : "s")"
        }
        return "\(seconds) second\(seconds == 1 ? "" : "s")"
    }

    /// Why an Inbox item or tmp entry goes: `older than 30 days`.
    static func olderThan(_ seconds: Int64) -> String { "older than \(describe(seconds: seconds))" }

    /// Why the oldest Inbox items go: `inbox over 1073741824 bytes`.
    static func inboxOver(_ bytes: Int64) -> String { "inbox over \(bytes) bytes" }

    /// Why all of tmp goes when no watcher holds the container.
    static let appNotRunning = "tmp: app not running"

    /// Why the least recently used files of Caches go: `caches over 536870912 bytes`.
    static func cachesOver(_ bytes: Int64) -> String { "caches over \(bytes) bytes" }
}
