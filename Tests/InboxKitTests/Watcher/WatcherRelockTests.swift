import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// The watcher of a polled Inbox takes its `flock` again before each batch: across hosts the lock is a lease, and one
/// that ran out fails with ENOLCK or EIO (ARCHITECTURE.md, "Network and FUSE filesystems"). The watcher then stops
/// with 75 and one line, and nothing is lost. Each `flock` of the watcher's thread fails in turn (a bindfs mount
/// stands for the network filesystem): those of the re-check are told by their line.
@Suite(.serialized) struct WatcherRelockTests {
    @Test(.long, arguments: [Errno.noLocks, Errno.ioError])
    func aFailedRecheckStopsTheWatcherWith75(_ error: Errno) throws {
        let mount = try FuseMount()
        var rechecks = 0
        for call in 1...80 {
            let inbox = try Inbox(container: Container.create(at: mount.mountPoint + "/c\(call)", appName: "Mail"))
            // Another host's file, found by the poll once it has settled.
            let remote = mount.backing + "/c\(call)/Documents/Inbox/remote.txt"
            try Data("remote".utf8).write(to: URL(fileURLWithPath: remote))
            var options = WatchOptions()
            options.onArrival = .move
            options.cleanInterval = nil
            options.singleHost = true
            options.streamsArrivals = false
            options.pollInterval = .milliseconds(100)
            options.settle = .milliseconds(300)
            let watcher = Watcher(inbox: inbox, options: options)
            let plan = SyscallFaultPlan(failing: call, only: "flock", with: error)
            let outcome = Guarded<Result<Void, ContainerError>?>(nil)
            Thread.detachNewThread {
                let result = plan.run { Result { () throws(ContainerError) in try watcher.runBlocking() } }
                outcome.update { $0 = result }
            }
            // Until the run ends, or the remote file has been moved (the faults of later calls are not this test's).
            let moved = { (try? inbox.log.records(kinds: [.moved]).isEmpty) == false }
            _ = waitUntil(timeout: 20, interval: 0.001) { outcome.value != nil || moved() }
            watcher.stop()
            #expect(
                waitUntil(timeout: 30, interval: 0.001) { outcome.value != nil },
                "\(plan.summary): the watcher never stopped")
            let documents = mount.backing + "/c\(call)/Documents/remote.txt"
            let copies = [remote, documents].filter { FileManager.default.fileExists(atPath: $0) }
            #expect(copies.count == 1, "\(plan.summary): the remote file is there \(copies.count) times")
            if case .failure(let failure) = outcome.value, failure.message.contains("cannot hold the watcher lock") {
                rechecks += 1
                #expect(failure.code == .busy, "\(plan.summary): \(failure.message)")
                #expect(failure.cause == error, "\(plan.summary): \(failure.message)")
                #expect(failure.message.contains("\(error)"), "the line says why: \(failure.message)")
                #expect(!failure.message.contains("\n"), "one line: \(failure.message)")
                let lost = watcher.lostLock.load(ordering: .relaxed)
                #expect(lost, "\(plan.summary): the lock is taken for lost")
            }
            if plan.injected == nil { break }
        }
        // The re-check before the start-up scan, and the one before the remote file's batch at least.
        #expect(rechecks >= 2, "the re-check failed \(rechecks) times")
    }
}
