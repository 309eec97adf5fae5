import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// An Inbox item's arrival for the cleanup (ARCHITECTURE.md, "Age from arrival"): its ctime, or a later record of the
/// same file, never one of its path alone.
@Suite struct ArrivalClockTests {
    @Test func aLaterRecordOfTheSameFileMakesAnItemYoungerAndOneOfItsNameAloneDoesNot() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let names = ["recorded.pdf", "renamed.pdf", "namesake.pdf"]
        for name in names { try makeFile(scratch.inboxPath(name), pattern(10)) }
        let arrived = try names.map { try fileStatus(in: AT_FDCWD, scratch.inboxPath($0)).changed }.max()!
        // The records come a second after the ctimes: only a record can make the difference.
        let deadline = Date().addingTimeInterval(10)
        while Timestamp.now().seconds <= arrived.seconds + 1, Date() < deadline { usleep(10_000) }
        func record(_ name: String, of file: String) throws -> Event {
            let id = Identity(try fileStatus(in: AT_FDCWD, scratch.inboxPath(file))).text
            return Event(
                .arrived,
                ["path": .path(scratch.inbox.loggedPath(.inbox, try TestSupport.name(name))), "id": .string(id)])
        }
        // `renamed.pdf` was recorded under another name; `namesake.pdf` has a record of its name, of another file.
        _ = try scratch.inbox.log.append([
            try record("recorded.pdf", of: "recorded.pdf"), try record("earlier-name.pdf", of: "renamed.pdf"),
            try record("namesake.pdf", of: "recorded.pdf"),
        ])

        // Thirty days and a second after the ctimes: a record a second later keeps an item young.
        let now = Timestamp(seconds: arrived.seconds + 30 * 86_400 + 1, nanoseconds: 0)
        let plan = CleanupPlan(container: scratch.container, policy: Preferences(), appIsRunning: false, now: now)
        #expect(try plan.entries().map { $0.components.map(\.string) } == [["namesake.pdf"]])
    }

    @Test func recordTimesAreReadBack() throws {
        let time = Timestamp(seconds: 1_764_434_794, nanoseconds: 204_000_000)
        #expect(Timestamp(rfc3339: time.rfc3339) == time)
        #expect(Timestamp(rfc3339: "2025-11-29T16:46:34.204Z") == time)
        for bad in ["", "2026-11-29T16:46:34Z", "2026-11-29 16:46:34.204Z", "2026-11-29T16:46:34.20xZ"] {
            #expect(Timestamp(rfc3339: bad) == nil, "\(bad)")
        }
    }

    @Test func aRecordNamesTheSameFileByDeviceInodeAndBirthTime() throws {
        let item = try #require(Identity(text: "1:2:10:100.0:50.5"))
        #expect(ArrivalClock.isSame(try #require(Identity(text: "1:2:99:200.0:50.5")), as: item))
        #expect(!ArrivalClock.isSame(try #require(Identity(text: "1:2:10:100.0:51.5")), as: item), "born again")
        #expect(!ArrivalClock.isSame(try #require(Identity(text: "1:3:10:100.0:50.5")), as: item))
        // Without a birth time, size and modification time must agree too.
        let unborn = try #require(Identity(text: "1:2:10:100.0:0.0"))
        #expect(ArrivalClock.isSame(try #require(Identity(text: "1:2:10:100.0")), as: unborn))
        #expect(!ArrivalClock.isSame(try #require(Identity(text: "1:2:11:100.0")), as: unborn))
        #expect(!ArrivalClock.isSame(try #require(Identity(text: "1:2:11:100.0:50.5")), as: unborn))
    }

    @Test func fuseIsNotTrustedWithACtime() {
        #expect(!ArrivalClock.keepsChangeTime(filesystemType: 0x6573_5546))
        #expect(ArrivalClock.keepsChangeTime(filesystemType: 0xEF53))  // ext4
        #expect(ArrivalClock.keepsChangeTime(filesystemType: 0x0102_1994))  // tmpfs
    }
}
