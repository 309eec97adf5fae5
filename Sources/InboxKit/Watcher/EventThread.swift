import AppContainer
import Foundation
import Glibc
import Synchronization

/// The one thread that talks to libinotifytools. It watches the Inbox folder and turns events into
/// names and rescans on the `WatchQueue`; when the folder is deleted, moved or recreated it starts over:
/// cleanup, initialise, recreate the folder if it is missing, watch again, then ask for a rescan.
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
                if event.name == Array("Inbox".utf8) { restart(reason: "inbox replaced") }
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

    /// Watches the Inbox folder, creating it first when it is missing, and its parent.
    private func watchInbox() throws(ContainerError) {
        let parent = String(inboxPath[..<(inboxPath.lastIndex(of: "/") ?? inboxPath.endIndex)])
        do {
            let parentWatch = try Inotify.watch(parent, .inboxParent)
            state.withLock { $0.parentWatch = parentWatch }
        } catch {
            throw error.failure("watch", parent)
        }
        do {
            _ = try Inotify.watch(inboxPath, .inbox)
        } catch .noSuchFile {
            do {
                try system_mkdirat(currentDirectory, inboxPath, mode: 0o755)
            } catch .fileExists {
            } catch {
                throw error.failure("recreate the Inbox", inboxPath)
            }
            do { _ = try Inotify.watch(inboxPath, .inbox) } catch { throw error.failure("watch", inboxPath) }
        } catch {
            throw error.failure("watch", inboxPath)
        }
    }
}
