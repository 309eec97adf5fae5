import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// `UnwatchedStreak`: a streak of failed tries to watch again is news once, and so is its end.
@Suite struct UnwatchedStreakTests {
    @Test func theFirstFailureAndTheRescanThatEndsItAreNewsAndNothingBetween() {
        let streak = UnwatchedStreak()
        #expect(!streak.rescanned(overflow: false), "no streak yet")
        #expect(streak.failed())
        #expect(!streak.failed() && !streak.failed(), "the tries after the first are not news")
        #expect(!streak.rescanned(overflow: true), "an overflow's rescan does not end it")
        #expect(streak.rescanned(overflow: false))
        #expect(!streak.rescanned(overflow: false), "ended once")
        #expect(streak.failed(), "a new streak")
    }
}

/// `FolderPoll`, what an unwatched folder's tries look at: a scan only when the folder may have changed.
@Suite struct FolderPollTests {
    @Test func aFolderCountsAsChangedWhenItMayHaveAndNotOtherwise() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let path = scratch.outside("polled")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let poll = FolderPoll()
        #expect(poll.changed(path), "the first look")
        // Changed less than two seconds ago: a change in the same clock tick would not show.
        #expect(poll.changed(path), "too recent to tell")
        #expect(waitUntil(timeout: 10, interval: 0.001) { !poll.changed(path) }, "unchanged once older")
        #expect(!poll.changed(path))
        #expect(FileManager.default.createFile(atPath: path + "/new.txt", contents: Data()))
        #expect(poll.changed(path), "a name made")
        #expect(waitUntil(timeout: 10, interval: 0.001) { !poll.changed(path) })
        // Replaced by another folder (another inode), then by nothing.
        try FileManager.default.moveItem(atPath: path, toPath: path + ".old")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: path)
        #expect(poll.changed(path), "another folder")
        #expect(!poll.changed(path), "the same, and old")
        try FileManager.default.removeItem(atPath: path)
        #expect(poll.changed(path), "unreadable: the scan says why")
        #expect(!poll.changed(path), "and not again while it stays so")
        poll.forget()
        #expect(poll.changed(path), "forgotten: the next look counts")
    }
}
