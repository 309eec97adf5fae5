import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// A clean cut short at each step of a batch (`CleanupJournal`) leaves what the next clean settles: nothing
/// deleted without its `deleted` record, no record for a file that stays, no entry left aside.
@Suite struct CleanupJournalTests {
    /// tmp files `a`, `b` and `c`, their journal items, and the journal.
    private struct Setting {
        let scratch: Scratch
        let journal: CleanupJournal
        let items: [CleanupJournal.Item]
        var tmp: String { scratch.container.path(.tmp) }

        init() throws {
            scratch = try Scratch.withInbox()
            journal = try CleanupJournal(container: scratch.container)
            var items: [CleanupJournal.Item] = []
            for name in ["a", "b", "c"] {
                let path = scratch.container.path(.tmp) + "/" + name
                try makeFile(path, pattern(100 + name.count))
                let status = try status(path)
                items.append(
                    CleanupJournal.Item(
                        components: scratch.container.components(of: .tmp) + [try TestSupport.name(name)],
                        reason: "tmp: app not running", device: status.device, inode: status.inode))
            }
            self.items = items
        }

        /// Renames an item aside, as a batch does.
        func setAside(_ item: CleanupJournal.Item) throws {
            try system_renameat2(
                AT_FDCWD, tmp + "/" + item.components.last!.string, AT_FDCWD, tmp + "/" + item.aside.string, [])
        }

        /// Logs the `deleted` records a batch writes for `items`.
        func logDeleted(_ items: [CleanupJournal.Item]) throws {
            try scratch.inbox.log.append(
                items.map {
                    Event(.deleted, ["path": .path($0.path), "reason": .string($0.reason), "size": .int(101)])
                }, durable: true)
        }

        func recover() throws {
            try journal.recover(log: scratch.inbox.log)
        }

        func deletedPaths() throws -> [String] {
            try scratch.inbox.log.records(kinds: [.deleted]).compactMap { $0.fields["path"] }
        }

        func tmpEntries() throws -> [String] {
            try FileDescriptor(tmp, [.directory]).entries().map(\.string).sorted()
        }
    }

    @Test func anIntentWithNothingDoneYetChangesNothing() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        try setting.journal.write(setting.items, after: try setting.scratch.inbox.log.lastSeq())

        try setting.recover()
        #expect(try setting.tmpEntries() == ["a", "b", "c"])
        #expect(try setting.deletedPaths().isEmpty)
        #expect(try setting.journal.read() == nil)
    }

    @Test func entriesSetAsideButNotLoggedGoBackUnderTheirNames() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        try setting.journal.write(setting.items, after: try setting.scratch.inbox.log.lastSeq())
        try setting.setAside(setting.items[0])
        try setting.setAside(setting.items[1])

        try setting.recover()
        #expect(try setting.tmpEntries() == ["a", "b", "c"])
        #expect(try readFile(setting.tmp + "/a") == pattern(101))
        #expect(try setting.deletedPaths().isEmpty)
        #expect(try setting.journal.read() == nil)
    }

    @Test func entriesLoggedAreDeletedAsideOrUnderTheirNameAndLoggedOnce() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        try setting.scratch.inbox.log.append(Event(.setup))
        try setting.journal.write(setting.items, after: try setting.scratch.inbox.log.lastSeq())
        try setting.setAside(setting.items[0])
        try setting.setAside(setting.items[1])
        // `a` aside, `b` aside and already removed, `c` never renamed (a power cut undid its rename): all logged.
        try FileManager.default.removeItem(atPath: setting.tmp + "/" + setting.items[1].aside.string)
        try setting.logDeleted(setting.items)

        try setting.recover()
        #expect(try setting.tmpEntries().isEmpty)
        #expect(try setting.deletedPaths() == ["tmp/a", "tmp/b", "tmp/c"])
        #expect(try setting.journal.read() == nil)
    }

    @Test func recordsBeforeTheIntentDoNotCount() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        // A record of an older clean for the same path and reason, before the intent's seq.
        try setting.logDeleted([setting.items[0]])
        try setting.journal.write(setting.items, after: try setting.scratch.inbox.log.lastSeq())
        try setting.setAside(setting.items[0])

        try setting.recover()
        #expect(try setting.tmpEntries() == ["a", "b", "c"])
        #expect(try setting.deletedPaths() == ["tmp/a"])
    }

    @Test func anAsideWhoseNameWasTakenGoesBackBesideIt() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        try setting.journal.write(setting.items, after: try setting.scratch.inbox.log.lastSeq())
        try setting.setAside(setting.items[0])
        try makeFile(setting.tmp + "/a", pattern(7))

        try setting.recover()
        #expect(try setting.tmpEntries() == ["a", "a-1", "b", "c"])
        #expect(try readFile(setting.tmp + "/a") == pattern(7))
        #expect(try readFile(setting.tmp + "/a-1") == pattern(101))
    }

    @Test func aCleanSettlesAnUnfinishedBatchFirstAndNeverPlansAnAside() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        try setting.journal.write(setting.items, after: try setting.scratch.inbox.log.lastSeq())
        try setting.setAside(setting.items[0])
        let plan = CleanupPlan(container: setting.scratch.container, policy: Preferences(), appIsRunning: false)
        // A dry run does not settle the batch, and does not plan the aside: only what is under its own name.
        let planned = try plan.entries().map { $0.components.map(\.string).joined(separator: "/") }
        #expect(planned.sorted() == ["b", "c"])

        var deleted: [String] = []
        let summary = try plan.execute(log: setting.scratch.inbox.log) { outcome in
            if outcome.deleted { deleted.append(outcome.entry.components.last!.string) }
        }
        #expect(summary.failed == 0)
        #expect(deleted.sorted() == ["a", "b", "c"])
        #expect(try setting.tmpEntries().isEmpty)
        #expect(try setting.deletedPaths().sorted() == ["tmp/a", "tmp/b", "tmp/c"])
        #expect(try setting.journal.read() == nil)
    }

    @Test func aSecondCleanThatMayNotWaitIsBusy() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        let held = try #require(try setting.journal.lock(wait: true))
        let plan = CleanupPlan(container: setting.scratch.container, policy: Preferences(), appIsRunning: false)
        expectError(.busy) { try plan.execute(log: setting.scratch.inbox.log, waitForLock: false) { _ in } }
        #expect(try setting.tmpEntries() == ["a", "b", "c"])
        withExtendedLifetime(held) {}
    }

    @Test func aFileThatTakesThePlannedNameIsKept() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        let plan = CleanupPlan(container: setting.scratch.container, policy: Preferences(), appIsRunning: false)
        let entries = try plan.entries()
        // `a` is replaced by another file under the same name after the plan (made first: another inode).
        try makeFile(setting.tmp + "/a.new", pattern(9))
        try system_renameat2(AT_FDCWD, setting.tmp + "/a.new", AT_FDCWD, setting.tmp + "/a", [])

        var kept: [String] = []
        _ = try plan.execute(entries, log: setting.scratch.inbox.log) { outcome in
            if case .changed = outcome.result { kept.append(outcome.entry.components.last!.string) }
        }
        #expect(kept == ["a"])
        #expect(try setting.tmpEntries() == ["a"])
        #expect(try readFile(setting.tmp + "/a") == pattern(9))
        #expect(try setting.deletedPaths().sorted() == ["tmp/b", "tmp/c"])
    }
}
