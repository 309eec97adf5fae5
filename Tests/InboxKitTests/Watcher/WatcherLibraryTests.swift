import AppContainer
import Dispatch
import Foundation
import InboxKit
import Synchronization
import TestSupport
import Testing

/// The watcher as a library user runs it: in-process, with a handler and the stream of arrivals.
/// Serialized: one lasting in-process watcher at a time (`InotifySlot`), but for the test of two.
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
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let sorter = Sorter()
        let watcher = Watcher(inbox: scratch.inbox, handler: sorter)
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<ContainerError?>(nil)
        Thread.detachNewThread {
            do throws(ContainerError) { try watcher.runBlocking() } catch { failure.withLock { $0 = error } }
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
        let started = try await waitFor { try scratch.inbox.log.records(kinds: [.watchStarted]).count == 1 }
        #expect(started)
        _ = try scratch.inbox.deliver(data: Data("%PDF-1.4\n%%EOF\n".utf8), suggestedName: "invoice.pdf")
        _ = try scratch.inbox.deliver(data: Data("notes\n".utf8), suggestedName: "notes.txt")
        _ = try scratch.inbox.deliver(data: Data("scratch\n".utf8), suggestedName: "junk.tmp")
        #expect(await streamed.value == ["invoice.pdf", "junk.tmp", "notes.txt"])
        let settled = try await waitFor {
            try scratch.inbox.log.records(kinds: [.moved, .deleted]).count == 2
        }
        watcher.stop()
        finished.wait()
        #expect(settled)
        #expect(failure.withLock { $0 } == nil)
        #expect(sorter.seen.withLock { $0 } == ["invoice.pdf": "pdf", "notes.txt": "text", "junk.tmp": "text"])
        #expect(exists(scratch.documentsPath("invoice.pdf")))
        #expect(try scratch.inboxEntries() == ["notes.txt"])
        let handled = try scratch.inbox.log.records(kinds: [.handled])
        #expect(handled.count == 3)
        #expect(handled.allSatisfy { $0.fields["handler"] == "library" })
    }

    /// On its first call, puts another file over the item's name (as an importer's `mv` would) before
    /// answering `first`; later calls answer `later`.
    final class Overwriter: ArrivalHandler {
        let replacement: String
        let first: Disposition
        let later: Disposition
        let calls = Mutex(0)

        init(replacement: String, first: Disposition, later: Disposition) {
            self.replacement = replacement
            self.first = first
            self.later = later
        }

        func handle(_ arrival: Arrival) -> Disposition {
            guard
                calls.withLock({ calls in
                    defer { calls += 1 }
                    return calls == 0
                })
            else { return later }
            let target = arrival.item.url.path
            #expect(rename(replacement, target) == 0)
            return first
        }
    }

    @Test(arguments: [Disposition.move, .delete])
    func aFileRenamedOverAnItemBeforeItsDispositionIsNeverTakenForIt(first: Disposition) throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("the original\n".utf8), suggestedName: "a.txt")
        try makeFile(scratch.outside("replacement"), Array("the replacement\n".utf8))
        let handler = Overwriter(replacement: scratch.outside("replacement"), first: first, later: .move)
        var options = WatchOptions()
        options.once = true
        options.cleanInterval = nil

        try Watcher(inbox: scratch.inbox, options: options, handler: handler).runBlocking()

        // The disposition was for the original, which the overwrite destroyed: the replacement is untouched.
        #expect(try scratch.inboxEntries() == ["a.txt"])
        #expect(try readFile(scratch.inboxPath("a.txt")) == Array("the replacement\n".utf8))
        #expect(try scratch.documentsEntries().isEmpty)
        #expect(try scratch.inbox.log.records(kinds: [.moved, .deleted]).isEmpty)

        // At the next look it arrives in its own right and is handled.
        try Watcher(inbox: scratch.inbox, options: options, handler: handler).runBlocking()
        #expect(try readFile(scratch.documentsPath("a.txt")) == Array("the replacement\n".utf8))
        let arrived = try scratch.inbox.log.records(kinds: [.arrived]).compactMap { $0.fields["id"] }
        let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["id"] }
        #expect(arrived.count == 2 && Set(arrived).count == 2, "two files, each arrived once")
        #expect(moved == [arrived[1]], "the move names the replacement")
    }

    @Test func aDeletionCutShortGoesBackUnderItsNameAtTheNextStart() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // A crash between the rename aside and the unlink left this; its name is taken again meanwhile.
        try makeFile(scratch.inboxPath(".inbox-delete.b.txt"), Array("aside\n".utf8))
        _ = try scratch.inbox.deliver(data: Data("newer\n".utf8), suggestedName: "b.txt")
        var options = WatchOptions()
        options.once = true
        options.cleanInterval = nil

        try Watcher(inbox: scratch.inbox, options: options).runBlocking()

        #expect(try scratch.inboxEntries() == ["b-1.txt", "b.txt"])
        #expect(try readFile(scratch.inboxPath("b-1.txt")) == Array("aside\n".utf8))
        #expect(try scratch.inbox.log.records(kinds: [.arrived]).count == 2, "both arrive")
    }

    @Test func twoWatchersInOneProcessEachSeeTheirOwnArrivalsAndOneStoppingLeavesTheOther() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratches = [try Scratch.withInbox(), try Scratch.withInbox()]
        defer { for scratch in scratches { scratch.remove() } }
        var options = WatchOptions()
        options.onArrival = .move
        let watchers = scratches.map { Watcher(inbox: $0.inbox, options: options) }
        let finished = watchers.map { _ in DispatchSemaphore(value: 0) }
        for (watcher, done) in zip(watchers, finished) {
            Thread.detachNewThread {
                try? watcher.runBlocking()
                done.signal()
            }
        }
        defer {
            for watcher in watchers { watcher.stop() }
            for done in finished { done.wait() }
        }
        for scratch in scratches {
            #expect(try await waitFor { try !scratch.inbox.log.records(kinds: [.watchStarted]).isEmpty })
        }
        for (number, scratch) in scratches.enumerated() {
            _ = try scratch.inbox.deliver(data: Data("to \(number)".utf8), suggestedName: "note-\(number).txt")
        }
        for (number, scratch) in scratches.enumerated() {
            #expect(try await waitFor { try scratch.documentsEntries().contains("note-\(number).txt") })
            #expect(try scratch.documentsEntries().filter { $0.hasPrefix("note-") } == ["note-\(number).txt"])
        }
        // The first stops; the second still sees what arrives.
        watchers[0].stop()
        finished[0].wait()
        finished[0].signal()  // for the deferred wait
        _ = try scratches[1].inbox.deliver(data: Data("later".utf8), suggestedName: "later.txt")
        #expect(try await waitFor { try scratches[1].documentsEntries().contains("later.txt") })
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
