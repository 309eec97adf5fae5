import AppContainer
import Dispatch
import Foundation
import InboxKit
import Synchronization
import Testing

/// The watcher as a library user runs it: in-process, with a handler and the stream of arrivals.
/// Serialized: libinotifytools has one global instance, so a process runs one watcher at a time.
@Suite(.serialized) struct WatcherLibraryTests {
    /// Moves PDFs into Documents, deletes `.tmp` files, keeps the rest, and remembers what it saw.
    final class Sorter: ArrivalHandler {
        let seen = Mutex<[String: String]>([:])

        func handle(_ arrival: Arrival) -> Disposition {
            seen.withLock { $0[arrival.item.name.string] = arrival.type }
            if arrival.item.name.string.hasSuffix(".tmp") { return .delete }
            return arrival.type == "pdf" ? .move : .keep
        }
    }

    @Test func aHandlerDecidesAndTheStreamYieldsEveryArrival() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let sorter = Sorter()
        let watcher = Watcher(inbox: scratch.inbox, handler: sorter)
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<ContainerError?>(nil)
        Thread.detachNewThread {
            do throws(ContainerError) { try watcher.run() } catch { failure.withLock { $0 = error } }
            finished.signal()
        }
        let streamed = Task {
            var names: [String] = []
            for await arrival in watcher.arrivals {
                names.append(arrival.item.name.string)
                if names.count == 3 { break }
            }
            return names.sorted()
        }
        let started = try await waitFor { try scratch.inbox.log.records(kinds: ["watch-started"]).count == 1 }
        #expect(started)
        _ = try scratch.inbox.deliver(data: Data("%PDF-1.4\n%%EOF\n".utf8), suggestedName: "invoice.pdf")
        _ = try scratch.inbox.deliver(data: Data("notes\n".utf8), suggestedName: "notes.txt")
        _ = try scratch.inbox.deliver(data: Data("scratch\n".utf8), suggestedName: "junk.tmp")
        #expect(await streamed.value == ["invoice.pdf", "junk.tmp", "notes.txt"])
        let settled = try await waitFor {
            try scratch.inbox.log.records(kinds: ["moved", "deleted"]).count == 2
        }
        watcher.stop()
        finished.wait()
        #expect(settled)
        #expect(failure.withLock { $0 } == nil)
        #expect(sorter.seen.withLock { $0 } == ["invoice.pdf": "pdf", "notes.txt": "text", "junk.tmp": "text"])
        #expect(exists(scratch.documentsPath("invoice.pdf")))
        #expect(try scratch.inboxEntries() == ["notes.txt"])
        let handled = try scratch.inbox.log.records(kinds: ["handled"])
        #expect(handled.count == 3)
        #expect(handled.allSatisfy { $0.fields["handler"] == "library" })
    }

    @Test func aSecondWatcherInTheSameProcessIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let first = Watcher(inbox: scratch.inbox)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            try? first.run()
            finished.signal()
        }
        defer {
            first.stop()
            finished.wait()
        }
        let deadline = Date().addingTimeInterval(30)
        while try scratch.inbox.log.records(kinds: ["watch-started"]).isEmpty, Date() < deadline { usleep(20_000) }
        let other = try Scratch()
        defer { other.remove() }
        #expect(throws: ContainerError.self) { try Watcher(inbox: other.inbox).run() }
    }

    /// Polls `condition` every 20 ms for up to 30 s.
    private func waitFor(_ condition: () throws -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if try condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try condition()
    }
}
