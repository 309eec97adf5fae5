import AppContainer
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// The watchers of many containers in one process (ARCHITECTURE.md, "Many containers"), as one system service
/// serves every app's Inbox: every container under `root`, found as they are made and let go as they are
/// removed, and the containers named. Each container has a watcher of its own (its own log, lock, checkpoint,
/// preferences, cleanup and hooks); their turns are taken by a few shared threads, their cleanups by one, and
/// all share the process's one inotify thread. A
/// container that fails (a broken seal, a full disk, a folder that cannot be written, another watcher holding
/// it) is reported, its failure logged in it where its log can still be written, and tried again later with a
/// growing pause; the others go on. It says how many containers under `root` it serves, at the start and whenever
/// that changes, through `options.report`.
public final class WatcherFleet: Sendable {
    /// The folder whose sub-folders are containers, exact to the byte (as every path here: ARCHITECTURE.md, "Paths
    /// are bytes"); nil for the named containers only.
    public let root: [UInt8]?
    /// Containers named, watched whether or not they lie under `root`.
    public let containers: [[UInt8]]
    /// The options every watcher runs with (`report` gets each line prefixed with the container's path).
    public let options: WatchOptions

    /// The longest pause before a failed container is tried again.
    static let longestPause: Duration = .seconds(60)

    private struct Member {
        var watcher: Watcher?
        /// When to try (again) to start a watcher; nil while one runs.
        var retryAt: ContinuousClock.Instant?
        var pause: Duration = .milliseconds(100)
        /// Let go, its lock lost (removed with the container, most often): not tried again, and forgotten without a
        /// word once it is gone; a folder made again under its name (another `folder`) is a new member.
        var letGo = false
        /// The folder under the root, as it was found.
        var folder: Identity?
        /// Found to be a container (its watcher started, or failed for a reason other than being none yet).
        var isContainer = false
    }

    private struct State {
        var members: [[UInt8]: Member] = [:]
        /// Names under `root` that an event mentioned, to look at.
        var mentioned: Set<FileName> = []
        var rescanRoot = true
        var stopped = false
        var running = 0
        /// How many containers under the root the fleet last said it serves; nil before it first said so.
        var saidServing: Int?
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let allEnded = DispatchSemaphore(value: 0)
    private let signalCatch = SignalCatch()
    private let pool: WatchPool

    /// A fleet of the containers under `root` (when given) and of `containers`.
    public init(root: [UInt8]?, containers: [[UInt8]] = [], options: WatchOptions = WatchOptions()) {
        self.root = root
        self.containers = containers
        self.options = options
        pool = WatchPool(report: options.report)
    }

    /// A fleet of the containers under `root` (when given) and of `containers`, named as text.
    public convenience init(root: String?, containers: [String] = [], options: WatchOptions = WatchOptions()) {
        self.init(root: root.map { Array($0.utf8) }, containers: containers.map { Array($0.utf8) }, options: options)
    }

    /// The containers served now: those whose watcher runs (as text: U+FFFD for a byte that is not UTF-8).
    public var served: [String] {
        state.withLock { $0.members.filter { $0.value.watcher != nil }.map(\.key) }.map(Self.shown).sorted()
    }

    /// The watcher serving `path` now, if any.
    func watcher(serving path: String) -> Watcher? {
        state.withLock { $0.members[Array(path.utf8)]?.watcher }
    }

    /// A path as text, for messages.
    private static func shown(_ path: [UInt8]) -> String { String(decoding: path, as: UTF8.self) }

    /// Asks every watcher to stop (each finishes the batch in hand) and `run` to return.
    public func stop() {
        let watchers = state.withLock { state -> [Watcher] in
            state.stopped = true
            return state.members.values.compactMap(\.watcher)
        }
        for watcher in watchers { watcher.stop() }
        wake.signal()
    }

    /// Stops the fleet on SIGTERM and SIGINT until `run` returns, as `Watcher.stopOnTerminationSignals` does.
    public func stopOnTerminationSignals() throws(ContainerError) {
        try signalCatch.install(report: options.report) { [self] in stop() }
    }

    /// Serves the containers until `stop()`. Throws only when `root` cannot be watched. First raises the process's
    /// soft limit on open files to the hard one: each container holds about six descriptors, and systemd starts a
    /// service with a soft limit of 1024 (hooks get it back).
    public func run() throws(ContainerError) {
        defer { signalCatch.release() }
        do throws(Errno) { try system_raiseOpenFileLimit() } catch {
            options.report?("cannot raise the limit on open files: \(error)")
        }
        let events: RootEvents?
        if let root {
            let subscriber = RootEvents(path: root, fleet: self)
            try InotifyHub.shared.register(subscriber)
            events = subscriber
        } else {
            events = nil
        }
        defer { if let events { InotifyHub.shared.unregister(events) } }
        state.withLock { state in
            for path in containers { state.members[path] = Member(retryAt: .now) }
        }
        // Ready once the root is watched (each container logs its own watch-started); stopping once, at the end.
        SystemdNotify.send("READY=1")
        while !state.withLock({ $0.stopped }) {
            lookAtRoot()
            startDue()
            sayServing(
                state.withLock { state in
                    state.members.filter { isUnderRoot($0.key) && $0.value.isContainer && !$0.value.letGo }.count
                })
            let next = state.withLock { $0.members.values.compactMap(\.retryAt).min() }
            if let next {
                let wait = max(.zero, next - .now)
                _ = wake.wait(timeout: .now() + .milliseconds(Int(wait / .milliseconds(1)) + 1))
            } else {
                wake.wait()
            }
        }
        SystemdNotify.send("STOPPING=1")
        // Every watcher finishes its batch and logs watch-stopped. (Watchers that ended before signalled too.)
        while state.withLock({ $0.running }) > 0 { allEnded.wait() }
        pool.close()
    }

    /// Called by the root's events: `name` under the root was made, removed or renamed.
    func mention(_ name: FileName) {
        _ = state.withLock { $0.mentioned.insert(name) }
        wake.signal()
    }

    /// Called by the root's events when events may have been missed.
    func rescanRoot() {
        state.withLock { $0.rescanRoot = true }
        wake.signal()
    }

    /// Adds the folders under the root not yet known (each tried at once) and lets go of those gone.
    private func lookAtRoot() {
        guard let root else { return }
        let (names, asked) = state.withLock { state in
            defer {
                state.mentioned.removeAll()
                state.rescanRoot = false
            }
            return (state.mentioned, state.rescanRoot)
        }
        var present: Set<FileName> = []
        var everything = asked
        if everything {
            do {
                let folder = try FileDescriptor(root, [.directory])
                present = Set(try folder.entries().filter { !$0.isHidden })
            } catch {
                report(root, "cannot read the folder of containers: \(error)")
                // Gone, its containers are let go; unreadable for now, they go on.
                everything = error == .noSuchFile || error == .notDirectory
            }
        }
        let looked = everything ? present.union(names) : names
        // Each container let go, with its watcher when one runs.
        var gone: [(path: [UInt8], watcher: Watcher?, said: Bool)] = []
        state.withLock { state in
            for name in looked {
                let path = root + [0x2F] + name.bytes
                let status: FileStatus?
                do {
                    status = try fileStatusIfPresent(in: currentDirectory, path)
                } catch {
                    // Unreadable for now: a watcher it has goes on.
                    continue
                }
                let isFolder = status?.kind == .directory
                let folder = status.map(Identity.init)
                if isFolder, state.members[path].map({ $0.letGo && $0.folder != folder }) ?? true {
                    state.members[path] = Member(retryAt: .now, folder: folder)
                } else if !isFolder, let member = state.members.removeValue(forKey: path) {
                    gone.append((path, member.watcher, member.letGo))
                }
            }
            if everything {
                for path in state.members.keys where path.starts(with: root + [0x2F]) && !containers.contains(path) {
                    if let name = FileName(bytes: path.dropFirst(root.count + 1)), !present.contains(name),
                        let member = state.members.removeValue(forKey: path)
                    {
                        gone.append((path, member.watcher, member.letGo))
                    }
                }
            }
        }
        for (path, watcher, said) in gone {
            if !said { report(path, "removed: no longer watched") }
            watcher?.stop()
        }
    }

    /// Starts a watcher for each container whose time has come.
    private func startDue() {
        let due = state.withLock { state -> [[UInt8]] in
            let now = ContinuousClock.now
            return state.members.filter { $0.value.retryAt.map { $0 <= now } ?? false }.map(\.key)
        }
        for path in due { start(path) }
    }

    private func start(_ path: [UInt8]) {
        let inbox: Inbox
        do {
            inbox = try Inbox(containerPath: path)
        } catch {
            // Not a container (yet: one being made), or not readable: looked at again later.
            if error.code != .cannotCreate { state.withLock { $0.members[path]?.isContainer = true } }
            retryLater(path, error, quietly: error.code == .cannotCreate)
            return
        }
        let watcher = Watcher(inbox: inbox, options: memberOptions(path))
        let started = state.withLock { state -> Bool in
            guard !state.stopped, state.members[path] != nil else { return false }
            state.members[path]?.isContainer = true
            state.members[path]?.watcher = watcher
            state.members[path]?.retryAt = nil
            state.running += 1
            return true
        }
        guard started else { return }
        pool.add(watcher) { [self] failure in
            ended(path, watcher, failure)
            allEnded.signal()
        }
    }

    /// A watcher ended: on a failure, it is logged in its container (when its log can be written) and reported,
    /// and the container is tried again later, unless it was removed or the fleet stops. One under the root whose
    /// lock was lost is let go with one line: it is most often being removed, and trying it again would make a
    /// lock file in it (ARCHITECTURE.md, "One watcher per container").
    private func ended(_ path: [UInt8], _ watcher: Watcher, _ failure: ContainerError?) {
        if let failure { watcher.logEnded(failure) }
        let letGo = watcher.lostLock.load(ordering: .relaxed) && isUnderRoot(path)
        let again = state.withLock { state -> Bool in
            state.running -= 1
            guard !state.stopped, state.members[path]?.watcher === watcher else { return false }
            state.members[path]?.watcher = nil
            if letGo { state.members[path]?.letGo = true }
            return true
        }
        guard again else { return }
        guard !letGo else {
            report(path, "its watch.lock was removed or replaced (is the container being removed?): let go")
            wake.signal()  // one container fewer to say
            return
        }
        retryLater(path, failure ?? ContainerError(.failure, "the watcher stopped"), quietly: false)
        wake.signal()
    }

    /// The options of the watcher of the container at `path`: the fleet's, each line it reports prefixed with the
    /// path.
    private func memberOptions(_ path: [UInt8]) -> WatchOptions {
        var options = self.options
        // Nothing can read a member's stream: without it, each container would hold its newest 1,024 arrivals.
        options.streamsArrivals = false
        if let report = self.options.report {
            let shown = Self.shown(path)
            options.report = { @Sendable line in report("\(shown): \(line)") }
        }
        return options
    }

    /// Handles what is in the Inbox of each container once, one container after another, and returns (`watch
    /// --root DIR --once`): those named, and each folder under `root` that is a container (another folder is
    /// passed over, as `run` passes over it until it becomes one). `options.once` is taken as set. A container that
    /// fails is reported, logged in it where its log can be written, and the others still get their turn; then
    /// the worst failure is thrown: the first whose status is not 75 (busy, try again), else 75.
    public func runOnce() throws(ContainerError) {
        defer { signalCatch.release() }
        var paths = containers
        if let root {
            let names: [FileName]
            do {
                names = try FileDescriptor(root, [.directory]).entries().filter { !$0.isHidden }
            } catch {
                throw error.failure("read the folder of containers", root)
            }
            paths += names.sorted().map { root + [0x2F] + $0.bytes }.filter { !containers.contains($0) }
        }
        // A folder under the root that is no container is passed over; one named must be one. Each is opened in
        // its turn and let go after it, so the descriptors held stay few however many there are.
        let served = paths.filter { !isUnderRoot($0) || Container.isContainer(at: $0) }
        sayServing(served.filter { isUnderRoot($0) }.count)
        var failures: [ContainerError] = []
        for path in served {
            do throws(ContainerError) {
                var options = memberOptions(path)
                options.once = true
                let watcher = Watcher(inbox: try Inbox(containerPath: path), options: options)
                let started = state.withLock { state -> Bool in
                    guard !state.stopped else { return false }
                    state.members[path] = Member(watcher: watcher)  // for `stop()`
                    return true
                }
                guard started else { break }
                defer { state.withLock { _ = $0.members.removeValue(forKey: path) } }
                try watcher.runBlocking()  // logs its failure in the container
            } catch {
                report(path, error.message)
                failures.append(error)
            }
        }
        guard let worst = failures.first(where: { $0.code != .busy }) ?? failures.first else { return }
        throw ContainerError(
            worst.code,
            "\(failures.count) of \(served.count) containers failed, each said above; the exit status is the worst"
        )
    }

    /// Says how many containers under the root the fleet serves (`count`), if it has not said so already: at the
    /// start, "no containers … yet", or that the root is itself a container, and then each time the count changes.
    private func sayServing(_ count: Int) {
        guard let root else { return }
        let first = state.withLock { state -> Bool? in
            guard state.saidServing != count else { return nil }
            defer { state.saidServing = count }
            return state.saidServing == nil
        }
        guard let first else { return }
        let rootIsContainer = first && count == 0 && Container.isContainer(at: root)
        options.report?(
            Self.servingLine(count, under: Self.shown(root), first: first, rootIsContainer: rootIsContainer))
    }

    /// What the fleet says of the containers it serves under `root`.
    static func servingLine(_ count: Int, under root: String, first: Bool, rootIsContainer: Bool) -> String {
        if rootIsContainer {
            return "\(root) is itself a container: serving no containers under it; use --container \(root) to watch it"
        }
        switch count {
        case 0: return "serving no containers under \(root)" + (first ? " yet" : "")
        case 1: return "serving 1 container under \(root)"
        default: return "serving \(count) containers under \(root)"
        }
    }

    /// Whether `path` is served for being under the root, not for being named.
    private func isUnderRoot(_ path: [UInt8]) -> Bool {
        guard let root else { return false }
        return path.starts(with: root + [0x2F]) && !containers.contains(path)
    }

    private func retryLater(_ path: [UInt8], _ error: ContainerError, quietly: Bool) {
        let pause = state.withLock { state -> Duration? in
            guard var member = state.members[path] else { return nil }
            let pause = member.pause
            member.retryAt = .now + pause
            member.pause = min(pause * 2, Self.longestPause)
            state.members[path] = member
            return pause
        }
        if let pause, !quietly {
            report(path, "\(error.message); trying again in \(Self.shown(pause))")
        }
    }

    /// A pause as people read it: tenths of a second under ten seconds (the first pauses are 0.1 s), whole
    /// seconds past.
    static func shown(_ pause: Duration) -> String {
        let tenths = Int((pause / .milliseconds(100)).rounded())
        return tenths < 100 ? "\(tenths / 10).\(tenths % 10) s" : "\((tenths + 5) / 10) s"
    }

    private func report(_ path: [UInt8], _ line: String) {
        options.report?("\(Self.shown(path)): \(line)")
    }
}

/// The events of a fleet's root folder: a sub-folder made, removed or renamed in or out.
private final class RootEvents: InotifySubscriber {
    let path: [UInt8]
    private let fleet: WatcherFleet
    private let streak = UnwatchedStreak()
    private let poll = FolderPoll()

    init(path: [UInt8], fleet: WatcherFleet) {
        self.path = path
        self.fleet = fleet
    }

    func folders() throws(ContainerError) -> [(path: [UInt8], mask: InotifyMask)] {
        [(path, [.create, .delete, .movedFrom, .movedTo, .onlyDirectory, .dontFollow, .deleteSelf, .moveSelf])]
    }

    func handle(_ event: InotifyEvent, folder index: Int) -> InotifyOutcome {
        if event.watchEnded { return .startOver("the folder of containers was replaced") }
        // The containers it mentions are tried at once: none waits here.
        if let name = FileName(bytes: event.name) { fleet.mention(name) }
        return .handled
    }

    func rescan(_ reason: String, overflow: Bool) {
        if streak.rescanned(overflow: overflow) {
            poll.forget()
            fleet.options.report?("watching \(String(decoding: path, as: UTF8.self)) again")
        }
        fleet.rescanRoot()
    }

    func unwatched(_ error: ContainerError) {
        if streak.failed() {
            fleet.options.report?("\(error.message); trying again every second, reading it when it changes")
        }
        if poll.changed(path) { fleet.rescanRoot() }
    }
}
