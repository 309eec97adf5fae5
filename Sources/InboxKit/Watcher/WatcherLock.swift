import AppContainer
import FoundationEssentials
import Glibc

/// One watcher per container (ARCHITECTURE.md, "One watcher per container"): an exclusive `flock` on `watch.lock`
/// in the state folder, held for the watcher's life, with the holder's pid written inside for others to name. The
/// lock is the file, and a second watcher opens the name: so the name is checked to still hold the locked file
/// once it is taken, and again before each batch (`state`).
package final class WatcherLock: @unchecked Sendable {
    // Unchecked: nothing changes after `init`, and the descriptor is only read.
    private let file: FileDescriptor
    private let path: [UInt8]

    static func path(_ container: Container) -> [UInt8] { container.statePath("watch.lock") }

    /// Takes the lock, or fails with exit status 75 naming the watcher that holds it.
    init(container: Container) throws(ContainerError) {
        path = Self.path(container)
        file = try Self.take(path, container)
        // Another path to the same file (a FUSE mount and its backing folder) takes its own `flock`: the text tells.
        if let holder = Self.writtenHolder(file.rawValue), holder.isAnotherLiveWatcher {
            throw Self.heldElsewhere(by: holder, container)
        }
        do {
            // Written over the old holder, then cut to length: the file is never empty for a reader.
            let text = LockHolder.current.text
            try file.writeAll(text, at: 0)
            try system_ftruncate(file.rawValue, Int64(text.count))
        } catch {
            throw error.failure("write the watcher pid to", path)
        }
    }

    /// Open, lock, then compare: a name unlinked or replaced meanwhile holds another file, which the next watcher
    /// would lock too, so the name is opened again.
    private static func take(_ path: [UInt8], _ container: Container) throws(ContainerError) -> FileDescriptor {
        for _ in 0..<100 {
            let file = try openLocked(path, container)
            if state(of: file.rawValue, named: path) == .held { return file }
        }
        throw ContainerError(
            .busy,
            "'\(String(decoding: path, as: UTF8.self))' keeps being removed or replaced: try again once it holds still")
    }

    /// Opens the file at `path` and takes its `flock`.
    private static func openLocked(_ path: [UInt8], _ container: Container) throws(ContainerError) -> FileDescriptor {
        let file = try open(path)
        do {
            try system_flock(file.rawValue, LOCK_EX | LOCK_NB)
        } catch .wouldBlock {
            let pid = (lockingPid(file.rawValue) ?? writtenPid(file.rawValue)).map(String.init) ?? "unknown"
            throw ContainerError(.busy, "another watcher (pid \(pid)) holds '\(container.root)'; stop it first")
        } catch {
            throw error.failure("lock", path)
        }
        return file
    }

    private static func open(_ path: [UInt8]) throws(ContainerError) -> FileDescriptor {
        do {
            return try FileDescriptor(path, [.readWrite, .create, .noFollow], mode: 0o644)
        } catch {
            throw error.failure("open the watcher lock", path)
        }
    }

    /// What became of a lock taken.
    enum State: Equatable {
        /// The name holds the locked file: no other watcher can take the container.
        case held
        /// The file still has a name, but not this one (the container was renamed, or the name could not be read):
        /// another watcher could take the name, so no batch is handled, but what was begun may be closed.
        case moved
        /// The file has no name left (unlinked, or replaced by a rename over it): the container is being removed,
        /// or another watcher may hold it. Nothing is written in it any more.
        case lost
    }

    /// Whether the name still holds the locked file, and whether that file still has a name.
    var state: State { Self.state(of: file.rawValue, named: path) }

    /// Takes the `flock` again, which changes nothing while it is held. Across hosts (NFS, SMB) the lock lasts as
    /// long as its lease: one that ran out fails with `EIO` or `ENOLCK` (ARCHITECTURE.md, "Network and FUSE
    /// filesystems"). The failure (75) of a watcher that no longer holds it, or nil.
    var relockFailure: ContainerError? {
        do {
            try system_flock(file.rawValue, LOCK_EX | LOCK_NB)
            // Two watchers that started through two paths at once both wrote: the one written over stops.
            if let holder = Self.writtenHolder(file.rawValue), holder.isAnotherLiveWatcher {
                return Self.heldElsewhere(by: holder, nil)
            }
            return nil
        } catch {
            return ContainerError(
                .busy,
                "cannot hold the watcher lock '\(String(decoding: path, as: UTF8.self))' (\(error)): a watcher on another"
                    + " host may take the container, so this one stops; start it again",
                cause: error)
        }
    }

    /// The failure of a watcher whose lock is no longer held (exit status 75, never logged in the container).
    var lostError: ContainerError {
        ContainerError(
            .busy,
            "the watcher lock '\(String(decoding: path, as: UTF8.self))' was removed or replaced (or the container moved or is being removed), so"
                + " another watcher may hold the container: this one stops; start it again")
    }

    /// `fstat` of the locked file against `lstat` of the name: unreadable counts as not held.
    private static func state(of fd: CInt, named path: [UInt8]) -> State {
        guard let held = try? FileStatus(system_fstat(fd)) else { return .moved }
        guard held.linkCount > 0 else { return .lost }
        guard let named = try? FileStatus(system_lstatat(currentDirectory, path)), named.isSameFile(as: held) else {
            return .moved
        }
        return .held
    }

    /// The holder the lock file names in full, or nil.
    private static func writtenHolder(_ fd: CInt) -> LockHolder? {
        var buffer = [UInt8](repeating: 0, count: 512)
        guard let count = try? buffer.withUnsafeMutableBytes({ raw in try system_pread(fd, into: raw, at: 0) }) else {
            return nil
        }
        return LockHolder(text: Array(buffer[..<count]))
    }

    /// The failure (75) of a watcher that finds another live watcher of this host named in the lock.
    private static func heldElsewhere(by holder: LockHolder, _ container: Container?) -> ContainerError {
        ContainerError(
            .busy,
            "another watcher (pid \(holder.pid)) holds \(container.map { "'\($0.root)'" } ?? "the container") through"
                + " another path to it (its lock there does not reach this one); stop it first")
    }

    /// The pid that holds the `flock` on the open file `fd`, as the kernel tells it in `/proc/locks` (`FlockHolder`):
    /// never stale, unlike the pid written in the file, which a watcher writes a moment after it takes the lock and
    /// which a killed watcher leaves behind. Nil where `/proc/locks` does not say.
    private static func lockingPid(_ fd: CInt) -> Int32? { FlockHolder(holding: fd)?.pid }

    /// The pid in the lock file; a watcher that has just taken the lock writes it a moment later, so it is
    /// waited for (a second at most).
    private static func writtenPid(_ fd: CInt) -> Int32? {
        for _ in 0..<50 {
            var buffer = [UInt8](repeating: 0, count: 32)
            let count = (try? buffer.withUnsafeMutableBytes { raw in try system_pread(fd, into: raw, at: 0) }) ?? 0
            let first = buffer[..<count].prefix { $0 != 0x0A }
            if let pid = Int32(String(decoding: first, as: UTF8.self).trimmingWhitespace), pid > 0 { return pid }
            usleep(20_000)
        }
        return nil
    }

    /// The pid of the watcher holding the container's lock, or nil when none runs.
    package static func holder(of container: Container) -> Int32? {
        guard let file = try? FileDescriptor(path(container), [.readOnly, .noFollow]) else { return nil }
        if (try? system_flock(file.rawValue, LOCK_SH | LOCK_NB)) != nil { return nil }
        if let pid = lockingPid(file.rawValue) { return pid }
        let first = ((try? file.readToEnd()) ?? []).prefix { $0 != 0x0A }
        return Int32(String(decoding: first, as: UTF8.self).trimmingWhitespace) ?? 0
    }
}
