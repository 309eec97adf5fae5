import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// `InboxPoll` alone, on a plain folder (ARCHITECTURE.md, "Network and FUSE filesystems"): a new name is handed on
/// once it held still for the settle time, a name renamed from a dot-name listed before at once, kept items never,
/// and the interval backs off once nothing changed for a while.
@Suite struct InboxPollTests {
    /// A new folder, and it open.
    private func folder() throws -> (path: String, folder: SharedDescriptor) {
        let path = FileManager.default.temporaryDirectory.path + "/inbox-poll-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return (path, SharedDescriptor(try FileDescriptor(path, [.directory])))
    }

    @Test func aNewNameIsHandedOnOnceItHeldStillForTheSettleTime() throws {
        let (path, folder) = try folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let poll = InboxPoll(reason: "test", interval: .milliseconds(10), settle: .milliseconds(300))
        try makeFile(path + "/a.txt", Array("one".utf8))
        let first = ContinuousClock.now
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        #expect(poll.isSettling)
        // Changed meanwhile: its settle time starts again.
        let file = try FileDescriptor(path + "/a.txt", [.writeOnly])
        try file.writeAll(Array("two more".utf8), at: 3)
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        var handed: [FileName] = []
        #expect(
            waitUntil(timeout: 10, interval: 0.001) {
                handed = (try? poll.poll(folder.descriptor, arrived: [])) ?? []
                return !handed.isEmpty
            })
        #expect(handed == [try name("a.txt")])
        #expect(ContinuousClock.now - first >= .milliseconds(300))
        #expect(!poll.isSettling)
        #expect(poll.admitted([try name("a.txt"), try name("b.txt")]) == [try name("a.txt")])
        // Handed on once.
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
    }

    @Test func aNameRenamedFromADotNameListedBeforeIsHandedOnAtOnce() throws {
        let (path, folder) = try folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let poll = InboxPoll(reason: "test", interval: .milliseconds(10), settle: .seconds(60))
        try makeFile(path + "/.a.txt.part", Array("whole".utf8))
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        #expect(rename(path + "/.a.txt.part", path + "/a.txt") == 0)
        #expect(try poll.poll(folder.descriptor, arrived: []) == [try name("a.txt")])
        // A hard link beside a dot-name that stays is no rename: it settles.
        try makeFile(path + "/.b.part", Array("b".utf8))
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        #expect(link(path + "/.b.part", path + "/b.txt") == 0)
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        #expect(poll.isSettling)
    }

    /// Where the folder lists no true inodes (sshfs's readdir gives every entry 4294967295), a name still settles
    /// (its look, not the listing, says it held still), a name renamed from a dot-name is not taken for whole at
    /// once (it cannot be told from a new one), and a settled name is not handed on again.
    @Test func whereTheFolderListsNoTrueInodesNamesSettleByTheirLooksAlone() throws {
        let (path, folder) = try folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let poll = InboxPoll(
            reason: "test", interval: .milliseconds(10), settle: .milliseconds(200), listsInodes: false)
        try makeFile(path + "/.a.txt.part", Array("whole".utf8))
        try makeFile(path + "/b.txt", Array("b".utf8))
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        #expect(rename(path + "/.a.txt.part", path + "/a.txt") == 0)
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        var handed: Set<FileName> = []
        #expect(
            waitUntil(timeout: 10, interval: 0.001) {
                handed.formUnion((try? poll.poll(folder.descriptor, arrived: [])) ?? [])
                return handed.count == 2
            })
        #expect(handed == [try name("a.txt"), try name("b.txt")])
        #expect(try poll.poll(folder.descriptor, arrived: []).isEmpty)
        #expect(!poll.isSettling)
    }

    @Test func anItemArrivedAlreadyIsNeverHandedOn() throws {
        let (path, folder) = try folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let poll = InboxPoll(reason: "test", interval: .milliseconds(10), settle: .zero)
        try makeFile(path + "/kept.txt", Array("kept".utf8))
        let kept = Identity(try status(path + "/kept.txt"))
        #expect(try poll.poll(folder.descriptor, arrived: [kept]).isEmpty)
        #expect(!poll.isSettling)
        #expect(try poll.poll(folder.descriptor, arrived: [kept]).isEmpty)
        #expect(poll.admitted([try name("kept.txt")]) == [try name("kept.txt")])
    }

    @Test func theIntervalBacksOffOnceNothingChangedAndComesBackAtAChange() throws {
        let (path, folder) = try folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let poll = InboxPoll(
            reason: "test", interval: .milliseconds(10), settle: .zero, idleInterval: .seconds(30),
            idleAfter: .milliseconds(200))
        _ = try poll.poll(folder.descriptor, arrived: [])
        #expect(poll.nextPoll - .now < .seconds(1))
        #expect(
            waitUntil(timeout: 10, interval: 0.001) {
                _ = try? poll.poll(folder.descriptor, arrived: [])
                return poll.nextPoll - .now > .seconds(20)
            })
        try makeFile(path + "/new.txt", Array("x".utf8))
        _ = try poll.poll(folder.descriptor, arrived: [])
        #expect(poll.nextPoll - .now < .seconds(1))
    }
}

extension InboxPollTests {
    /// Reads of the folder (`getdents64` calls) that one poll makes.
    private func reads(_ poll: InboxPoll, _ folder: SharedDescriptor) throws -> Int {
        let counting = SyscallFaultPlan(only: "getdents64")
        try counting.run { _ = try poll.poll(folder.descriptor, arrived: []) }
        return counting.calls.count
    }

    /// An unchanged Inbox is read until a read was made a `stampTick` after its stamp was first seen (a change in the
    /// same tick as another leaves the stamp as it was); then a poll costs the `fstat` alone, until the stamp moves.
    @Test func anUnchangedInboxIsNotReadAgainOnceAReadIsCompleteForItsStamp() throws {
        let (path, folder) = try folder()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let poll = InboxPoll(
            reason: "test", interval: .milliseconds(10), settle: .zero, stampTick: .seconds(1))
        try makeFile(path + "/a.txt", Array("a".utf8))
        let seen = ContinuousClock.now
        #expect(try reads(poll, folder) > 0)
        // Within the stamp's tick, every poll reads.
        while ContinuousClock.now - seen < .milliseconds(500) { #expect(try reads(poll, folder) > 0) }
        #expect(
            waitUntil(timeout: 10, interval: 0.001) {
                ContinuousClock.now - seen > .milliseconds(1_200) && (try? reads(poll, folder)) == 0
            })
        #expect(try reads(poll, folder) == 0)
        try makeFile(path + "/b.txt", Array("b".utf8))
        #expect(try reads(poll, folder) > 0)
        #expect(try poll.poll(folder.descriptor, arrived: []) == [try name("b.txt")])
    }
}
