import AppContainer
import Dispatch
import Foundation
import Glibc
import InboxKit
import Synchronization
import TestSupport
import Testing

/// A batch that fails midway, a record that cannot be written, and the order of `delivered` and `arrived`
/// (issue 8, point 4): a file is in the Inbox only together with its `delivered` record.
@Suite struct DeliveryBatchTests {
    @Test func aBatchFailingMidwayLogsWhatItPlacedThenReportsTheError() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.outside("a.txt"), Array("a".utf8))
        try makeFile(scratch.outside("b.txt"), Array("b".utf8))
        let sources: [DeliverySource] = ["a.txt", "missing.txt", "b.txt"].map {
            .file(path: Array(scratch.outside($0).utf8), name: nil)
        }

        let outcome = scratch.inbox.deliverReporting(sources)

        #expect(outcome.delivered.map(\.name.string) == ["a.txt"])
        #expect(outcome.error?.code == .noSuchItem)
        #expect(outcome.error?.message.contains("missing.txt") == true)
        #expect(try scratch.inboxEntries() == ["a.txt"], "b is not attempted, no staging left")
        let delivered = try scratch.inbox.log.records(kinds: [.delivered])
        #expect(delivered.map { $0.fields["path"] } == ["Documents/Inbox/a.txt"])
        expectError(.noSuchItem) { try scratch.inbox.deliver(sources) }
        #expect(try scratch.inboxEntries() == ["a-1.txt", "a.txt"])
        #expect(try scratch.inbox.log.records(kinds: [.delivered]).count == 2)
    }

    @Test func aRecordThatCannotBeWrittenTakesTheFileBackOut() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // Two writes: the file's contents, then the log's record.
        let plan = SyscallFaultPlan(failing: 2, only: "write", with: Errno(rawValue: ENOSPC))

        let source = DeliverySource.data(Data("body".utf8), name: try name("x.txt"))
        let outcome = plan.run { scratch.inbox.deliverReporting([source]) }

        #expect(plan.injected?.name == "write", "\(plan.summary)")
        #expect(outcome.delivered.isEmpty)
        #expect(outcome.error?.code == .ioError)
        #expect(outcome.error?.message.contains("event log") == true, "\(outcome.error?.message ?? "")")
        #expect(try scratch.inboxEntries() == [], "neither the file nor its staging name is left")
        #expect(try scratch.inbox.log.records(kinds: [.delivered]).isEmpty)
        // A retry delivers it once.
        _ = try scratch.inbox.deliver(data: Data("body".utf8), suggestedName: "x.txt")
        #expect(try scratch.inboxEntries() == ["x.txt"])
        #expect(try scratch.inbox.log.records(kinds: [.delivered]).count == 1)
    }

    @Test func aFileThatCannotBeTakenBackOutIsReportedDelivered() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // The record cannot be written, and then the rename that would take the file back out fails too.
        let plan = SyscallFaultPlan(
            failing: 2, only: "write", with: Errno(rawValue: ENOSPC),
            also: (name: "renameat2", call: 2, error: Errno(rawValue: EIO)))

        let source = DeliverySource.data(Data("body".utf8), name: try name("x.txt"))
        let outcome = plan.run { scratch.inbox.deliverReporting([source]) }

        #expect(plan.injected?.name == "write", "\(plan.summary)")
        #expect(outcome.error?.code == .ioError)
        #expect(outcome.delivered.map(\.name.string) == ["x.txt"], "the caller learns it is in the Inbox")
        #expect(try scratch.inboxEntries() == ["x.txt"])
    }
}

extension WatcherLibraryTests {
    /// The watcher runs while batches arrive: each file's `delivered` record comes before its `arrived`.
    @Test func deliveredComesBeforeArrived() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let watcher = Watcher(inbox: scratch.inbox)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? watcher.runBlocking()
            finished.signal()
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while try scratch.inbox.log.records(kinds: [.watchStarted]).isEmpty, ContinuousClock.now < deadline {
            usleep(1_000)
        }
        var names: [String] = []
        for batch in 0..<10 {
            let sources = try (0..<20).map { index in
                DeliverySource.data(
                    Data(pattern(100, seed: UInt64(batch * 100 + index + 1))), name: try name("f\(batch)-\(index).bin"))
            }
            names += try scratch.inbox.deliver(sources).map(\.name.string)
        }
        while try scratch.inbox.log.records(kinds: [.arrived]).count < names.count, ContinuousClock.now < deadline {
            usleep(1_000)
        }
        watcher.stop()
        finished.wait()
        let records = try scratch.inbox.log.records()
        for name in names {
            let path = "Documents/Inbox/" + name
            let delivered = records.first { $0.event == "delivered" && $0.fields["path"] == path }?.seq
            let arrived = records.first { $0.event == "arrived" && $0.fields["path"] == path }?.seq
            #expect(
                delivered != nil && arrived != nil,
                "\(name): delivered \(String(describing: delivered)), arrived \(String(describing: arrived))")
            if let delivered, let arrived { #expect(delivered < arrived, "\(name)") }
        }
    }
}
