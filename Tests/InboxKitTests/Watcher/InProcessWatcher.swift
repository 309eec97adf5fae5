import Dispatch
import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// A `Watcher` run in the test's own process, on a thread of its own, as `inbox watch` runs one, or in a pool, as
/// `inbox watch --root` does; stopped (and its run waited for) by `stop()` or at the end of the test. (A watcher run
/// as its own process, `inbox watch`, is CLITests' `WatchProcess`.)
final class InProcessWatcher {
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
        try #require(waitUntil(timeout: 30, interval: 0.001) { (try? log.records(kinds: [mark]).isEmpty) == false })
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
