import AppContainer
import Foundation
import Glibc
import Synchronization

/// The one thread that talks to libinotifytools. It watches the Inbox folder and turns events into
/// names and rescans on the `WatchQueue`; when the Inbox or Documents is deleted, moved or recreated it starts
/// over: cleanup, initialise, recreate the folders if they are missing, watch again, then ask for a rescan
/// (which also reopens the folders by path).
final class EventThread: Sendable {
    let inboxPath: String
    let queue: WatchQueue
    private let state = Mutex(State())
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    private struct State {
        var stopping = false
        var startError: ContainerError?
        /// The watch on Documents, where the Inbox folder itself is deleted or moved.
        var parentWatch: CInt = -1
        /// The watch on the container root, where Documents is deleted or moved.
        var rootWatch: CInt = -1
    }

    init(inboxPath: String, queue: WatchQueue) {
        self.inboxPath = inboxPath
        self.queue = queue
    }

    /// Starts the thread and returns once the Inbox is watched, so nothing that arrives after is missed.
    func start() throws(ContainerError) {
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "inbox-inotify"
        thread.start()
        ready.wait()
        if let error = state.withLock({ $0.startError }) { throw error }
    }

    /// Stops the thread and waits (at most the one-second poll) for it to end.
    func stop() {
        state.withLock { $0.stopping = true }
        finished.wait()
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    private func run() {
        do {
            try Inotify.initialize()
            try watchInbox()
        } catch {
            state.withLock { $0.startError = error }
            ready.signal()
            return
        }
        ready.signal()
        defer { Inotify.cleanup() }
        while !stopping {
            let event: InotifyEvent?
            do {
                event = try Inotify.next(timeoutSeconds: 1)
            } catch {
                // A read error leaves the queue in doubt: start over, and let a scan find what was missed.
                restart(reason: "inotify error: \(error)")
                continue
            }
            guard let event else { continue }
            if event.isOverflow {
                queue.requestRescan("overflow", overflow: true)
            } else if event.watch == state.withLock({ $0.parentWatch }) {
                if event.name == Array("Inbox".utf8) || event.watchEnded { restart(reason: "inbox replaced") }
            } else if event.watch == state.withLock({ $0.rootWatch }) {
                if event.name == Array("Documents".utf8) || event.watchEnded { restart(reason: "documents replaced") }
            } else if event.watchEnded {
                restart(reason: "inbox replaced")
            } else if let name = FileName(bytes: event.name), !name.isHidden {
                queue.push(name)
            }
        }
    }

    /// Forgets the library's stale state and watches the Inbox again, then asks for a rescan.
    private func restart(reason: String) {
        Inotify.cleanup()
        while !stopping {
            do {
                try Inotify.initialize()
                try watchInbox()
                queue.requestRescan(reason)
                return
            } catch {
                Inotify.cleanup()
                usleep(100_000)  // the folder is being replaced; try again shortly
            }
        }
    }

    /// Watches the container root, Documents and the Inbox, creating the last two first when they are missing.
    private func watchInbox() throws(ContainerError) {
        let parent = Self.folder(of: inboxPath)
        let root = Self.folder(of: parent)
        do {
            let rootWatch = try Inotify.watch(root, [.inboxParent, .movedTo])
            state.withLock { $0.rootWatch = rootWatch }
        } catch {
            throw error.failure("watch", root)
        }
        for folder in [parent, inboxPath] {
            do {
                try system_mkdirat(currentDirectory, folder, mode: 0o755)
            } catch .fileExists {
            } catch {
                throw error.failure("recreate", folder)
            }
        }
        do {
            let parentWatch = try Inotify.watch(parent, [.inboxParent, .deleteSelf, .moveSelf])
            state.withLock { $0.parentWatch = parentWatch }
            _ = try Inotify.watch(inboxPath, .inbox)
        } catch {
            throw error.failure("watch", inboxPath)
        }
    }

    /// The folder that holds `path`.
    private static func folder(of path: String) -> String {
        String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
    }
}
