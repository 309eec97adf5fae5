import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// The library as a user sees it with `import InboxKit` alone: the types its API uses, errors that say what
/// happened, signals given back, and arrivals that say what became of the file.
@Suite(.serialized) struct LibraryAPITests {
    /// A throwaway container in a temporary folder.
    private func container() throws -> (Container, String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-api-\(UUID().uuidString)")
        let container = try Container.create(at: folder.path + "/app", appName: "API")
        return (container, folder.path)
    }

    @Test func theTypesTheAPIUsesComeWithInboxKitAndErrorsDescribeThemselves() throws {
        let (container, folder) = try container()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let inbox = try Inbox(container: container)
        let name: FileName? = FileName("report.pdf")
        #expect(name != nil)
        do {
            _ = try inbox.deliver(contentsOf: URL(string: "https://example.org/report.pdf")!)
            Issue.record("a web URL was delivered")
        } catch {
            #expect(error.code == .usage)
            let described = (error as any Error).localizedDescription
            #expect(described.contains("not a file URL"), "\(described)")
            #expect(!described.contains("The operation could not be completed"))
        }
    }

    @Test func theSignalsAreGivenBackWhenTheWatcherStops() async throws {
        await SignalTurns.take()
        defer { SignalTurns.give() }
        let (container, folder) = try container()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = WatchOptions()
        options.once = true
        let watcher = Watcher(inbox: try Inbox(container: container), options: options)
        var before = sigaction()
        sigaction(SIGINT, nil, &before)
        try watcher.stopOnTerminationSignals()
        var during = sigaction()
        sigaction(SIGINT, nil, &during)
        let handler = { (action: sigaction) in unsafeBitCast(action.__sigaction_handler.sa_handler, to: Int.self) }
        #expect(handler(during) != handler(before), "caught while the watcher runs")
        try await watcher.run()
        var after = sigaction()
        sigaction(SIGINT, nil, &after)
        #expect(handler(after) == handler(before), "SIGINT is handled as it was before")
        #expect(handler(after) != unsafeBitCast(SIG_IGN, to: Int.self))
    }

    /// Moves PDFs, deletes `.tmp`, keeps the rest.
    struct Sorter: ArrivalHandler {
        func handle(_ arrival: Arrival) -> Disposition {
            #expect(arrival.disposition == nil, "undecided while the handler decides")
            if arrival.item.name.string.hasSuffix(".tmp") { return .delete }
            return arrival.type == "pdf" ? .move : .keep
        }
    }

    @Test func anArrivalOnTheStreamSaysWhatBecameOfTheFileAndWhereItIs() async throws {
        let (container, folder) = try container()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let inbox = try Inbox(container: container)
        _ = try inbox.deliver(data: Data("%PDF-1.4\n%%EOF\n".utf8), suggestedName: "invoice.pdf")
        _ = try inbox.deliver(data: Data("notes\n".utf8), suggestedName: "notes.txt")
        _ = try inbox.deliver(data: Data("scratch\n".utf8), suggestedName: "junk.tmp")
        var options = WatchOptions()
        options.once = true
        let watcher = Watcher(inbox: inbox, options: options, handler: Sorter())
        try await watcher.run()
        var seen: [String: Arrival] = [:]
        for await arrival in watcher.arrivals { seen[arrival.item.name.string] = arrival }
        #expect(seen["invoice.pdf"]?.disposition == .move)
        #expect(seen["invoice.pdf"]?.url?.path == container.root + "/Documents/invoice.pdf")
        #expect(try Data(contentsOf: #require(seen["invoice.pdf"]?.url)) == Data("%PDF-1.4\n%%EOF\n".utf8))
        #expect(seen["notes.txt"]?.disposition == .keep)
        #expect(seen["notes.txt"]?.url?.path == container.root + "/Documents/Inbox/notes.txt")
        #expect(seen["junk.tmp"]?.disposition == .delete)
        #expect(seen["junk.tmp"]?.url == nil)
    }

    /// Asks an actor before it answers: PDFs move, the rest stay.
    actor Ledger {
        var asked: [String] = []
        func note(_ name: String) { asked.append(name) }
    }

    struct AwaitingSorter: AsyncArrivalHandler {
        let ledger: Ledger
        func handle(_ arrival: Arrival) async -> Disposition {
            await ledger.note(arrival.item.name.string)
            return arrival.type == "pdf" ? .move : .keep
        }
    }

    @Test func theWatcherRunsInATaskWithAnAsyncHandlerAndStopsWhenTheTaskIsCancelled() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let (container, folder) = try container()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let inbox = try Inbox(container: container)
        let ledger = Ledger()
        let watcher = Watcher(inbox: inbox, asyncHandler: AwaitingSorter(ledger: ledger))
        let running = Task { try await watcher.run() }
        // The README's pattern: a task reads the arrivals while the watcher runs; neither blocks the other.
        let reader = Task {
            var names: [String] = []
            for await arrival in watcher.arrivals {
                names.append(arrival.item.name.string)
                if names.count == 2 { break }
            }
            return names.sorted()
        }
        let log = try EventLog(container: container)
        let deadline = Date().addingTimeInterval(30)
        while try log.records(kinds: [.watchStarted]).isEmpty, Date() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        _ = try inbox.deliver(data: Data("%PDF-1.4\n%%EOF\n".utf8), suggestedName: "invoice.pdf")
        _ = try inbox.deliver(data: Data("notes\n".utf8), suggestedName: "notes.txt")
        #expect(await reader.value == ["invoice.pdf", "notes.txt"])
        #expect(await ledger.asked.sorted() == ["invoice.pdf", "notes.txt"])
        running.cancel()
        try await running.value
        #expect(try log.records(kinds: [.watchStopped]).count == 1, "cancelling the task stopped it")
        #expect(FileManager.default.fileExists(atPath: container.root + "/Documents/invoice.pdf"))
    }
}
