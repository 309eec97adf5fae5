import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// The cleanup policy of ARCHITECTURE.md, "Cleanup", planned and carried out on real folders. Ages in tmp and Caches
/// are set with `utimensat`; an Inbox item's age counts from its arrival (its ctime, which cannot be set back), so the
/// plan's `now` is moved on instead.
@Suite struct CleanupTests {
    static let day: Int64 = 86_400

    // MARK: - The Inbox

    @Test func inboxItemsOlderThanTheMaxAgeGo() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(
            atPath: scratch.inboxPath("old folder"), withIntermediateDirectories: true)
        try makeFile(scratch.inboxPath("old folder/inside.txt"), pattern(7))
        try makeFile(scratch.inboxPath("old.pdf"), pattern(10))
        try makeFile(scratch.inboxPath(".staging-old"), pattern(10))
        // Their own dates count for nothing: the old are new by them, the recent old.
        try setAge(scratch.inboxPath("old.pdf"), days: -1)
        try setAge(scratch.inboxPath("old folder/inside.txt"), days: -1)
        let arrived = try ["old.pdf", "old folder", "old folder/inside.txt"].map { try changed(scratch.inboxPath($0)) }
            .max()!
        waitPast(Timestamp(seconds: arrived.seconds + 1, nanoseconds: 0))
        try makeFile(scratch.inboxPath("recent.pdf"), pattern(10))
        try setAge(scratch.inboxPath("recent.pdf"), days: 400)

        // Thirty days and a second after the old ones arrived.
        let now = Timestamp(seconds: arrived.seconds + 30 * Self.day + 1, nanoseconds: 0)
        let outcomes = try clean(scratch, appIsRunning: true, now: now)
        #expect(Set(outcomes.map(\.relative)) == ["Documents/Inbox/old.pdf", "Documents/Inbox/old folder"])
        #expect(outcomes.allSatisfy { $0.reason == "older than 30 days" && $0.deleted })
        #expect(outcomes.first { $0.relative.hasSuffix("old folder") }?.bytes == 7)
        #expect(try scratch.inboxEntries() == [".staging-old", "recent.pdf"])
    }

    @Test func overItsMaxBytesTheInboxLosesItsOldestItemsFirst() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.inboxPath("ancient"), pattern(1000))
        let ancient = try changed(scratch.inboxPath("ancient"))
        waitPast(Timestamp(seconds: ancient.seconds + 1, nanoseconds: 0))
        // They arrive oldest first, each after the one before; their own dates say otherwise.
        for index in [0, 2, 4, 3, 1] {
            try makeFile(scratch.inboxPath("item\(index)"), pattern(100))
            try setAge(scratch.inboxPath("item\(index)"), days: Int64(-index))
            waitPast(try changed(scratch.inboxPath("item\(index)")))
        }
        var policy = Preferences()
        policy.inboxMaxBytes = 250

        let now = Timestamp(seconds: ancient.seconds + 30 * Self.day + 1, nanoseconds: 0)
        let outcomes = try clean(scratch, policy: policy, appIsRunning: true, now: now)
        // The ancient item goes for its age and no longer counts; 500 bytes remain, so the three oldest go.
        #expect(outcomes.map(\.relative) == ["ancient", "item0", "item2", "item4"].map { "Documents/Inbox/" + $0 })
        #expect(outcomes.map(\.reason) == ["older than 30 days"] + Array(repeating: "inbox over 250 bytes", count: 3))
        #expect(try scratch.inboxEntries() == ["item1", "item3"])
    }

    // MARK: - tmp

    @Test func whileAWatcherHoldsTheContainerTmpLosesOnlyOldEntries() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let tmp = scratch.container.path(.tmp)
        try makeFile(tmp + "/old.part", pattern(5))
        try makeFile(tmp + "/new.part", pattern(5))
        try FileManager.default.createDirectory(atPath: tmp + "/old work/sub", withIntermediateDirectories: true)
        try makeFile(tmp + "/old work/sub/a", pattern(3))
        try FileManager.default.createDirectory(atPath: tmp + "/busy work", withIntermediateDirectories: true)
        try makeFile(tmp + "/busy work/fresh", pattern(3))
        try setAge(tmp + "/old.part", days: 4)
        try setAge(tmp + "/old work/sub/a", days: 4)
        try setAge(tmp + "/old work/sub", days: 4)
        try setAge(tmp + "/old work", days: 4)
        try setAge(tmp + "/busy work", days: 4)  // its newest entry is fresh: it stays
        chmod(tmp + "/old work/sub", 0o555)

        let lock = try HeldWatcherLock(scratch.container)
        let plan = CleanupPlan(container: scratch.container, policy: Preferences())
        #expect(plan.appIsRunning)
        let outcomes = try execute(plan, scratch)
        withExtendedLifetime(lock) {}
        #expect(Set(outcomes.map(\.relative)) == ["tmp/old.part", "tmp/old work"])
        #expect(outcomes.allSatisfy { $0.reason == "older than 3 days" && $0.deleted })
        #expect(try entries(tmp) == ["busy work", "new.part"])
    }

    @Test func withNoWatcherEverythingInTmpGoes() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let tmp = scratch.container.path(.tmp)
        try makeFile(tmp + "/new.part", pattern(5))
        try makeFile(tmp + "/.hidden", pattern(5))
        try FileManager.default.createDirectory(atPath: tmp + "/work/deeper", withIntermediateDirectories: true)
        try makeFile(tmp + "/work/deeper/b", pattern(9))
        #expect(mkfifo(tmp + "/fifo", 0o600) == 0)

        let plan = CleanupPlan(container: scratch.container, policy: Preferences())
        #expect(!plan.appIsRunning)
        let outcomes = try execute(plan, scratch)
        #expect(Set(outcomes.map(\.relative)) == ["tmp/new.part", "tmp/.hidden", "tmp/work", "tmp/fifo"])
        #expect(outcomes.allSatisfy { $0.reason == "tmp: app not running" && $0.deleted })
        #expect(outcomes.first { $0.relative == "tmp/work" }?.bytes == 9)
        #expect(try entries(tmp).isEmpty)
    }

    /// On a FUSE mount (bindfs) a `.fuse_hidden…` name in tmp is the client's, left alone; a `.nfs…` name is a
    /// user's there, and goes with the rest.
    @Test func aFuseClientsLeftoversInTmpAreLeftAlone() throws {
        let mount = try FuseMount()
        let scratch = try Scratch.withInbox(under: mount.mountPoint)
        defer {
            scratch.remove()
            withExtendedLifetime(mount) {}
        }
        let tmp = scratch.container.path(.tmp)
        let leftover = ".fuse_hidden0000000b00000001"
        for name in [leftover, ".nfs00000000001234560000000a", "new.part"] {
            try makeFile(tmp + "/" + name, pattern(5))
        }

        let outcomes = try execute(CleanupPlan(container: scratch.container, policy: Preferences()), scratch)
        #expect(Set(outcomes.map(\.relative)) == ["tmp/.nfs00000000001234560000000a", "tmp/new.part"])
        #expect(try entries(tmp) == [leftover])
    }

    /// On a local disk `.nfs…` and `.fuse_hidden…` names in tmp are a user's, cleaned like any other.
    @Test func clientHiddenNamesInTmpOnALocalDiskAreCleaned() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let tmp = scratch.container.path(.tmp)
        let names = [".nfs00000000001234560000000a", ".fuse_hidden0000000b00000001"]
        for name in names { try makeFile(tmp + "/" + name, pattern(5)) }

        let outcomes = try execute(CleanupPlan(container: scratch.container, policy: Preferences()), scratch)
        #expect(Set(outcomes.map(\.relative)) == Set(names.map { "tmp/" + $0 }))
        #expect(try entries(tmp).isEmpty)
    }

    // MARK: - Caches

    @Test func cachesLoseTheLeastRecentlyUsedFilesDownToTheLimit() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let caches = scratch.container.path(.caches)
        try FileManager.default.createDirectory(atPath: caches + "/thumbs/small", withIntermediateDirectories: true)
        // (name, last access in days, last modification in days)
        let files: [(String, Int64, Int64)] = [
            ("a", 9, 20), ("thumbs/b", 2, 20), ("thumbs/small/c", 7, 30), ("d", 30, 1), ("thumbs/small/e", 5, 40),
        ]
        for (name, accessed, modified) in files {
            try makeFile(caches + "/" + name, pattern(100))
            try setAge(caches + "/" + name, days: modified, accessedDays: accessed)
        }
        var policy = Preferences()
        policy.cachesMaxBytes = 250

        let outcomes = try clean(scratch, policy: policy, appIsRunning: true)
        // Last use: a 9, b 2, c 7, d 1 (modified after its last access), e 5. 500 bytes: the three oldest go.
        let expected = ["a", "thumbs/small/c", "thumbs/small/e"].map { "Library/Caches/" + $0 }
        #expect(outcomes.map(\.relative) == expected)
        #expect(outcomes.allSatisfy { $0.reason == "caches over 250 bytes" && $0.deleted && $0.bytes == 100 })
        #expect(!exists(caches + "/a") && exists(caches + "/thumbs/b") && exists(caches + "/d"))
        #expect(exists(caches + "/thumbs/small"), "folders stay; only files go")
    }

    @Test func theCachesPlanMatchesASortOfEveryFile() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let caches = scratch.container.path(.caches)
        var generator = SystemRandomNumberGenerator()
        var files: [(name: String, size: Int, age: Int64)] = []
        for index in 0..<300 {
            let folder = ["", "x/", "x/y/", "z/"][index % 4]
            try FileManager.default.createDirectory(atPath: caches + "/" + folder, withIntermediateDirectories: true)
            let file = (folder + "f\(index)", Int.random(in: 0...4000, using: &generator), Int64(index * 7 % 300 + 1))
            try makeFile(caches + "/" + file.0, pattern(file.1))
            try setAge(caches + "/" + file.0, seconds: file.2 * 3600)
            files.append(file)
        }
        let total = files.reduce(0) { $0 + $1.size }
        var policy = Preferences()
        policy.cachesMaxBytes = Int64(total / 3)

        let planned = try CleanupPlan(container: scratch.container, policy: policy, appIsRunning: true).entries()
        var expected: [String] = []
        var remaining = total
        for file in files.sorted(by: { $0.age > $1.age }) where remaining > total / 3 {
            expected.append("Library/Caches/" + file.name)
            remaining -= file.size
        }
        #expect(planned.map { relative($0, scratch) } == expected)
    }

    // MARK: - Symbolic links and the places never touched

    @Test func linksInTmpAndCachesAreDeletedThemselvesNeverFollowed() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container
        let tmp = container.path(.tmp)
        let caches = container.path(.caches)
        let document = scratch.documentsPath("precious.txt")
        try makeFile(document, Array("keep me".utf8))
        try FileManager.default.createDirectory(atPath: scratch.outside("elsewhere"), withIntermediateDirectories: true)
        try makeFile(scratch.outside("elsewhere/big"), pattern(5000))
        // tmp/link -> a file in Documents; tmp/folder holds links to Documents and to that file;
        // Caches/away -> a folder outside the container.
        #expect(symlink(document, tmp + "/link") == 0)
        try FileManager.default.createDirectory(atPath: tmp + "/folder", withIntermediateDirectories: true)
        #expect(symlink(container.path(.documents), tmp + "/folder/docs") == 0)
        #expect(symlink(document, tmp + "/folder/doc") == 0)
        #expect(symlink(scratch.outside("elsewhere"), caches + "/away") == 0)
        try makeFile(caches + "/real", pattern(10))
        for path in [tmp + "/link", tmp + "/folder/docs", tmp + "/folder/doc", tmp + "/folder", caches + "/away"] {
            try setAge(path, days: 100)
        }
        var policy = Preferences()
        policy.tmpMaxAge = 0
        policy.cachesMaxBytes = 0

        let outcomes = try clean(scratch, policy: policy, appIsRunning: true)
        #expect(
            Set(outcomes.map(\.relative)) == ["tmp/link", "tmp/folder", "Library/Caches/away", "Library/Caches/real"])
        #expect(outcomes.allSatisfy { $0.deleted })
        #expect(try readFile(document) == Array("keep me".utf8))
        #expect(try scratch.documentsEntries() == ["precious.txt"])
        #expect(try readFile(scratch.outside("elsewhere/big")) == pattern(5000))
        #expect(try entries(tmp).isEmpty)
        #expect(try entries(caches).isEmpty)
    }

    @Test func documentsApplicationSupportPreferencesAndTheBundleAreNeverTouched() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container
        let kept = [
            scratch.documentsPath("old.txt"), container.path(.applicationSupport) + "/templates.plist",
            container.path(.preferences) + "/other.plist", container.path(.library) + "/loose.db",
            container.root + "/stray.txt",
        ]
        for path in kept {
            try makeFile(path, pattern(50))
            try setAge(path, days: 1000)
        }
        try makeFile(scratch.inboxPath("gone.pdf"), pattern(50))
        var policy = Preferences()
        (policy.inboxMaxAge, policy.inboxMaxBytes, policy.tmpMaxAge, policy.cachesMaxBytes) = (0, 0, 0, 0)

        let outcomes = try clean(scratch, policy: policy, appIsRunning: false)
        #expect(outcomes.map(\.relative) == ["Documents/Inbox/gone.pdf"])
        for path in kept { #expect(try readFile(path) == pattern(50), "\(path)") }
        #expect(try entries(container.path(.bundle)).isEmpty == true)
        #expect(exists(container.path(.bundle)) && exists(container.stateDirectory))
    }

    // MARK: - The log, the dry run, changes since planned

    @Test func everyDeletionIsLoggedWithItsPathAndReason() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.inboxPath("old.pdf"), pattern(10))
        try makeFile(scratch.container.path(.tmp) + "/scratch", pattern(10))
        try makeFile(scratch.container.path(.caches) + "/thumb", pattern(10))
        var policy = Preferences()
        policy.cachesMaxBytes = 5

        let now = Timestamp(seconds: Int64(time(nil)) + 31 * Self.day, nanoseconds: 0)
        let outcomes = try clean(scratch, policy: policy, appIsRunning: false, now: now)
        let records = try scratch.inbox.log.records(kinds: [.deleted])
        #expect(records.map { $0.fields["path"] ?? "" } == outcomes.map(\.relative))
        #expect(records.map { $0.fields["reason"] ?? "" } == outcomes.map(\.reason))
        #expect(
            records.map { $0.fields["reason"] ?? "" } == [
                "older than 30 days", "tmp: app not running", "caches over 5 bytes",
            ])
        #expect(records.allSatisfy { $0.fields["size"] == "10" })
    }

    @Test func aDryRunPlansExactlyWhatTheRunDoesAndDeletesNothing() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let tmp = scratch.container.path(.tmp)
        for index in 0..<50 { try makeFile(tmp + "/t\(index)", pattern(index)) }
        for index in 0..<20 {
            try makeFile(scratch.inboxPath("i\(index)"), pattern(100))
            try setAge(scratch.inboxPath("i\(index)"), days: Int64(index))
        }
        var policy = Preferences()
        policy.inboxMaxBytes = 1000
        let log = scratch.inbox.log

        let plan = CleanupPlan(container: scratch.container, policy: policy, appIsRunning: false)
        var dryLines: [[UInt8]] = []
        _ = try plan.execute(dryRun: true, log: log) { outcome in
            #expect(!outcome.deleted)
            dryLines.append(outcome.line)
        }
        #expect(dryLines.count == 60)
        #expect(try entries(tmp).count == 50)
        #expect(try scratch.inboxEntries().count == 20)
        #expect(try log.records(kinds: [.deleted]).isEmpty)

        var lines: [[UInt8]] = []
        let summary = try CleanupPlan(container: scratch.container, policy: policy, appIsRunning: false)
            .execute(log: log) { lines.append($0.line) }
        #expect(lines == dryLines)
        #expect(summary.deleted == 60 && summary.failed == 0)
        #expect(try entries(tmp).isEmpty)
        #expect(try scratch.inboxEntries().count == 10)
    }

    @Test func anEntryReplacedSinceItWasPlannedIsKept() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let tmp = scratch.container.path(.tmp)
        try makeFile(tmp + "/a", pattern(5))
        try makeFile(tmp + "/b", pattern(5))
        let plan = CleanupPlan(container: scratch.container, policy: Preferences(), appIsRunning: false)
        let planned = try plan.entries()
        #expect(planned.count == 2)
        // A new file renamed over the old name: a new inode, as the old one is still in use when it is made.
        try makeFile(tmp + "/a.new", Array("new".utf8))
        #expect(rename(tmp + "/a.new", tmp + "/a") == 0)

        var results: [String: CleanupOutcome.Result] = [:]
        let summary = try plan.execute(planned, log: scratch.inbox.log) {
            results[relative($0.entry, scratch)] = $0.result
        }
        #expect(summary.deleted == 1)
        guard case .changed = results["tmp/a"] else {
            Issue.record("tmp/a was \(String(describing: results["tmp/a"]))")
            return
        }
        #expect(try readFile(tmp + "/a") == Array("new".utf8))
        #expect(!exists(tmp + "/b"))
    }

    /// A clean tells its progress how many entries it has checked, after each.
    @Test func aCleanCountsEachEntryChecked() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        for index in 0..<5 { try makeFile(scratch.inboxPath("item\(index)"), pattern(10)) }
        var heard: [Int] = []
        let plan = CleanupPlan(container: scratch.container, policy: Preferences(), appIsRunning: true)
        try plan.forEachEntry(progress: { heard.append($0) }, { _ in })
        #expect(heard == Array(1...5))
    }

    // MARK: - Units

    @Test func durationsAreDescribedInTheirLargestWholeUnit() {
        #expect(CleanupPolicy.describe(seconds: 30 * 86_400) == "30 days")
        #expect(CleanupPolicy.describe(seconds: 86_400) == "1 day")
        #expect(CleanupPolicy.describe(seconds: 36 * 3600) == "36 hours")
        #expect(CleanupPolicy.describe(seconds: 14 * 86_400) == "2 weeks")
        #expect(CleanupPolicy.describe(seconds: 90) == "90 seconds")
        #expect(CleanupPolicy.describe(seconds: 0) == "0 seconds")
    }

    // MARK: - Helpers

    /// A deletion as the tests look at it.
    struct Done {
        let relative: String
        let reason: String
        let bytes: Int64
        let deleted: Bool
    }

    private func clean(
        _ scratch: Scratch, policy: Preferences = Preferences(), appIsRunning: Bool, now: Timestamp = .now()
    ) throws -> [Done] {
        try execute(
            CleanupPlan(container: scratch.container, policy: policy, appIsRunning: appIsRunning, now: now), scratch)
    }

    /// The ctime of `path`: when it arrived, for the cleanup of the Inbox.
    private func changed(_ path: String) throws -> Timestamp {
        try fileStatus(in: AT_FDCWD, path).changed
    }

    /// Waits until the clock is 20 ms past `time`, so that what is made next has a later ctime (the kernel's
    /// coarse clock, a tick behind).
    private func waitPast(_ time: Timestamp) {
        let deadline = Date().addingTimeInterval(10)
        let nanoseconds = time.nanoseconds + 20_000_000
        let target = Timestamp(
            seconds: time.seconds + nanoseconds / 1_000_000_000, nanoseconds: nanoseconds % 1_000_000_000)
        while Timestamp.now() < target, Date() < deadline { usleep(5000) }
    }

    /// A tmp folder deeper than the walk goes, with a fresh file at its bottom, is not deleted for its age: a folder
    /// not wholly read is young, and the clean tells what it could not read (the walk used to stop at its bound
    /// without a word, and the folder went as old, the fresh file with it).
    @Test func aFolderDeeperThanTheWalkGoesIsKeptAndReportedNotDeletedForAge() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        var folders = [scratch.container.path(.tmp) + "/deep"]
        for _ in 0..<130 { folders.append(folders[folders.count - 1] + "/d") }
        let bottom = folders[folders.count - 1]
        try FileManager.default.createDirectory(atPath: bottom, withIntermediateDirectories: true)
        try makeFile(bottom + "/fresh", pattern(3))
        for folder in folders.reversed() { try setAge(folder, days: 4) }
        let lock = try HeldWatcherLock(scratch.container)
        defer { withExtendedLifetime(lock) {} }
        let plan = CleanupPlan(container: scratch.container, policy: Preferences())
        #expect(try plan.entries().isEmpty)
        let summary = try plan.execute(log: scratch.inbox.log) { _ in }
        #expect(summary.deleted == 0 && summary.unreadable == 1)
        #expect(summary.firstUnreadable?.message.hasSuffix("is nested too deep (over 128 folders)") == true)
        #expect(exists(bottom + "/fresh"))
    }

    private func execute(_ plan: CleanupPlan, _ scratch: Scratch) throws -> [Done] {
        var done: [Done] = []
        let summary = try plan.execute(log: scratch.inbox.log) { outcome in
            done.append(
                Done(
                    relative: relative(outcome.entry, scratch), reason: outcome.entry.reason,
                    bytes: outcome.entry.bytes, deleted: outcome.deleted))
        }
        #expect(summary.failed == 0, "\(summary.firstFailure?.message ?? "")")
        return done
    }

    private func relative(_ entry: CleanupEntry, _ scratch: Scratch) -> String {
        String(decoding: entry.relativePath(appName: scratch.container.appName), as: UTF8.self)
    }

    private func entries(_ folder: String) throws -> [String] {
        try FileDescriptor(folder, [.directory]).entries().map(\.string).sorted()
    }

    private func setAge(_ path: String, days: Int64, accessedDays: Int64? = nil) throws {
        try setAge(path, seconds: days * Self.day, accessedSeconds: accessedDays.map { $0 * Self.day })
    }

    /// Sets the modification (and access) time to that long ago, on a symbolic link itself.
    private func setAge(_ path: String, seconds: Int64, accessedSeconds: Int64? = nil) throws {
        let now = Int64(time(nil))
        let times = [
            timespec(tv_sec: Int(now - (accessedSeconds ?? seconds)), tv_nsec: 0),
            timespec(tv_sec: Int(now - seconds), tv_nsec: 0),
        ]
        guard utimensat(AT_FDCWD, path, times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }
}

/// Holds a container's watcher lock from this process, as a running watcher would, until it goes.
final class HeldWatcherLock {
    let fd: CInt

    init(_ container: Container) throws {
        fd = open(container.stateDirectory + "/watch.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0, flock(fd, LOCK_EX | LOCK_NB) == 0 else { throw POSIXError(.EBUSY) }
        let pid = Array("\(getpid())\n".utf8)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    }

    deinit { close(fd) }
}
