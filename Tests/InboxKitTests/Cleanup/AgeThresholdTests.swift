import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// Ages are compared with their thresholds to the nanosecond (issue 49): an item 2.2 s old is older than 2 seconds,
/// wherever its whole seconds differ by only 2. Each time is set, or the plan's `now` chosen, so that the whole
/// seconds alone would say "not older"; nothing waits.
@Suite struct AgeThresholdTests {
    /// `time` plus `seconds` and `nanoseconds`, normalized.
    private func adding(_ time: Timestamp, seconds: Int64, nanoseconds: Int64) -> Timestamp {
        let total = time.nanoseconds + nanoseconds
        return Timestamp(seconds: time.seconds + seconds + total / 1_000_000_000, nanoseconds: total % 1_000_000_000)
    }

    @Test func theComparisonCountsTheNanoseconds() {
        let then = Timestamp(seconds: 100, nanoseconds: 500_000_000)
        #expect(then.isMore(than: 2, secondsBefore: Timestamp(seconds: 102, nanoseconds: 700_000_000)), "2.2 s")
        #expect(then.isMore(than: 2, secondsBefore: Timestamp(seconds: 102, nanoseconds: 500_000_001)), "2 s + 1 ns")
        #expect(!then.isMore(than: 2, secondsBefore: Timestamp(seconds: 102, nanoseconds: 500_000_000)), "2 s")
        #expect(!then.isMore(than: 2, secondsBefore: Timestamp(seconds: 102, nanoseconds: 400_000_000)), "1.9 s")
        #expect(then.isMore(than: 2, secondsBefore: Timestamp(seconds: 103, nanoseconds: 0)), "2.5 s")
        #expect(Timestamp(seconds: .min, nanoseconds: 0).isMore(than: 2, secondsBefore: then), "overflows: old")
    }

    @Test func aTmpEntryTwoSecondsAndAFifthOldIsOlderThanTwoSeconds() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let path = scratch.container.path(.tmp) + "/scratch.txt"
        try makeFile(path, pattern(10))
        let modified = Timestamp(seconds: 1_700_000_000, nanoseconds: 100_000_000)
        #expect(utimensat(AT_FDCWD, path, [modified.timespecValue, modified.timespecValue], 0) == 0)
        var policy = Preferences()
        policy.tmpMaxAge = 2
        let plan = { (now: Timestamp) in
            try CleanupPlan(container: scratch.container, policy: policy, appIsRunning: true, now: now).entries()
        }
        // 2.2 s: the whole seconds differ by 2, yet it is older than 2 seconds.
        #expect(
            try plan(adding(modified, seconds: 2, nanoseconds: 200_000_000)).map(\.reason) == ["older than 2 seconds"])
        #expect(try plan(adding(modified, seconds: 2, nanoseconds: 0)).isEmpty, "exactly 2 s is not older")
    }

    @Test func anInboxItemArrivedTwoSecondsAndANanosecondAgoIsOlderThanTwoSeconds() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.inboxPath("report.pdf"), pattern(10))
        let arrived = try fileStatus(in: AT_FDCWD, scratch.inboxPath("report.pdf")).changed
        var policy = Preferences()
        policy.inboxMaxAge = 2
        let plan = { (now: Timestamp) in
            try CleanupPlan(container: scratch.container, policy: policy, appIsRunning: true, now: now).entries()
        }
        // Its ctime is its arrival: 2 s and 1 ns later, the whole seconds differ by 2 (but for a ctime at the last
        // nanosecond of its second).
        #expect(try plan(adding(arrived, seconds: 2, nanoseconds: 1)).map(\.reason) == ["older than 2 seconds"])
        #expect(try plan(adding(arrived, seconds: 2, nanoseconds: 0)).isEmpty)
    }

    @Test func aStagingFileIsAbandonedOnceOlderToTheNanosecond() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let name = ".inbox-staging.left"
        try makeFile(scratch.inboxPath(name), pattern(10))
        #expect(Inbox.isStagingName(try TestSupport.name(name)), "a delivery's staging name")
        let modified = Timestamp(seconds: 1_700_000_000, nanoseconds: 100_000_000)
        #expect(utimensat(AT_FDCWD, scratch.inboxPath(name), [modified.timespecValue, modified.timespecValue], 0) == 0)
        let exactly = adding(modified, seconds: 2, nanoseconds: 0)
        #expect(try scratch.inbox.sweepAbandonedStaging(olderThan: 2, now: exactly).isEmpty)
        let later = adding(modified, seconds: 2, nanoseconds: 200_000_000)
        #expect(try scratch.inbox.sweepAbandonedStaging(olderThan: 2, now: later).map(\.string) == [name])
    }
}
