import AppContainer
import Glibc

/// What became of one planned entry.
public struct CleanupOutcome: Sendable {
    public enum Result: Sendable {
        /// A dry run: nothing was done.
        case planned
        case deleted
        /// Already gone when its turn came.
        case gone
        /// Its name holds another file than the one planned (device and inode differ): kept.
        case changed
        case failed(ContainerError)
    }

    public let entry: CleanupEntry
    /// The absolute path, exact to the byte.
    public let path: [UInt8]
    public let result: Result

    public var deleted: Bool {
        if case .deleted = result { return true }
        return false
    }

    /// `      2815  /home/me/app/tmp/upload.part  (older than 3 days)`: the same in a dry run and a real run.
    public var line: [UInt8] {
        let size = String(entry.bytes)
        let padded = String(repeating: " ", count: max(0, 10 - size.count)) + size
        return Array("\(padded)  ".utf8) + path + Array("  (\(entry.reason))".utf8)
    }

    /// `{"path":"/home/me/app/tmp/upload.part","reason":"older than 3 days","deleted":true}` (DESIGN §7).
    public var json: String {
        var buffer: [UInt8] = [UInt8(ascii: "{")]
        EventEncoding.appendPathMember("path", path, to: &buffer)
        EventEncoding.appendLiteral(",\"reason\":", to: &buffer)
        EventEncoding.appendString(entry.reason, to: &buffer)
        EventEncoding.appendLiteral(",\"deleted\":", to: &buffer)
        EventEncoding.appendLiteral(deleted ? "true}" : "false}", to: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }
}

/// The totals of a clean.
public struct CleanupSummary: Sendable {
    public var planned = 0
    public var deleted = 0
    public var bytesFreed: Int64 = 0
    /// Entries that could not be deleted, and the first reason.
    public var failed = 0
    public var firstFailure: ContainerError?
}

extension CleanupPlan {
    /// Deletes each entry of the plan as the walk produces it (with `dryRun`, only reports it) and logs
    /// `deleted` with its path and reason. `each` hears of every entry, in order, after its deletion.
    public func execute(
        dryRun: Bool = false, log: EventLog, progress: CleanupProgress? = nil,
        shouldStop: @escaping () -> Bool = { false }, _ each: (CleanupOutcome) -> Void
    ) throws(ContainerError) -> CleanupSummary {
        var executor = CleanupExecutor(plan: self, log: log, dryRun: dryRun)
        do {
            try forEachEntry(progress: progress, shouldStop: shouldStop) { entry throws(ContainerError) in
                each(try executor.run(entry))
            }
        } catch {
            try? executor.flush()
            throw error
        }
        try executor.flush()
        return executor.summary
    }

    /// Deletes `entries`, a plan made earlier (by `entries()`), each only while its name still holds the file
    /// planned; logs each deletion. `each` hears of every entry, in order, after its deletion.
    public func execute(
        _ entries: some Sequence<CleanupEntry>, log: EventLog, _ each: (CleanupOutcome) -> Void = { _ in }
    ) throws(ContainerError) -> CleanupSummary {
        var executor = CleanupExecutor(plan: self, log: log, dryRun: false)
        do {
            for entry in entries { each(try executor.run(entry)) }
        } catch {
            try? executor.flush()
            throw error
        }
        try executor.flush()
        return executor.summary
    }
}

/// Deletes planned entries one at a time and logs them in batches.
private struct CleanupExecutor {
    let plan: CleanupPlan
    let log: EventLog
    let dryRun: Bool
    var summary = CleanupSummary()
    /// Records of deletions made but not yet logged: written every 256 and at the end.
    var pending: [Event] = []
    /// The folder of the last entry, kept open for the next: most entries share it.
    var parent: (components: [FileName], folder: SharedDescriptor)?

    init(plan: CleanupPlan, log: EventLog, dryRun: Bool) {
        self.plan = plan
        self.log = log
        self.dryRun = dryRun
    }

    mutating func run(_ entry: CleanupEntry) throws(ContainerError) -> CleanupOutcome {
        let container = plan.container
        let relative = entry.relativePath(appName: container.appName)
        let path = Array(container.root.utf8) + [0x2F] + relative
        let result = dryRun ? .planned : delete(entry, shown: String(decoding: path, as: UTF8.self))
        summary.planned += 1
        switch result {
        case .deleted:
            summary.deleted += 1
            summary.bytesFreed += entry.bytes
            pending.append(
                Event(
                    .deleted,
                    ["path": .path(relative), "reason": .string(entry.reason), "size": .int(entry.bytes)]))
            if pending.count >= 256 { try flush() }
        case .failed(let error):
            summary.failed += 1
            summary.firstFailure = summary.firstFailure ?? error
        case .planned, .gone, .changed:
            break
        }
        return CleanupOutcome(entry: entry, path: path, result: result)
    }

    mutating func flush() throws(ContainerError) {
        guard !pending.isEmpty else { return }
        try log.append(pending)
        pending.removeAll(keepingCapacity: true)
    }

    /// Deletes the entry if its name still holds the file planned; a folder goes with everything in it.
    private mutating func delete(_ entry: CleanupEntry, shown: String) -> CleanupOutcome.Result {
        guard let name = entry.components.last else { return .gone }
        let folderComponents =
            entry.place.relativePath(appName: plan.container.appName).split(separator: "/").compactMap {
                FileName(String($0))
            } + entry.components.dropLast()
        if parent?.components != folderComponents {
            parent = nil
            do {
                parent = (folderComponents, SharedDescriptor(try plan.container.openFolder(folderComponents)))
            } catch {
                return error.cause == .noSuchFile ? .gone : .failed(error)
            }
        }
        guard let folder = parent?.folder.rawValue else { return .gone }
        let failed = { (error: Errno) -> CleanupOutcome.Result in
            error == .noSuchFile ? .gone : .failed(error.failure("delete", shown))
        }
        let status: FileStatus
        do {
            status = try fileStatus(in: folder, name)
        } catch {
            return failed(error)
        }
        guard status.device == entry.device, status.inode == entry.inode else { return .changed }
        do {
            guard status.kind == .directory else {
                try system_unlinkat(folder, name)
                return .deleted
            }
            let opened: FileDescriptor
            do {
                opened = try FileDescriptor(at: folder, name, [.directory, .noFollow])
            } catch .tooManySymbolicLinks, .notDirectory {
                return .changed  // replaced by a link or a file since it was checked
            }
            guard try opened.fileStatus().isSameFile(as: status) else { return .changed }
            opened.allowRemoval(status)
            try opened.removeContents(device: status.device)
            try system_unlinkat(folder, name, removeDirectory: true)
            return .deleted
        } catch {
            return failed(error)
        }
    }
}

extension Watcher {
    /// Applies the cleanup policy of the container's preferences; a watcher holds the lock, so the app runs.
    func applyCleanupPolicy() {
        do throws(ContainerError) {
            let plan = CleanupPlan(
                container: inbox.container, policy: try Preferences.load(inbox.container), appIsRunning: true)
            let summary = try plan.execute(log: inbox.log, shouldStop: { [queue] in queue.isStopped }, { _ in })
            if summary.deleted > 0 {
                report("cleanup deleted \(summary.deleted) entries (\(summary.bytesFreed) bytes)")
            }
            if let failure = summary.firstFailure {
                report("cleanup could not delete \(summary.failed) entries: \(failure.message)")
            }
        } catch {
            report("cleanup failed: \(error.message)")
        }
    }
}

/// The one line a long clean keeps up to date on a terminal, `inbox: cleaning… 53,120 entries checked`,
/// redrawn in place with `\r` at most once per `interval`. Nothing is written when the output is not a
/// terminal, nor by a clean that ends within the first `interval`.
public final class CleanupProgress {
    public let isTerminal: Bool
    public let interval: Duration
    /// How many entries have been checked.
    public private(set) var checked = 0
    private let write: (String) -> Void
    private let clock: () -> Duration
    private let start: Duration
    private var lastDrawn: Duration?
    private var shown = false

    /// - Parameters:
    ///   - isTerminal: whether to draw at all.
    ///   - clock: a monotonic time; the default is `ContinuousClock`'s.
    ///   - write: writes text to the terminal as it is, without adding a newline.
    public init(
        isTerminal: Bool, interval: Duration = .milliseconds(100), clock: (() -> Duration)? = nil,
        write: @escaping (String) -> Void
    ) {
        self.isTerminal = isTerminal
        self.interval = interval
        let origin = ContinuousClock.now
        let clock = clock ?? { ContinuousClock.now - origin }
        self.clock = clock
        self.write = write
        start = clock()
    }

    /// Progress on standard error, drawn only when it is a terminal (`isatty(2)`).
    public static func standardError() -> CleanupProgress {
        CleanupProgress(isTerminal: isatty(STDERR_FILENO) == 1) { text in
            let output = FileDescriptor(owning: STDERR_FILENO)
            try? output.writeAll(Array(text.utf8))
            _ = output.release()
        }
    }

    /// Counts one more entry checked, and redraws the line when `interval` has passed since it was last drawn
    /// (or since the start).
    public func tick() {
        checked += 1
        guard isTerminal else { return }
        let now = clock()
        guard now - (lastDrawn ?? start) >= interval else { return }
        lastDrawn = now
        shown = true
        write("\rinbox: cleaning… \(Self.grouped(checked)) entries checked")
    }

    /// Erases the line, if drawn, so other output can follow; the next redraw brings it back.
    public func clear() {
        guard shown else { return }
        shown = false
        write("\r\u{1B}[K")
    }

    /// `53120` as `53,120`.
    static func grouped(_ number: Int) -> String {
        var digits = String(number.magnitude)
        var index = digits.endIndex
        while digits.distance(from: digits.startIndex, to: index) > 3 {
            index = digits.index(index, offsetBy: -3)
            digits.insert(",", at: index)
        }
        return number < 0 ? "-" + digits : digits
    }
}
