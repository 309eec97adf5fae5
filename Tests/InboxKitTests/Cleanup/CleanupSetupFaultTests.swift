import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// Cleanup and one-time setup with each system call failing in turn (issue 8; backup and restore:
/// `BackupRestoreFaultTests`).
@Suite(.long) struct CleanupSetupFaultTests {
    /// Waits until the clock is 20 ms past the ctime of `path`, so that a file made next arrives later (the ctime
    /// is the kernel's coarse clock, a tick behind).
    static func waitPastArrival(_ path: String) throws {
        let changed = try fileStatus(in: AT_FDCWD, path).changed
        let nanoseconds = changed.nanoseconds + 20_000_000
        let target = Timestamp(
            seconds: changed.seconds + nanoseconds / 1_000_000_000, nanoseconds: nanoseconds % 1_000_000_000)
        let deadline = Date().addingTimeInterval(10)
        while Timestamp.now() < target, Date() < deadline { usleep(5000) }
    }

    /// The old items go for the Inbox's size, the oldest arrivals first (an arrival cannot be made older).
    static let inboxPolicy = {
        var policy = Preferences()
        policy.inboxMaxBytes = 50
        return policy
    }()

    @Test func cleanup() throws {
        let old = ["old1.pdf", "old2.pdf"]
        try FaultSweep(
            setup: {
                let scratch = try Scratch.withInbox()
                for name in old + ["recent.pdf"] {
                    try makeFile(scratch.inboxPath(name), pattern(50))
                    try Self.waitPastArrival(scratch.inboxPath(name))
                }
                return scratch
            },
            operation: { scratch in
                let plan = CleanupPlan(container: scratch.container, policy: Self.inboxPolicy, appIsRunning: true)
                let summary = try plan.execute(log: scratch.inbox.log) { _ in }
                if let failure = summary.firstFailure { throw failure }
            },
            check: { scratch, outcome, plan in
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                // Each entry is still there, or gone with one `deleted` record. An old item a failure put back
                // under its name arrived again then (the rename is a new ctime), and the newest item may go first.
                let check = { (when: String) throws in
                    let entries = try scratch.inboxEntries()
                    let deleted = try scratch.inbox.log.records(kinds: [.deleted]).compactMap { $0.fields["path"] }
                    #expect(
                        entries.contains("recent.pdf") || old.contains(where: entries.contains),
                        "\(plan.summary): \(when): a recent item went before the old ones")
                    for name in old + ["recent.pdf"] {
                        let records = deleted.filter { $0 == "Documents/Inbox/" + name }.count
                        #expect(
                            records == (entries.contains(name) ? 0 : 1),
                            "\(plan.summary): \(when): '\(name)' there: \(entries.contains(name)), records \(records)")
                    }
                }
                try check("after the fault")
                // A second clean finishes the work.
                let rerun = CleanupPlan(container: scratch.container, policy: Self.inboxPolicy, appIsRunning: true)
                let summary = try rerun.execute(log: scratch.inbox.log) { _ in }
                #expect(summary.failed == 0, "\(plan.summary): rerun: \(summary.firstFailure?.message ?? "")")
                try check("after a rerun")
                #expect(try scratch.inboxEntries().count == 1, "\(plan.summary): after a rerun")
            },
            teardown: { $0.remove() }
        ).run("cleanup")
    }

    @Test func setup() throws {
        try FaultSweep(
            setup: {
                let scratch = try Scratch.withInbox()
                let source = scratch.outside("Mail.app")
                try FileManager.default.createDirectory(
                    atPath: source + "/Templates/letters", withIntermediateDirectories: true)
                try makeFile(source + "/Templates/welcome.txt", Array("Welcome!\n".utf8))
                try makeFile(source + "/Templates/letters/thanks.txt", pattern(3_000))
                try makeFile(source + "/Info.plist", Array("info".utf8))
                try AppBundle(container: scratch.container).install(from: source)
                return scratch
            },
            operation: { scratch in _ = try Setup.run(scratch.container) },
            check: { scratch, outcome, plan in
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                let support = scratch.container.path(.applicationSupport)
                let complete = {
                    (try? readFile(support + "/welcome.txt")) == Array("Welcome!\n".utf8)
                        && (try? readFile(support + "/letters/thanks.txt")) == pattern(3_000)
                        && exists(scratch.container.root + "/Library/Preferences/inbox.plist")
                }
                if Setup.isDone(scratch.container) {
                    #expect(complete(), "\(plan.summary): setup.done without the templates and preferences")
                } else {
                    #expect(throws: (any Error).self, "\(plan.summary): not done, yet no error") { try outcome.get() }
                }
                _ = try Setup.run(scratch.container)
                #expect(Setup.isDone(scratch.container) && complete(), "\(plan.summary): a rerun did not complete")
            },
            teardown: { $0.remove() }
        ).run("setup")
    }
}
