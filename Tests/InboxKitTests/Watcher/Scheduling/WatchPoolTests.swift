import AppContainer
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// The threads that take the turns of many watchers (ARCHITECTURE.md, "Many containers").
@Suite(.serialized) struct WatchPoolTests {
    /// Which container each settled batch was from, in order, and how many arrivals it had.
    final class Settled: Sendable {
        let batches = Mutex<[(container: String, count: Int)]>([])

        func options(_ container: String, then: @escaping @Sendable () -> Void = {}) -> WatchOptions {
            var options = WatchOptions()
            options.onArrival = .move
            options.cleanInterval = nil
            options.onSettled = { [self] arrivals in
                batches.withLock { $0.append((container, arrivals.count)) }
                then()
                return true
            }
            return options
        }

        func count(_ container: String) -> Int {
            batches.withLock { $0.filter { $0.container == container }.map(\.count).reduce(0, +) }
        }
    }

    /// With one thread for both, a backlog of thousands in one container waits while a file that comes to the
    /// other meanwhile is handled: the backlog's scan gives way between batches.
    @Test func aBacklogInOneContainerDoesNotStarveAnother() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let busy = try Scratch.withInbox()
        let quiet = try Scratch.withInbox()
        defer {
            busy.remove()
            quiet.remove()
        }
        let backlog = 2_000
        for index in 0..<backlog {
            try Data("\(index)\n".utf8).write(to: URL(fileURLWithPath: busy.inboxPath("f\(index).txt")))
        }
        let settled = Settled()
        let dropped = Atomic<Bool>(false)
        // When the backlog's first batch is settled, a file comes to the quiet container.
        let busyWatcher = Watcher(
            inbox: busy.inbox,
            options: settled.options("busy") {
                guard !dropped.exchange(true, ordering: .relaxed) else { return }
                let made = FileManager.default.createFile(
                    atPath: quiet.inboxPath("letter.txt"), contents: Data("hi\n".utf8))
                precondition(made, "the quiet container's file could be made")
            })
        let quietWatcher = Watcher(inbox: quiet.inbox, options: settled.options("quiet"))
        let pool = WatchPool(threads: 1, maxThreads: 1)
        let ended = DispatchSemaphore(value: 0)
        let failures = Mutex<[ContainerError]>([])
        for watcher in [quietWatcher, busyWatcher] {
            pool.add(watcher) { failure in
                if let failure { failures.withLock { $0.append(failure) } }
                ended.signal()
            }
        }
        let done = waitUntil(timeout: 120, interval: 0.001) {
            settled.count("busy") == backlog && settled.count("quiet") == 1
        }
        #expect(done, "every file settled")
        busyWatcher.stop()
        quietWatcher.stop()
        for _ in 0..<2 { ended.wait() }
        pool.close()
        #expect(failures.withLock { $0 }.isEmpty)

        // The quiet container's file came before the backlog was through.
        let order = settled.batches.withLock { $0 }
        let quietAt = try #require(order.firstIndex { $0.container == "quiet" })
        let busyBefore = order[..<quietAt].filter { $0.container == "busy" }.map(\.count).reduce(0, +)
        #expect(
            busyBefore < backlog,
            "the quiet file waited for \(busyBefore) of \(backlog): \(order.map { "\($0.container) \($0.count)" })")
        // Nothing lost: every file is in Documents, once.
        let documents = try FileManager.default.contentsOfDirectory(atPath: busy.container.path(.documents))
        #expect(documents.filter { $0.hasPrefix("f") }.count == backlog)
        #expect(FileManager.default.fileExists(atPath: quiet.documentsPath("letter.txt")))
        for scratch in [busy, quiet] {
            #expect(try scratch.inboxEntries().filter { !$0.hasPrefix(".") }.isEmpty)
        }
    }

    /// A scan stopped between batches (it gave way) is not a whole scan, even when the answer to "stop?" has changed
    /// by the time the walk ends (another pool thread fell idle): it logs no `rescan`, so the session asks for it
    /// again, and the files it never reached are not left for the periodic scan, minutes later.
    @Test func aScanStoppedBetweenBatchesIsNotAWholeScan() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        for index in 0..<6 {
            try Data("\(index)\n".utf8).write(to: URL(fileURLWithPath: scratch.inboxPath("f\(index).txt")))
        }
        var options = WatchOptions()
        options.onArrival = .move
        options.cleanInterval = nil
        options.maxBatch = 2
        let pipeline = try ArrivalPipeline(inbox: scratch.inbox, options: options, handler: nil, wake: {})
        // Stop after the first batch; asked again, go on.
        var answers = [true]
        var handled = 0
        try pipeline.scan(
            reason: "test", stop: { answers.isEmpty ? false : answers.removeFirst() },
            handle: { names throws(ContainerError) in
                handled += names.count
                _ = try pipeline.process(names)
            })
        #expect(handled == 2)
        #expect(try scratch.inbox.log.records(kinds: [.rescan]).isEmpty)
        #expect(try scratch.documentsEntries().count == 2)
        #expect(try scratch.inboxEntries().count == 4)
    }

    /// A kept Inbox's scan starts over from the same first entries each time it is asked for; it still gets to its
    /// end, and every kept file arrives once, while the other container always has work waiting.
    @Test func aKeptInboxScanGetsToItsEndWhileAnotherAlwaysWaits() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let kept = try Scratch.withInbox()
        let busy = try Scratch.withInbox()
        defer {
            kept.remove()
            busy.remove()
        }
        let backlog = 2_000
        for index in 0..<backlog {
            try Data("\(index)\n".utf8).write(to: URL(fileURLWithPath: kept.inboxPath("k\(index).txt")))
        }
        let settled = Settled()
        let made = Atomic<Int>(0)
        // Every batch of the kept Inbox's scan brings the other container a file: it always waits for a turn.
        var keepOptions = settled.options("kept") {
            let number = made.add(1, ordering: .relaxed).newValue
            _ = FileManager.default.createFile(atPath: busy.inboxPath("b\(number).txt"), contents: Data("b\n".utf8))
        }
        keepOptions.onArrival = .keep
        let keptWatcher = Watcher(inbox: kept.inbox, options: keepOptions)
        let busyWatcher = Watcher(inbox: busy.inbox, options: settled.options("busy"))
        let pool = WatchPool(threads: 1, maxThreads: 1)
        let ended = DispatchSemaphore(value: 0)
        for watcher in [busyWatcher, keptWatcher] { pool.add(watcher) { _ in ended.signal() } }
        let scanned = waitUntil(timeout: 120, interval: 0.001) {
            ((try? kept.inbox.log.records(kinds: [.rescan])) ?? []).isEmpty == false
        }
        #expect(scanned, "the kept Inbox's start-up scan got to its end")
        // The scan's `rescan` record may be written before its last batch is handed on.
        #expect(waitUntil(timeout: 60, interval: 0.001) { settled.count("kept") >= backlog }, "each kept file arrived")
        keptWatcher.stop()
        busyWatcher.stop()
        for _ in 0..<2 { ended.wait() }
        pool.close()
        #expect(settled.count("kept") == backlog, "each kept file arrived once")
    }

    /// A pool whose syncer's threads cannot be made says so, and its sessions fsync in their own turns: a file still
    /// reaches Documents, with its records.
    @Test func aPoolWithoutItsSyncerSaysSoAndStillMoves() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try Data("hi\n".utf8).write(to: URL(fileURLWithPath: scratch.inboxPath("letter.txt")))
        let reports = Mutex<[String]>([])
        let plan = SyscallFaultPlan(failing: 1, only: "pthread_create", with: Errno(rawValue: EAGAIN))
        let pool = plan.run {
            WatchPool(threads: 1, maxThreads: 1, report: { line in reports.withLock { $0.append(line) } })
        }
        #expect(plan.injected?.name == "pthread_create")
        #expect(!pool.syncsBeside)
        let lines = reports.withLock { $0 }
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.hasPrefix("fsyncing each container's folders in its own turns") == true, "\(lines)")
        let settled = Settled()
        let watcher = Watcher(inbox: scratch.inbox, options: settled.options("only"))
        let ended = DispatchSemaphore(value: 0)
        let failure = Mutex<ContainerError?>(nil)
        pool.add(watcher) { error in
            failure.withLock { $0 = error }
            ended.signal()
        }
        let moved = waitUntil(timeout: 60, interval: 0.001) { settled.count("only") == 1 }
        #expect(moved, "the file settled")
        watcher.stop()
        ended.wait()
        pool.close()
        #expect(failure.withLock { $0 } == nil)
        #expect(FileManager.default.fileExists(atPath: scratch.documentsPath("letter.txt")))
        #expect(try scratch.inbox.log.records(kinds: [.moved]).count == 1)
    }

    /// A fsync that fails on the syncer's thread ends its session though nothing more comes for it: the failed answer
    /// wakes the session, whose next scan is minutes away, and which reads no settled arrivals that would wake it. The
    /// file comes after the start-up scan, whose checkpoint would wait for the answer.
    @Test func aFailedFsyncBesideTheTurnsEndsTheSessionWithNothingElseToDo() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // Inherited by the syncer's threads, which the pool starts now; its own threads start later, from this
        // thread, outside the plan: the fsync fails there, not in a turn.
        let plan = SyscallFaultPlan(failing: 1, only: "fsync", with: .ioError, inherited: true)
        let pool = plan.run { WatchPool(threads: 1, maxThreads: 1) }
        var options = WatchOptions()
        options.onArrival = .move
        options.cleanInterval = nil
        options.streamsArrivals = false
        let watcher = Watcher(inbox: scratch.inbox, options: options)
        let ended = DispatchSemaphore(value: 0)
        let failure = Mutex<ContainerError?>(nil)
        pool.add(watcher) { error in
            failure.withLock { $0 = error }
            ended.signal()
        }
        let scanned = waitUntil(timeout: 60, interval: 0.001) {
            ((try? scratch.inbox.log.records(kinds: [.rescan])) ?? []).isEmpty == false
        }
        #expect(scanned, "the start-up scan got to its end")
        // Renamed in: one event, one turn.
        let staged = scratch.outside("letter.txt")
        try Data("hi\n".utf8).write(to: URL(fileURLWithPath: staged))
        #expect(rename(staged, scratch.inboxPath("letter.txt")) == 0)
        #expect(ended.wait(timeout: .now() + 60) == .success, "the session ended on the syncer's failure")
        #expect(plan.injected?.name == "fsync", "\(plan.summary)")
        let error = failure.withLock { $0 }
        #expect(error?.cause == .ioError, "\(error?.message ?? "no failure")")
        pool.close()
        // Renamed before its folders' fsync failed: in Documents, its `moved` record left to recovery.
        #expect(FileManager.default.fileExists(atPath: scratch.documentsPath("letter.txt")))
        #expect(try scratch.inbox.log.records(kinds: [.moved]).isEmpty)
    }
}
