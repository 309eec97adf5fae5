import Foundation
import Glibc
import TestSupport
import Testing

/// Nothing blocks an MTA (ARCHITECTURE.md, "Nothing blocks an MTA"): `inbox import -` and `inbox deliver` wait at most
/// a few seconds for `import.lock` and `events.lock`, then exit 75 with one line naming the holder's pid, so that the
/// MTA keeps the message and tries again; once the holder is gone, the retry delivers it, once. The holder is a real
/// process, stopped as ^Z stops an `inbox import` (`HeldLock`). A wait without bound, as before, is killed after a
/// minute (137), never hangs the suite.
@Suite struct DeliveryLockWaitTests {
    private static let stateFolder = "/Library/Application Support/inbox"
    static let message = MailFixtures.message
    /// Another message (its own key), with the same three attachments.
    static let otherMessage = MailFixtures.message.replacingOccurrences(of: "report-1@", with: "report-2@")

    /// Runs `body`, returning its result and how long it took.
    private func timed<T>(_ body: () throws -> T) rethrows -> (T, Duration) {
        let start = ContinuousClock.now
        let result = try body()
        return (result, ContinuousClock.now - start)
    }

    /// The Inbox's visible items.
    private func items(_ container: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").filter {
            !$0.hasPrefix(".")
        }
    }

    /// Expects a run cut short by a held lock: 75 within the bound (5 s) and a generous margin, having waited, with
    /// one line on stderr naming the holder's pid and the lock, and nothing on stdout.
    private func expectTryAgain(
        _ result: InboxProcess.Result, after elapsed: Duration, holder: HeldLock, lock: String,
        _ what: Comment
    ) {
        #expect(result.status == 75, "\(what): \(result.stderr)")
        #expect(elapsed < .seconds(30), "\(what): it took \(elapsed)")
        #expect(elapsed >= .seconds(4), "\(what): it waited for the lock, \(elapsed)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(what): one line: \(result.stderr)")
        #expect(lines.first?.hasPrefix("inbox: ") == true, "\(what): \(result.stderr)")
        #expect(lines.first?.contains("pid \(holder.pid) ") == true, "\(what): names the holder: \(result.stderr)")
        #expect(lines.first?.contains(lock) == true, "\(what): names the lock: \(result.stderr)")
        #expect(result.stdout.isEmpty, "\(what)")
    }

    @Test func aStoppedHolderOfTheImportLockGetsTheMTAATryAgainNamingItsPid() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        // A first message makes the index and its lock.
        let first = try InboxProcess.run("--container", container, "import", "-", input: Self.otherMessage)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try items(container).count == 3)
        let holder = try HeldLock(container + Self.stateFolder + "/import.lock")
        defer { holder.release() }
        holder.suspend()
        let (held, elapsed) = try timed {
            try InboxProcess.run(["--container", container, "import", "-"], input: Self.message, killedAfter: 60)
        }
        expectTryAgain(held, after: elapsed, holder: holder, lock: "import.lock", "import - with import.lock held")
        #expect(try items(container).count == 3, "nothing of the message was delivered")
        #expect(logRecords(container, event: "imported").count == 1)
        // The holder gone, the MTA's retry delivers the message, once; the next retry is a duplicate.
        holder.release()
        let retried = try InboxProcess.run("--container", container, "import", "-", input: Self.message)
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(retried.lines.count == 3)
        let again = try InboxProcess.run("--container", container, "import", "-", input: Self.message)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.lines.isEmpty)
        #expect(try items(container).count == 6)
        #expect(logRecords(container, event: "imported").map { $0["duplicate"] as? Bool } == [false, false, true])
        #expect(logRecords(container, event: "delivered").count == 6)
    }

    @Test func aStoppedHolderOfTheEventLogLockGetsDeliverAndImportATryAgainNamingItsPid() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let report = try folder.file("report.pdf", "%PDF-1.4 a report\n")
        // The log and its lock exist once something was logged.
        #expect(!logRecords(container).isEmpty)
        let holder = try HeldLock(container + Self.stateFolder + "/events.lock")
        defer { holder.release() }
        holder.suspend()
        let (delivering, deliverTook) = try timed {
            try InboxProcess.run(["--container", container, "deliver", report], killedAfter: 60)
        }
        expectTryAgain(delivering, after: deliverTook, holder: holder, lock: "events.lock", "deliver")
        let (importing, importTook) = try timed {
            try InboxProcess.run(["--container", container, "import", "-"], input: Self.message, killedAfter: 60)
        }
        expectTryAgain(importing, after: importTook, holder: holder, lock: "events.lock", "import -")
        #expect(try items(container).isEmpty, "nothing was delivered")
        let inbox = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox")
        #expect(inbox.isEmpty, "no staging file is left behind: \(inbox)")
        // The holder gone, both retries deliver, once.
        holder.release()
        let delivered = try InboxProcess.run("--container", container, "deliver", report)
        #expect(delivered.status == 0, "\(delivered.stderr)")
        let imported = try InboxProcess.run("--container", container, "import", "-", input: Self.message)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.lines.count == 3)
        #expect(try InboxProcess.run("--container", container, "import", "-", input: Self.message).lines.isEmpty)
        #expect(try items(container).count == 4)
        #expect(logRecords(container, event: "delivered").count == 4)
        #expect(logRecords(container, event: "imported").map { $0["duplicate"] as? Bool } == [false, true])
    }
}
