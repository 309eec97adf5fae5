import AppContainer
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import InboxKit

/// A throwaway container (and room beside it for files "outside" it); `remove()` deletes it all.
struct Scratch {
    /// The folder that holds the container and anything the test puts beside it.
    let path: String
    let inbox: Inbox

    var container: Container { inbox.container }

    /// A container in a fresh folder below `root` (the temporary folder, or a FUSE mount point).
    init(under root: String = FileManager.default.temporaryDirectory.path) throws {
        path = root + "/inboxkit-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        inbox = try Inbox(container: Container.create(at: path + "/c", appName: "Mail"))
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A path beside the container, outside it.
    func outside(_ relative: String) -> String { path + "/" + relative }

    func inboxPath(_ name: String) -> String { container.path(.inbox) + "/" + name }

    func documentsPath(_ name: String) -> String { container.path(.documents) + "/" + name }

    /// Renames the Inbox's `name` into Documents as a mover would (a crash set-up), then, with `renamedTo`, renames
    /// it there again as the user might.
    func renameIntoDocuments(_ name: String, renamedTo: String? = nil) throws {
        try system_renameat2(currentDirectory, inboxPath(name), currentDirectory, documentsPath(name), .noReplace)
        if let renamedTo {
            try system_renameat2(
                currentDirectory, documentsPath(name), currentDirectory, documentsPath(renamedTo), .noReplace)
        }
    }

    /// Every name in the Inbox folder, staging names included.
    func inboxEntries() throws -> [String] {
        try FileDescriptor(container.path(.inbox), [.directory]).entries().map(\.string).sorted()
    }

    /// Every name in Documents but the Inbox folder.
    func documentsEntries() throws -> [String] {
        try FileDescriptor(container.path(.documents), [.directory]).entries().map(\.string).filter { $0 != "Inbox" }
            .sorted()
    }

    /// The intent records left in the move journal (its slots between two moves are not).
    func journalEntries() throws -> [String] {
        try MoveJournal(container: container).entriesLeft()
    }
}

/// The status of `path`, never following a symbolic link.
func status(_ path: String) throws -> FileStatus {
    try fileStatus(in: currentDirectory, path)
}

/// Whether anything (a link included) is at `path`.
func exists(_ path: String) -> Bool {
    (try? fileStatus(in: currentDirectory, path)) != nil
}

/// Creates a file at `path` holding `bytes`.
func makeFile(_ path: some CStringConvertible, _ bytes: [UInt8] = [], mode: mode_t = 0o644) throws {
    let file = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: mode)
    try file.writeAll(bytes)
    try system_fchmod(file.rawValue, mode)
}

/// The whole contents of the file at `path`.
func readFile(_ path: some CStringConvertible) throws -> [UInt8] {
    try FileDescriptor(path, [.noFollow]).readToEnd()
}

func name(_ string: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> FileName {
    try #require(FileName(string), sourceLocation: sourceLocation)
}

/// Bytes that differ from offset to offset, so a misplaced or repeated block shows.
func pattern(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

/// Polls `condition` every millisecond until it holds or `seconds` pass; whether it held.
func waitUntil(seconds: Int, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(1_000)
    }
    return condition()
}

/// Expects `body` to throw a `ContainerError` with `code`, and returns it.
@discardableResult
func expectError<R: ~Copyable>(
    _ code: ContainerError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> ContainerError? {
    let error = #expect(throws: ContainerError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error?.code == code, "\(error?.message ?? "no error")", sourceLocation: sourceLocation)
    return error
}

/// A value shared between threads.
final class Guarded<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) { mutex = Mutex(value) }

    func update<R: Sendable>(_ body: @Sendable (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }

    var value: Value { mutex.withLock { $0 } }
}

/// Runs `body(0)`, …, `body(count - 1)` each on its own thread, all let go at the same moment,
/// and returns when every one has finished. Threads, not tasks: the calls block in system calls.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
    let gate = DispatchSemaphore(value: 0)
    let finished = DispatchGroup()
    for index in 0..<count {
        finished.enter()
        let thread = Thread {
            gate.wait()
            body(index)
            finished.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    for _ in 0..<count { gate.signal() }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        finished.notify(queue: .global()) { continuation.resume() }
    }
}

/// One lasting in-process watcher at a time across test targets (they share the process's inotify thread, whose
/// restarts rescan every watcher): a `flock` on a fixed file, held while the value lives (the same helper is in
/// LibraryAPITests).
final class InotifySlot {
    private let fd: CInt

    private init(fd: CInt) {
        self.fd = fd
    }

    /// Waits for the slot without blocking a thread of the cooperative pool, whose other tasks the holder may need.
    static func take() async -> InotifySlot {
        let fd = open("/tmp/inbox-tests-inotify.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o666)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 { try? await Task.sleep(for: .milliseconds(20)) }
        return InotifySlot(fd: fd)
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}

/// `count` files `f0.txt`, … ("file N\n") in a new folder beside the container; returns its path. Each is renamed
/// into the Inbox from there: one arrival each, with no write under way.
func stageFiles(_ scratch: Scratch, count: Int) throws -> String {
    let staging = scratch.outside("staging")
    try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
    for index in 0..<count { try makeFile(staging + "/f\(index).txt", Array("file \(index)\n".utf8)) }
    return staging
}

/// The regular files under `folder` (a path ending in `/`) that this process holds open, by their paths now.
func openDescriptors(under folder: String) -> [String] {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.compactMap { descriptor in
        let link = "/proc/self/fd/\(descriptor)"
        var file = stat()
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link), target.hasPrefix(folder),
            stat(link, &file) == 0, file.st_mode & S_IFMT == S_IFREG
        else { return nil }
        return String(target.dropFirst(folder.count))
    }.sorted()
}

/// The names of this process's threads.
func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A watcher run on a thread of its own, as `inbox watch` runs one, or in a pool, as `inbox watch --root` does;
/// stopped (and its run waited for) by `stop()` or at the end of the test.
final class RunningWatcher {
    let watcher: Watcher
    private let finished = DispatchSemaphore(value: 0)
    private let failure = Guarded<String?>(nil)
    private var ended = false

    /// Runs `watcher` on a thread of its own, or in `pool`: returns once it watches its Inbox (in a pool, once its
    /// start-up scan, asked for when the Inbox is watched, is done).
    init(_ watcher: Watcher, in pool: WatchPool? = nil) throws {
        self.watcher = watcher
        let finished = finished
        let failure = failure
        if let pool {
            pool.add(watcher) { error in
                if let error { failure.update { $0 = "\(error)" } }
                finished.signal()
            }
        } else {
            Thread.detachNewThread {
                do { try watcher.runBlocking() } catch { failure.update { $0 = "\(error)" } }
                finished.signal()
            }
        }
        let log = watcher.inbox.log
        let mark: EventKind = pool == nil ? .watchStarted : .rescan
        try #require(waitUntil(seconds: 30) { (try? log.records(kinds: [mark]).isEmpty) == false })
    }

    /// Stops the watcher and waits for its run to end; returns how it failed, if it did.
    @discardableResult func stop() -> String? {
        if !ended {
            watcher.stop()
            finished.wait()
            ended = true
        }
        return failure.value
    }

    deinit { stop() }
}
