import AppContainer
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// `WatchOptions.streamsArrivals`: a watcher whose stream nobody reads copies no arrival into it and holds none.
@Suite(.serialized) struct UnstreamedArrivalsTests {
    @Test(arguments: [true, false])
    func settledArrivalsReachTheStreamOnlyWhenItIsOn(streams: Bool) async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        for name in ["a.txt", "b.txt", "c.txt"] {
            _ = try scratch.inbox.deliver(data: Data("\(name)\n".utf8), suggestedName: name)
        }
        let settled = Mutex<[String]>([])
        var options = WatchOptions()
        options.once = true
        options.onArrival = .move
        options.streamsArrivals = streams
        options.onSettled = { arrivals in
            settled.withLock { $0 += arrivals.map(\.item.name.string) }
            return true
        }
        let watcher = Watcher(inbox: scratch.inbox, options: options)
        try await watcher.run()
        var streamed: [String] = []
        for await arrival in watcher.arrivals { streamed.append(arrival.item.name.string) }
        #expect(streamed.sorted() == (streams ? ["a.txt", "b.txt", "c.txt"] : []))
        #expect(settled.withLock { $0 }.sorted() == ["a.txt", "b.txt", "c.txt"], "settled either way")
        #expect(try scratch.inbox.log.records(kinds: [.moved]).count == 3)
        #expect(try scratch.inboxEntries().isEmpty)
    }

    @Test func aFleetsWatchersMoveAndStreamNothing() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let root = scratch.outside("root")
        let inboxes = try ["one", "two"].map { name in
            try Inbox(container: Container.create(at: root + "/" + name, appName: name))
        }
        var options = WatchOptions()
        options.onArrival = .move
        let fleet = WatcherFleet(root: root, options: options)
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<ContainerError?>(nil)
        Thread.detachNewThread {
            do throws(ContainerError) { try fleet.run() } catch { failure.withLock { $0 = error } }
            finished.signal()
        }
        let paths = inboxes.map(\.container.root).sorted()
        #expect(waitUntil(timeout: 30, interval: 0.001) { fleet.served == paths }, "both served")
        for inbox in inboxes { _ = try inbox.deliver(data: Data("x\n".utf8), suggestedName: "x.txt") }
        #expect(
            waitUntil(timeout: 30, interval: 0.001) {
                inboxes.allSatisfy { (try? $0.log.records(kinds: [.moved]).count) == 1 }
            }, "each container's file moved")
        let watchers = paths.compactMap { fleet.watcher(serving: $0) }
        fleet.stop()
        finished.wait()
        #expect(failure.withLock { $0 } == nil)
        // Each stream has ended (at its watcher's stop, if not before): what it holds is all it would ever give.
        #expect(watchers.count == 2)
        for watcher in watchers {
            var streamed = 0
            for await _ in watcher.arrivals { streamed += 1 }
            #expect(streamed == 0, "\(watcher.inbox.container.root): nothing on its stream")
        }
    }
}
