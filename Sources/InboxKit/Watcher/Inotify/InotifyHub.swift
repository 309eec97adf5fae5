import AppContainer
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// What the hub watches for one party, and what it does with the events (ARCHITECTURE.md, "libinotifytools").
/// Every method is called on the hub's thread.
protocol InotifySubscriber: AnyObject, Sendable {
    /// The folders to watch, with their masks; may make missing folders first. Called again after every restart.
    func folders() throws(ContainerError) -> [(path: [UInt8], mask: InotifyMask)]
    /// An event on the folder at `index` in `folders()`.
    func handle(_ event: InotifyEvent, folder index: Int) -> InotifyOutcome
    /// Events may have been missed (a restart, an overflow): everything watched must be scanned. After
    /// `unwatched`, the first such call that is not an overflow's says the folders are watched again.
    func rescan(_ reason: String, overflow: Bool)
    /// The folders, watched before, could not be watched again (after a restart): called at each failed try,
    /// about once a second, until a try succeeds and `rescan` follows.
    func unwatched(_ error: ContainerError)
}

/// What a subscriber made of an event.
enum InotifyOutcome {
    /// A watch ended: start over, for this reason.
    case startOver(String)
    /// A name was queued, and this many now wait to be handled.
    case queued(namesWaiting: Int)
    /// Nothing to tell the hub.
    case handled
}

/// The one thread of the process that talks to libinotifytools, which has one global, thread-unsafe instance: it
/// serves every watcher of the process (one container or many), each a subscriber with its own folders. When a
/// watched folder ends (deleted, moved, replaced), it starts over for all: cleanup, initialise, watch every
/// subscriber's folders again, and ask each for a rescan. A subscriber whose folders cannot be watched is told so
/// (`unwatched`) and tried again at each wake, and the others go on.
///
/// Registrations are taken up when the thread next wakes: at once when it starts, else within the library's
/// one-second wait. A subscriber left unwatched is tried again once a second at most.
final class InotifyHub: Sendable {
    static let shared = InotifyHub()

    private struct Entry {
        let subscriber: any InotifySubscriber
        /// Called once the folders are first watched (nil), or watching them failed (then the entry is dropped).
        let watched: @Sendable (ContainerError?) -> Void
        var isStarted = false
    }

    private struct State {
        var entries: [ObjectIdentifier: Entry] = [:]
        /// Watch descriptor → subscriber and the index of its folder.
        var watches: [CInt: (subscriber: ObjectIdentifier, folder: Int)] = [:]
        /// The entries whose folders are not watched now: new, or since a restart. Kept beside `entries`, so that
        /// an event costs the same however many subscribers there are.
        var unwatched: Set<ObjectIdentifier> = []
        var removed: Set<ObjectIdentifier> = []
        var running = false
    }

    private let state = Mutex(State())

    /// The names waiting (a batch of the default size) from which the thread of a process serving one container
    /// waits its turn; it takes back an ordinary one once at most one waits, or no event came for a second.
    static let backlogForBackground = 256

    /// Watches `subscriber`'s folders and returns once they are watched, so that nothing after is missed.
    /// - Throws: what watching them threw the first time (the subscriber is then dropped).
    func register(_ subscriber: any InotifySubscriber) throws(ContainerError) {
        let outcome = Mutex<ContainerError?>(nil)
        let done = DispatchSemaphore(value: 0)
        register(subscriber) { error in
            outcome.withLock { $0 = error }
            done.signal()
        }
        done.wait()
        if let error = outcome.withLock({ $0 }) { throw error }
    }

    /// Watches `subscriber`'s folders when the thread next wakes, and returns at once; `watched` is called on the
    /// hub's thread once they are (nil), or with what watching them threw the first time (the subscriber is then
    /// dropped).
    func register(_ subscriber: any InotifySubscriber, watched: @escaping @Sendable (ContainerError?) -> Void) {
        let id = ObjectIdentifier(subscriber)
        let start = state.withLock { state -> Bool in
            state.entries[id] = Entry(subscriber: subscriber, watched: watched)
            state.unwatched.insert(id)
            state.removed.remove(id)
            defer { state.running = true }
            return !state.running
        }
        if start {
            do throws(Errno) {
                try startDetachedThread(name: "inbox-inotify") { [self] in run() }
            } catch {
                // Every registration since (they found the thread starting) fails with this one.
                let failed = state.withLock { state -> [Entry] in
                    state.running = false
                    defer { state.entries.removeAll() }
                    return Array(state.entries.values)
                }
                let failure = error.failure("start the inotify thread for", "the watcher")
                for entry in failed { entry.watched(failure) }
            }
        }
    }

    /// Stops watching for `subscriber`; its folders are let go when the thread next wakes.
    func unregister(_ subscriber: any InotifySubscriber) {
        let id = ObjectIdentifier(subscriber)
        state.withLock { state in
            if state.entries.removeValue(forKey: id) != nil { state.removed.insert(id) }
            state.unwatched.remove(id)
        }
    }

    private func run() {
        var initialized = false
        var background = false
        func setBackground(_ wanted: Bool) {
            guard wanted != background else { return }
            background = wanted
            setCurrentThreadBackground(wanted)
        }
        // Subscribers left unwatched are tried again once a second, however many events come for the others.
        var nextRetry = ContinuousClock.now
        while true {
            let retry = ContinuousClock.now >= nextRetry
            let work = state.withLock {
                state -> (stop: Bool, pending: [ObjectIdentifier], removed: Bool, single: Bool) in
                if state.entries.isEmpty {
                    // Under the lock: a registration that comes next starts a thread of its own, after this.
                    Inotify.cleanup()
                    state.running = false
                    state.watches.removeAll()
                    state.unwatched.removeAll()
                    state.removed.removeAll()
                    return (true, [], false, false)
                }
                let removed = !state.removed.isEmpty
                state.removed.removeAll()
                let entries = state.entries
                let pending = Array(state.unwatched.filter { retry || entries[$0]?.isStarted == false })
                return (false, pending, removed, state.entries.count == 1)
            }
            if work.stop { break }
            if retry { nextRetry = .now + .seconds(1) }
            // Many containers' events must not wait behind one container's burst (ARCHITECTURE.md, "Threads that
            // wait their turn").
            if !work.single { setBackground(false) }
            if !initialized {
                initialized = start(all: "start")
            } else if work.removed {
                // Removing one watch leaves the library's tables for the kernel's IN_IGNORED: start over.
                initialized = start(all: "a watcher left")
            } else {
                for id in work.pending { watch(id, "watched again") }
            }
            guard initialized else {
                // No inotify instance to be had (the user's limit of instances, say): try again shortly.
                usleep(100_000)
                continue
            }
            let event: InotifyEvent?
            do {
                event = try Inotify.next(timeoutSeconds: 1)
            } catch {
                // A read error leaves the queue in doubt: start over, and let the scans find what was missed.
                initialized = start(all: "inotify error: \(error)")
                continue
            }
            guard let event else {
                setBackground(false)
                continue
            }
            if event.isOverflow {
                for subscriber in subscribers() { subscriber.rescan("overflow", overflow: true) }
                continue
            }
            let target = state.withLock { state -> (any InotifySubscriber, Int)? in
                guard let watch = state.watches[event.watch], let entry = state.entries[watch.subscriber] else {
                    return nil
                }
                return (entry.subscriber, watch.folder)
            }
            if let (subscriber, folder) = target {
                switch subscriber.handle(event, folder: folder) {
                case .startOver(let reason):
                    initialized = start(all: reason)
                case .queued(let waiting) where work.single:
                    // The one container's events feed only its renaming thread: while a batch or more waits for it,
                    // the next event is news to no thread, and its wake need not preempt one that renames.
                    if waiting >= Self.backlogForBackground {
                        setBackground(true)
                    } else if waiting <= 1 {
                        setBackground(false)
                    }
                case .queued, .handled:
                    break
                }
            } else if event.watchEnded {
                initialized = start(all: "a watched folder ended")
            }
        }
    }

    /// Starts libinotifytools over and watches every subscriber's folders again; those watched before are asked
    /// for a rescan. Returns whether the library is initialised.
    private func start(all reason: String) -> Bool {
        Inotify.cleanup()
        state.withLock { state in
            state.watches.removeAll()
            state.unwatched = Set(state.entries.keys)
        }
        do {
            try Inotify.initialize()
        } catch {
            for id in state.withLock({ Array($0.entries.keys) }) { fail(id, error) }
            return false
        }
        for id in state.withLock({ Array($0.entries.keys) }) { watch(id, reason) }
        return true
    }

    /// Watches one subscriber's folders; one watched before is asked for a rescan, for `reason`. The first
    /// failure is its registration's; a later one leaves it to be tried again at the next wake.
    private func watch(_ id: ObjectIdentifier, _ reason: String) {
        guard let subscriber = state.withLock({ $0.entries[id]?.subscriber }) else { return }
        var added: [(CInt, Int)] = []
        do throws(ContainerError) {
            for (index, folder) in try subscriber.folders().enumerated() {
                do {
                    added.append((try Inotify.watch(folder.path, folder.mask), index))
                } catch .noSpace {
                    throw ContainerError(
                        .failure,
                        "cannot watch '\(String(decoding: folder.path, as: UTF8.self))': the user's inotify watches are all taken"
                            + " (see /proc/sys/fs/inotify/max_user_watches)", cause: .noSpace)
                } catch {
                    throw error.failure("watch", folder.path)
                }
            }
        } catch {
            fail(id, error)
            return
        }
        let entry = state.withLock { state -> Entry? in
            for (watch, index) in added { state.watches[watch] = (id, index) }
            state.unwatched.remove(id)
            defer { state.entries[id]?.isStarted = true }
            return state.entries[id]
        }
        guard let entry else { return }
        if entry.isStarted {
            subscriber.rescan(reason, overflow: false)
        } else {
            entry.watched(nil)
        }
    }

    /// A subscriber not yet started fails its registration; a started one is told, and tried again at the next wake.
    private func fail(_ id: ObjectIdentifier, _ error: ContainerError) {
        let entry = state.withLock { state -> Entry? in
            guard let entry = state.entries[id] else { return nil }
            if !entry.isStarted {
                state.entries.removeValue(forKey: id)
                state.unwatched.remove(id)
            }
            return entry
        }
        guard let entry else { return }
        if entry.isStarted {
            entry.subscriber.unwatched(error)
        } else {
            entry.watched(error)
        }
    }

    private func subscribers() -> [any InotifySubscriber] {
        state.withLock { $0.entries.values.map(\.subscriber) }
    }
}

/// Whether a subscriber's folders are left unwatched: the first failure of a streak, and the first rescan after it
/// that is not an overflow's (the hub's, once they are watched again), are news; the tries between are not.
final class UnwatchedStreak: Sendable {
    private let unwatched = Mutex(false)

    /// Whether this failure starts a streak.
    func failed() -> Bool {
        unwatched.withLock { state in
            defer { state = true }
            return !state
        }
    }

    /// Whether this rescan ends a streak.
    func rescanned(overflow: Bool) -> Bool {
        guard !overflow else { return false }
        return unwatched.withLock { state in
            defer { state = false }
            return state
        }
    }
}
