import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox clean`: the cleanup policy of ARCHITECTURE.md, "Cleanup" from the command line, against the built binary.
@Suite struct CleanCommandTests {
    @Test func aDryRunPrintsExactlyWhatTheCleanThenDoesAndDeletesNothing() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        for index in 0..<10 { try write(container + "/tmp/t\(index)", bytes: index) }
        try FileManager.default.createDirectory(atPath: container + "/tmp/work", withIntermediateDirectories: true)
        try write(container + "/tmp/work/part", bytes: 7)
        try write(container + "/Documents/keep.txt", bytes: 3)
        #expect(symlink(container + "/Documents/keep.txt", container + "/tmp/link") == 0)
        for index in 0..<4 { try write(container + "/Documents/Inbox/old\(index).pdf", bytes: 100) }
        for index in 0..<6 {
            try write(container + "/Library/Caches/c\(index)", bytes: 400)
            try setAge(container + "/Library/Caches/c\(index)", days: index)
        }

        // An Inbox item's age counts from its arrival, which cannot be set back: a second's limit, and a wait.
        #expect(try waitUntilArrived(container + "/Documents/Inbox/old3.pdf", moreThan: 1))
        let arguments = ["--container", container, "clean", "--caches-max-bytes", "1K", "--inbox-max-age", "1s"]
        let dry = try InboxProcess.run(arguments + ["--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stderr.isEmpty)
        #expect(dry.lines.count == 4 + 12 + 4, "\(dry.stdoutText)")
        #expect(dry.lines.contains("         7  \(container)/tmp/work  (tmp: app not running)"))
        #expect(dry.lines.contains("       100  \(container)/Documents/Inbox/old3.pdf  (older than 1 second)"))
        #expect(dry.lines.contains("       400  \(container)/Library/Caches/c5  (caches over 1024 bytes)"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/tmp").count == 12)
        #expect(logRecords(container, event: "deleted").isEmpty)

        let real = try InboxProcess.run(arguments)
        #expect(real.status == 0, "\(real.stderr)")
        #expect(real.stdout == dry.stdout, "the same lines, in the same order")
        #expect(real.stderr.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/tmp").isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").isEmpty)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: container + "/Library/Caches").sorted() == ["c0", "c1"])
        #expect(try String(contentsOfFile: container + "/Documents/keep.txt", encoding: .utf8) == "kkk")
        let deleted = logRecords(container, event: "deleted")
        #expect(deleted.count == 20)
        #expect(deleted.allSatisfy { ($0["path"] as? String)?.hasPrefix("/") == false })
        #expect(deleted.compactMap { $0["reason"] as? String }.filter { $0 == "caches over 1024 bytes" }.count == 4)
    }

    @Test func jsonPrintsAnArrayOfPathReasonAndDeleted() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let empty = try InboxProcess.run("--container", container, "clean", "--json")
        #expect(empty.status == 0)
        #expect(empty.lines == ["[]"])

        try write(container + "/tmp/a", bytes: 1)
        try write(container + "/tmp/b c", bytes: 2)
        try write(container + "/Documents/Inbox/old.pdf", bytes: 3)
        #expect(try waitUntilArrived(container + "/Documents/Inbox/old.pdf", moreThan: 1))
        for (flag, deleted) in [("--dry-run", false), (nil, true)] {
            let result = try InboxProcess.run(
                ["--container", container, "clean", "--json", "--inbox-max-age", "1s"] + (flag.map { [$0] } ?? []))
            #expect(result.status == 0, "\(result.stderr)")
            let array = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]])
            #expect(array.count == 3)
            #expect(array.allSatisfy { Set($0.keys) == ["path", "reason", "deleted"] })
            #expect(array.allSatisfy { $0["deleted"] as? Bool == deleted })
            let paths = array.compactMap { $0["path"] as? String }
            #expect(paths.first == container + "/Documents/Inbox/old.pdf")
            #expect(Set(paths.dropFirst()) == [container + "/tmp/a", container + "/tmp/b c"])
            #expect(array.first?["reason"] as? String == "older than 1 second")
        }
    }

    @Test func preferencesSetThePolicyAndFlagsOverrideThem() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let plist: [String: Any] = ["inboxMaxAge": 4, "tmpMaxAge": 60]
        let data = try PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0)
        try data.write(to: URL(fileURLWithPath: container + "/Library/Preferences/inbox.plist"))
        // Ages count from arrival: a.pdf arrives more than 4 seconds before b.pdf.
        try write(container + "/Documents/Inbox/a.pdf", bytes: 1)
        #expect(try waitUntilArrived(container + "/Documents/Inbox/a.pdf", moreThan: 4))
        try write(container + "/Documents/Inbox/b.pdf", bytes: 1)
        let byPreferences = try InboxProcess.run("--container", container, "clean", "--dry-run")
        #expect(byPreferences.lines == ["         1  \(container)/Documents/Inbox/a.pdf  (older than 4 seconds)"])
        #expect(try waitUntilArrived(container + "/Documents/Inbox/b.pdf", moreThan: 1))
        let byFlag = try InboxProcess.run("--container", container, "clean", "--dry-run", "--inbox-max-age", "1s")
        #expect(byFlag.lines.count == 2)
        #expect(byFlag.lines.allSatisfy { $0.hasSuffix("(older than 1 second)") })
        let bySize = try InboxProcess.run(
            "--container", container, "clean", "--dry-run", "--inbox-max-age", "1d", "--inbox-max-bytes", "1")
        #expect(bySize.lines == ["         1  \(container)/Documents/Inbox/a.pdf  (inbox over 1 bytes)"])
    }

    @Test(arguments: [
        ["--inbox-max-age", "3x"], ["--inbox-max-bytes", "-1"], ["--tmp-max-age", "1.5d"],
        ["--caches-max-bytes", "lots"], ["--caches-max-bytes"], ["--bogus"], ["extra"], ["--dry-run=yes"],
        ["--inbox-max-bytes", "99999999999T"],
    ])
    func badFlagsAreUsageErrors(arguments: [String]) throws {
        let folder = try Scratch()
        for container in [try folder.initContainer(), folder.path + "/none"] {
            let result = try InboxProcess.run(["--container", container, "clean"] + arguments)
            #expect(result.status == 64, "\(arguments): \(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.first?.hasPrefix("inbox: ") == true)
            #expect(lines.last == "See 'inbox clean --help'.")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test func aMissingContainerExits73() throws {
        let folder = try Scratch()
        let result = try InboxProcess.run("--container", folder.path + "/none", "clean", "--dry-run")
        #expect(result.status == 73)
        #expect(result.stderr.hasPrefix("inbox: ") && result.stderr.contains("inbox init"))
        #expect(result.stdout.isEmpty)
    }

    @Test func helpShowsTheUsage() throws {
        let result = try InboxProcess.run("clean", "--help")
        #expect(result.status == 0)
        #expect(result.stdoutText.contains("USAGE: inbox [--container DIR] clean [--dry-run]"))
        #expect(result.stdoutText.contains("--caches-max-bytes SIZE"))
    }

    @Test func aRunningWatcherCleansAtStartAndKeepsNewTmpEntries() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try write(container + "/tmp/old", bytes: 1)
        try setAge(container + "/tmp/old", days: 4)
        try write(container + "/tmp/new", bytes: 1)
        // Its own date is old, but it arrives now (ARCHITECTURE.md, "Age from arrival").
        try write(container + "/Documents/Inbox/old.pdf", bytes: 1)
        try setAge(container + "/Documents/Inbox/old.pdf", days: 40)

        let watcher = try WatchProcess(container)
        let cleaned = waitUntil(timeout: 30) { !logRecords(container, event: "deleted").isEmpty }
        #expect(cleaned, "the watcher applied the policy after its start-up scan")
        let paths = Set(logRecords(container, event: "deleted").compactMap { $0["path"] as? String })
        #expect(paths == ["tmp/old"])
        #expect(logRecords(container, event: "arrived").count == 1, "the scan came first")
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/Inbox/old.pdf"))

        // While the watcher holds the container, only old tmp entries go.
        try write(container + "/tmp/older", bytes: 2)
        try setAge(container + "/tmp/older", days: 5)
        let running = try InboxProcess.run("--container", container, "clean")
        #expect(running.status == 0, "\(running.stderr)")
        #expect(running.lines == ["         2  \(container)/tmp/older  (older than 3 days)"])
        #expect(try watcher.stop().status == 0)

        let stopped = try InboxProcess.run("--container", container, "clean")
        #expect(stopped.lines == ["         1  \(container)/tmp/new  (tmp: app not running)"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/tmp").isEmpty)
    }

    @Test(.long) func aHundredThousandFilesAreCleanedQuietlyWhenNotOnATerminal() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let tmp = container + "/tmp"
        for index in 0..<100_000 {
            let fd = open(tmp + "/f\(index)", O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            close(fd)
        }
        let result = try InboxProcess.run("--container", container, "clean")
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty, "no progress line when stderr is not a terminal")
        #expect(result.lines.count == 100_000)
        #expect(try FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty)
        #expect(deletedRecordCount(container) == 100_000)
    }

    @Test(.long) func aCleanKilledAtAnyMomentLeavesEachFileOrExactlyOneRecord() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let tmp = container + "/tmp"
        let count = 20_000
        for index in 0..<count {
            let fd = open(tmp + "/f\(index)", O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            close(fd)
        }
        // Each round is killed once it has printed some lines: by then it is in the middle of another batch.
        for (round, lines) in [1, 300, 700, 1500].enumerated() {
            let child = try InboxProcess.start(["--container", container, "clean"].map { Array($0.utf8) })
            _ = child.readStdout(until: { $0.split(separator: "\n").count >= lines })
            kill(child.pid, SIGKILL)
            let result = try child.finish()
            #expect(result.status == CrashSweep.killed, "round \(round) ended before it was killed")
        }
        let last = try InboxProcess.run("--container", container, "clean")
        #expect(last.status == 0, "\(last.stderr)")

        var records: [String: Int] = [:]
        for record in logRecords(container, event: "deleted") {
            records[record["path"] as? String ?? "", default: 0] += 1
        }
        let left = Set(try FileManager.default.contentsOfDirectory(atPath: tmp))
        #expect(left.isEmpty, "left in tmp: \(left.sorted().prefix(5))")
        #expect(records.count == count)
        #expect(records.values.allSatisfy { $0 == 1 }, "a file logged twice")
        #expect((0..<count).allSatisfy { records["tmp/f\($0)"] == 1 })
        #expect(
            !FileManager.default.fileExists(atPath: container + "/Library/Application Support/inbox/cleanup.intent"))
    }

    @Test func theWatchersCleanNeverDelaysAnArrival() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let tmp = container + "/tmp"
        let count = 50_000
        let old = timespec(tv_sec: time(nil) - 30 * 86_400, tv_nsec: 0)
        for index in 0..<count {
            let fd = open(tmp + "/old\(index)", O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0o644)
            guard fd >= 0, futimens(fd, [old, old]) == 0 else {
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
            close(fd)
        }
        let watcher = try WatchProcess(container)
        let file = try folder.file("first.txt", "first")
        #expect(try InboxProcess.run("--container", container, "deliver", file).status == 0)
        #expect(waitUntil { logRecords(container, event: "arrived").count == 1 })
        #expect(waitUntil(timeout: 180) { (try? FileManager.default.contentsOfDirectory(atPath: tmp).isEmpty) == true })
        #expect(try watcher.stop().status == 0)

        let arrived = try #require(logRecords(container, event: "arrived").first?["seq"] as? Int)
        let deleted = logRecords(container, event: "deleted").compactMap { $0["seq"] as? Int }
        #expect(deleted.count == count)
        #expect(arrived < (deleted.max() ?? 0), "the arrival is logged while the clean goes on")
    }

    @Test func aCleanWaitsForAnotherAndSaysSo() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try write(container + "/tmp/old.part", bytes: 10)
        // This test holds the cleanup lock, as a clean under way would.
        let lock = open(
            container + "/Library/Application Support/inbox/cleanup.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
        let child = try InboxProcess.start(["--container", container, "clean"].map { Array($0.utf8) })
        var waiting = pollfd(fd: child.stderr, events: Int16(POLLIN), revents: 0)
        #expect(waitUntil(timeout: 30) { poll(&waiting, 1, 0) == 1 }, "the clean said it waits")
        #expect(FileManager.default.fileExists(atPath: container + "/tmp/old.part"), "nothing done while it waits")
        close(lock)
        let result = try child.finish()
        #expect(result.status == 0)
        #expect(result.stderr.contains("another clean of this container is under way; waiting for it to end"))
        #expect(!FileManager.default.fileExists(atPath: container + "/tmp/old.part"))
    }

    // MARK: - Helpers

    /// Writes `bytes` bytes of `k` (or `x`) at `path`.
    private func write(_ path: String, bytes: Int) throws {
        let byte = path.hasSuffix("keep.txt") ? "k" : "x"
        try Data(String(repeating: byte, count: bytes).utf8).write(to: URL(fileURLWithPath: path))
    }

    /// Waits until `path` arrived more than `seconds` ago by its ctime (which nobody can set back), as the cleanup
    /// counts an Inbox item's age; false at the deadline.
    private func waitUntilArrived(_ path: String, moreThan seconds: Int) throws -> Bool {
        waitUntil(timeout: 30, interval: 0.05) {
            var status = stat()
            return lstat(path, &status) == 0 && time(nil) - status.st_ctim.tv_sec > seconds
        }
    }

    private func setAge(_ path: String, days: Int) throws {
        try setAge(path, seconds: days * 86_400)
    }

    /// Sets the access and modification times to that long ago, on a symbolic link itself.
    private func setAge(_ path: String, seconds: Int) throws {
        let then = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
        guard utimensat(AT_FDCWD, path, [then, then], AT_SYMLINK_NOFOLLOW) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
    }

    /// The `deleted` records in every log file, counted without parsing each line.
    private func deletedRecordCount(_ container: String) -> Int {
        let folder = container + "/Library/Application Support/inbox"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        let marker = Array(#","event":"deleted","#.utf8)
        var count = 0
        for name in names where name.hasPrefix("events") && name.hasSuffix(".jsonl") {
            guard let data = FileManager.default.contents(atPath: folder + "/" + name) else { continue }
            count += data.split(separator: 0x0A).filter { $0.firstRange(of: marker) != nil }.count
        }
        return count
    }
}
