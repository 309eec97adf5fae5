import AppContainer
import Glibc
import Synchronization

/// A watcher's inotify events, through the process's `InotifyHub`: it watches the container root (Documents going
/// or coming), Documents (the Inbox going or coming) and the Inbox, recreating the last two when they are missing,
/// and turns events into names and rescans on the `WatchQueue`. When the Inbox or Documents is deleted, moved or
/// recreated, the hub starts over and this asks for a rescan (which also reopens the folders by path).
/// When the folders cannot be watched again, `watching` is told once (the failure), and once more (nil) when they
/// are; meanwhile the Inbox is polled at each of the hub's tries, and scanned when it may have changed (a scan that
/// cannot read it fails the watcher, as at start-up). A missing Inbox is made again at once at the start, later
/// only once it has been missing for `recreationDelay` and while the watcher holds its lock (`holdsLock`): a
/// container being removed has lost it by then, and nothing is made again in it (ARCHITECTURE.md, "One watcher per
/// container").
final class InboxEvents: InotifySubscriber {
    /// The Inbox's path, exact to the byte, as Documents' and the root's.
    let inboxPath: [UInt8]
    let queue: WatchQueue
    private let documentsPath: [UInt8]
    private let rootPath: [UInt8]
    private let holdsLock: @Sendable () -> Bool
    private let watching: @Sendable (ContainerError?) -> Void
    private let streak = UnwatchedStreak()
    private let poll = FolderPoll()
    /// Whether the folders were watched once: after that, a missing Inbox waits before it is made again.
    private let begun = Atomic<Bool>(false)
    /// Since when the Inbox is missing and not made again, if it is.
    private let missingSince = Mutex<ContinuousClock.Instant?>(nil)

    /// How long a missing Inbox waits before it is made again: `rm -rf` of a container goes through Documents before
    /// Library, where the lock is, in well under this.
    static let recreationDelay: Duration = .milliseconds(500)

    init(
        inboxPath: [UInt8], queue: WatchQueue, holdsLock: @escaping @Sendable () -> Bool,
        watching: @escaping @Sendable (ContainerError?) -> Void
    ) {
        self.inboxPath = inboxPath
        self.queue = queue
        self.holdsLock = holdsLock
        self.watching = watching
        documentsPath = Self.folder(of: inboxPath)
        rootPath = Self.folder(of: documentsPath)
    }

    /// Returns once the Inbox is watched, so nothing that arrives after is missed.
    func start() throws(ContainerError) {
        try InotifyHub.shared.register(self)
    }

    /// Returns at once; `watched` is told on the hub's thread once the Inbox is watched (nil) or could not be.
    func start(watched: @escaping @Sendable (ContainerError?) -> Void) {
        InotifyHub.shared.register(self, watched: watched)
    }

    func stop() {
        InotifyHub.shared.unregister(self)
    }

    func folders() throws(ContainerError) -> [(path: [UInt8], mask: InotifyMask)] {
        if begun.exchange(true, ordering: .relaxed) { try waitForRecreation() }
        for folder in [documentsPath, inboxPath] {
            do {
                try system_mkdirat(currentDirectory, folder, mode: 0o755)
            } catch .fileExists {
            } catch {
                throw error.failure("recreate", folder)
            }
        }
        return [
            (rootPath, [.inboxParent, .movedTo]), (documentsPath, [.inboxParent, .deleteSelf, .moveSelf]),
            (inboxPath, .inbox),
        ]
    }

    /// Fails while the Inbox is missing and may not be made again yet (or ever: the lock lost); `unwatched` then
    /// stays quiet.
    private func waitForRecreation() throws(ContainerError) {
        let present: Bool
        do {
            present = try fileStatusIfPresent(in: currentDirectory, inboxPath) != nil
        } catch {
            throw error.failure("read", inboxPath)
        }
        let now = ContinuousClock.now
        let since = missingSince.withLock { since in
            if present { since = nil } else if since == nil { since = now }
            return since
        }
        guard let since else { return }
        guard now - since >= Self.recreationDelay, holdsLock() else {
            throw ContainerError(
                .noSuchItem,
                "'\(String(decoding: inboxPath, as: UTF8.self))' is missing; made again while the watcher holds its lock"
            )
        }
        missingSince.withLock { $0 = nil }
    }

    func handle(_ event: InotifyEvent, folder index: Int) -> InotifyOutcome {
        switch index {
        case 0:
            if event.name == Array("Documents".utf8) || event.watchEnded { return .startOver("documents replaced") }
        case 1:
            if event.name == Array("Inbox".utf8) || event.watchEnded { return .startOver("inbox replaced") }
        default:
            if event.watchEnded { return .startOver("inbox replaced") }
            if let name = FileName(bytes: event.name), !name.isHidden { return .queued(namesWaiting: queue.push(name)) }
        }
        return .handled
    }

    func rescan(_ reason: String, overflow: Bool) {
        if streak.rescanned(overflow: overflow) {
            poll.forget()
            watching(nil)
        }
        queue.requestRescan(reason, overflow: overflow)
    }

    func unwatched(_ error: ContainerError) {
        // The Inbox missing, not made again yet: nothing to say or scan; the watcher's next turn checks its lock.
        if missingSince.withLock({ $0 }) != nil {
            queue.poke()
            return
        }
        if streak.failed() { watching(error) }
        if poll.changed(inboxPath) { queue.requestRescan("unwatched") }
    }

    /// The folder that holds `path`.
    private static func folder(of path: [UInt8]) -> [UInt8] {
        Array(path[..<(path.lastIndex(of: 0x2F) ?? path.endIndex)])
    }
}
