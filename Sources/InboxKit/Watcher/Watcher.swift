import AppContainer
import CLinux
import Dispatch
import FoundationEssentials
import Glibc
import Synchronization

/// How the watcher treats arrivals.
public struct WatchOptions: Sendable {
    /// What happens to an arrival no handler decided on: `.keep` (the default) or `.move` into Documents.
    public var onArrival: Disposition = .keep
    /// A shell command run for each arrival (`--exec`), reading the item on stdin.
    public var exec: String?
    /// How long an `--exec` command may run before it and everything it started are killed; the item is then kept.
    public var hookTimeout: Duration = .seconds(60)
    /// How many `--exec` commands run at once.
    public var jobs = 2
    /// Handle what is in the Inbox, then return.
    public var once = false
    /// How often the whole Inbox is scanned even when no event says so.
    public var rescanInterval: Duration = .seconds(300)
    /// How often an Inbox on a network or FUSE filesystem is polled for what other hosts write there (backing off to
    /// 30 s after 5 idle minutes); an Inbox on a local filesystem is never polled (ARCHITECTURE.md, "Network and FUSE
    /// filesystems"). `watch --poll-interval`; package-wide only, as `settle`.
    package var pollInterval: Duration = .seconds(2)
    /// How long a polled entry must hold still (its size, modification and change times) before it arrives
    /// (`watch --settle`; package-wide only: the public API is kept under its limit, and the defaults serve a library).
    package var settle: Duration = .seconds(2)
    /// Whether the watcher may start where its lock does not reach other hosts (sshfs, rclone, `nolock`,
    /// `local_lock=`): the user vouches that no watcher on another host serves the container.
    public var singleHost = false
    /// How often the cleanup policy (ARCHITECTURE.md, "Cleanup") is applied on a thread of its own, first at the start;
    /// nil: never.
    public var cleanInterval: Duration? = .seconds(3600)
    /// The most arrivals handled in one group commit.
    public var maxBatch = 256
    /// Where the watcher says what it is doing (start, stop, overflows, rescans, errors), a line at a time.
    public var report: (@Sendable (String) -> Void)?
    /// Whether each line an `--exec` command writes on stderr goes to `report` as it comes, as `hook for NAME:
    /// LINE` (`watch --verbose`); either way its last 2 KiB are in its `handled` record.
    public var reportsHookStderr = false
    /// Called on the watcher's thread with each batch's arrivals once what was done with them is durable, before
    /// the `arrivals` stream gets them. The watcher waits for it, so none is skipped however slow it is (the stream
    /// keeps only the newest). Returning false stops the watcher as `stop()` does: after this batch.
    public var onSettled: (@Sendable ([Arrival]) -> Bool)?
    /// Whether the `arrivals` stream gets each arrival, the newest 1,024 kept until read. Off, the stream ends at
    /// once, empty, and a watcher neither copies an arrival into it nor holds any there: `inbox watch` and each
    /// container of a `WatcherFleet` turn it off, as nothing reads their streams.
    public var streamsArrivals = true

    /// The defaults.
    public init() {}
}

extension WatchOptions {
    /// Whether settled arrivals go anywhere: to `onSettled` or the `arrivals` stream.
    var settlesArrivals: Bool {
        streamsArrivals || onSettled != nil
    }
}

/// A file that arrived in the Inbox: the read-only item and what its contents are.
public struct Arrival: Sendable {
    /// The item as it arrived in the Inbox (read-only).
    public let item: InboxItem
    /// The SHA-256 of the file as sealed: 64 lowercase hex digits.
    public let sha256: String
    /// A short name sniffed from the contents: pdf, png, jpeg, gif, office, zip, text, calendar, vcard, eml, …
    public let type: String
    /// What became of it, on the `arrivals` stream: the disposition decided. Nil while a handler decides.
    public internal(set) var disposition: Disposition?
    /// Where the file is now, on the `arrivals` stream: in the Inbox (kept, or a move that failed and waits for a
    /// retry), in Documents (moved, perhaps under a clash name), or nil once deleted. Made when asked, so that
    /// the watcher's hot path builds no URL.
    public var url: URL? {
        switch outcome {
        case .stayed, .failed: item.url
        case .moved(let name): item.inbox.container.url(.documents).appendingPathComponent(name.string)
        case .deleted: nil
        }
    }

    /// What applying the disposition did; `.stayed` until then.
    private(set) var outcome = ArrivalPipeline.Applied.stayed

    init(item: InboxItem, sha256: String, type: String) {
        self.item = item
        self.sha256 = sha256
        self.type = type
    }

    /// Records the disposition and what applying it did.
    mutating func settle(_ disposition: Disposition, _ outcome: ArrivalPipeline.Applied) {
        self.disposition = disposition
        self.outcome = outcome
    }
}

/// A library handler: it gets each arrival read-only and says what becomes of it.
public protocol ArrivalHandler: Sendable {
    /// What becomes of `arrival`. Asked at most once per arrival (ARCHITECTURE.md, "Each answer once"), on the
    /// watcher's thread, which waits for the answer.
    func handle(_ arrival: Arrival) -> Disposition
}

/// The watcher of ARCHITECTURE.md, "How an arrival flows": it sees each file arrive in the Inbox (inotify events are
/// hints, scans of the folder the truth), validates and seals it, hands it to the handlers, and applies their
/// disposition.
public final class Watcher: Sendable {
    /// The Inbox watched.
    public let inbox: Inbox
    /// How arrivals are treated.
    public let options: WatchOptions
    let handler: (any ArrivalHandler)?
    let queue = WatchQueue()
    private let stream: AsyncStream<Arrival>
    private let continuation: AsyncStream<Arrival>.Continuation
    /// What `stopOnTerminationSignals` installed, undone when `run` returns.
    private let signalCatch = SignalCatch()
    /// Set once the run found its lock no longer held (ARCHITECTURE.md, "One watcher per container").
    let lostLock = Atomic<Bool>(false)
    /// The lock while a run holds it, for the threads beside the run (inotify, cleanup) to check.
    let lock = Mutex<WatcherLock?>(nil)

    /// Whether a run holds the container now: its lock taken and the name still holding it. Nothing is written in
    /// the container without it.
    var holdsLock: Bool {
        lock.withLock { $0 }?.state == .held
    }

    /// A watcher of `inbox`. `handler`, when given, decides every arrival; else `options.exec`, else
    /// `options.onArrival`. Nothing runs until `run()` (or `runBlocking()`).
    public init(inbox: Inbox, options: WatchOptions = WatchOptions(), handler: (any ArrivalHandler)? = nil) {
        self.inbox = inbox
        self.options = options
        self.handler = handler
        (stream, continuation) = AsyncStream.makeStream(of: Arrival.self, bufferingPolicy: .bufferingNewest(1024))
        if !options.streamsArrivals { continuation.finish() }
    }

    /// Every arrival as it is handled. The stream keeps the newest 1,024 when nobody reads it; with
    /// `WatchOptions.streamsArrivals` off it is empty.
    public var arrivals: AsyncStream<Arrival> { stream }

    /// Asks the watcher to stop: it finishes the batch in hand, logs `watch-stopped` and `run` returns.
    public func stop() {
        queue.stop()
    }

    /// Stops the watcher on SIGTERM and SIGINT until `run` returns; both signals then get back the handling they
    /// had before. The handler only writes the signal's number to a pipe; a thread of the watcher's reads it.
    public func stopOnTerminationSignals() throws(ContainerError) {
        try signalCatch.install(report: options.report) { [self] in stop() }
    }

    func report(_ line: String) {
        options.report?(line)
    }

    /// Runs on the calling thread until `stop()` (or, with `once`, until the Inbox has been handled); `run() async`
    /// runs the same on a thread of its own. Only one watcher runs per container: a second fails with exit status
    /// 75. A failure that ends the run is logged in the container.
    public func runBlocking() throws(ContainerError) {
        defer { signalCatch.release() }
        let session: WatchSession
        do {
            session = try WatchSession(self, start: .blocking)
            // Asleep until something is queued or due: an idle watcher costs no CPU.
            while try session.turn() {
                queue.wait(until: session.nextWake)
            }
            try session.close()
        } catch {
            logEnded(error)
            throw error
        }
        if let failure = session.itemFailure { throw failure }
    }

    /// Logs the failure that ended a run as an `error` record (`during: watch`, with its exit status), where the
    /// log can be written; says so where it cannot. A run that ended because another watcher holds the container,
    /// or may (its lock lost, 75), writes nothing in it: the record would land in the other's log. Nor does one refused
    /// because the container must first be declared single-host: nothing is written there until then.
    func logEnded(_ failure: ContainerError) {
        guard failure.code != .busy else { return }
        if failure.code == .cannotCreate, (try? inbox.container.singleHostRefusal(declared: options.singleHost)) != nil
        {
            return
        }
        do {
            try inbox.log.append(
                Event(
                    .error,
                    [
                        "during": .string("watch"), "errno": .int(Int64(failure.cause?.rawValue ?? 0)),
                        "message": .string(failure.message), "exit_status": .int(Int64(failure.code.rawValue)),
                    ]),
                durable: true)
        } catch {
            report("cannot log the failure in the container: \(error.message)")
        }
    }

    /// Hands a batch's arrivals to the `arrivals` stream.
    func deliver(_ arrivals: [Arrival]) {
        guard options.streamsArrivals else { return }
        for arrival in arrivals { continuation.yield(arrival) }
    }

    /// Ends the `arrivals` stream.
    func finishArrivals() {
        continuation.finish()
    }

    /// How long `once` waits for files still being written before it leaves them for the next run.
    static let onceWaitForWriters: Duration = .seconds(5)

    /// The kernel tells a lease holder of a break with SIGIO, whose default action ends the process: where
    /// nobody handles it, it is ignored (the pipeline asks the lease itself).
    static func ignoreLeaseBreakSignal() {
        var current = sigaction()
        guard sigaction(SIGIO, nil, &current) == 0, current.__sigaction_handler.sa_handler == nil else { return }
        signal(SIGIO, SIG_IGN)
    }
}

/// SIGTERM and SIGINT caught to stop a watcher or a fleet (`install`), until `release` gives them back the handling
/// they had before. The handler only writes the signal's number to a pipe; a thread reads it and calls `stop`.
package final class SignalCatch: @unchecked Sendable {
    private struct Installed {
        let write: CInt
        let previous: [(CInt, sigaction)]
    }

    private let installed = Mutex<Installed?>(nil)

    package init() {}

    package func install(report: (@Sendable (String) -> Void)?, stop: @escaping @Sendable () -> Void)
        throws(ContainerError)
    {
        let (read, write): (CInt, CInt)
        do {
            (read, write) = try system_pipe()
        } catch {
            throw error.failure("catch SIGTERM and SIGINT with", "a pipe")
        }
        var saved: [(CInt, sigaction)] = []
        for number in [SIGTERM, SIGINT] {
            var previous = sigaction()
            guard inbox_catch_signal_to_pipe(number, write, &previous) == 0 else { continue }
            saved.append((number, previous))
        }
        installed.withLock { $0 = Installed(write: write, previous: saved) }
        do throws(Errno) {
            try startDetachedThread {
                let reader = FileDescriptor(owning: read)
                var byte: [UInt8] = [0]
                // Ends when the write end closes, at `release`.
                while (try? byte.withUnsafeMutableBytes { try reader.read(into: $0) }) == 1 {
                    report?("stopping on \(CInt(byte[0]) == SIGTERM ? "SIGTERM" : "SIGINT")")
                    stop()
                }
            }
        } catch {
            try? system_close(read)
            release()
            throw error.failure("catch SIGTERM and SIGINT with", "a thread")
        }
    }

    package func release() {
        let taken = installed.withLock { installed in
            defer { installed = nil }
            return installed
        }
        guard let taken else { return }
        for (number, previous) in taken.previous {
            var restored = previous
            sigaction(number, &restored, nil)
        }
        try? system_close(taken.write)
    }
}
