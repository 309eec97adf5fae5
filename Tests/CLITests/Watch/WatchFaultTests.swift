import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// The watcher on the fault paths of a real filesystem (ARCHITECTURE.md, "No silent failure"): an Inbox on
/// another filesystem, an immutable Documents, an item that cannot be sealed, a full disk, folders replaced
/// under it. Each failure is an `error` record, the item keeps its place, every other item goes on, and
/// `watch --once` exits with the first failure's status.
@Suite(.serialized) struct WatchFaultTests {
    @Test func anInboxOnAnotherFilesystemIsMovedByCopy() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        guard let mount = TemporaryMount(at: container + "/Documents/Inbox") else { return }
        defer { mount.remove() }
        let files = try (0..<3).map { try folder.file("across\($0).txt", "across \($0)") }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(watch.status == 0, "\(watch.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").isEmpty)
        for index in 0..<3 {
            let moved = container + "/Documents/across\(index).txt"
            #expect(FileManager.default.contents(atPath: moved) == Data("across \(index)".utf8))
        }
        #expect(logRecords(container, event: "moved").count == 3)
        #expect(logRecords(container, event: "error").isEmpty)
        #expect(try journalEntries(container).isEmpty, "every copy's intent ended")
    }

    @Test func anImmutableDocumentsLeavesTheItemsWithAnErrorUntilItCanMove() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let files = try (0..<2).map { try folder.file("stuck\($0).txt", "stuck \($0)") }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        guard chattr("+i", container + "/Documents") else { return }
        let refused = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(chattr("-i", container + "/Documents"))
        #expect(refused.status == 77, "EPERM is refused: \(refused.stderr)")
        #expect(refused.stderr.contains("stuck0.txt"), "one line on stderr per failure")
        let errors = logRecords(container, event: "error")
        #expect(errors.count == 2)
        #expect(errors.allSatisfy { $0["during"] as? String == "move" && $0["errno"] as? Int == Int(EPERM) })
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").count == 2)
        #expect(logRecords(container, event: "moved").isEmpty, "the log claims no move")
        // The next start retries the decided moves: no second `arrived`, and each file moved once.
        let retried = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(retried.status == 0, "\(retried.stderr)")
        #expect(logRecords(container, event: "arrived").count == 2)
        #expect(logRecords(container, event: "moved").count == 2)
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/stuck1.txt"))
    }

    @Test func aRunningWatcherRetriesAFailedMoveWithAGrowingDelay() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        guard chattr("+i", container + "/Documents") else { return }
        let watcher = try WatchProcess(container, ["--on-arrival", "move"])
        try writeFiles(1, in: container + "/Documents/Inbox", prefix: "retried")
        // Tried at once, then after 1 s, then 2 s: three errors, and never a second `arrived`.
        let retried = waitUntil(timeout: 30) { logRecords(container, event: "error").count >= 3 }
        #expect(chattr("-i", container + "/Documents"))
        #expect(retried, "the move is tried again")
        let times = logRecords(container, event: "error").compactMap { $0["time"] as? String }.prefix(3)
        let gaps = zip(times.dropFirst(), times).map { rfc3339($0) - rfc3339($1) }
        #expect(gaps.count == 2 && gaps[1] > gaps[0], "the delay grows: \(gaps)")
        #expect(waitUntil(timeout: 30) { logRecords(container, event: "moved").count == 1 })
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/retried0.txt"))
        #expect(try watcher.stop().status == 0)
        #expect(logRecords(container, event: "arrived").count == 1)
    }

    @Test func anItemThatCannotBeSealedDoesNotStopTheOthers() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let inbox = container + "/Documents/Inbox"
        let files = try ["a.txt", "locked.txt", "z.txt"].map { try folder.file($0, "content of \($0)") }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        guard chattr("+i", inbox + "/locked.txt") else { return }
        let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(chattr("-i", inbox + "/locked.txt"))
        #expect(watch.status == 77, "\(watch.stderr)")
        #expect(Set(logRecords(container, event: "moved").compactMap { $0["from"] as? String }).count == 2)
        let errors = logRecords(container, event: "error")
        #expect(errors.count == 1)
        #expect(errors.first?["path"] as? String == "Documents/Inbox/locked.txt")
        #expect(FileManager.default.fileExists(atPath: inbox + "/locked.txt"), "the item keeps its place")
        #expect(try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move").status == 0)
        #expect(logRecords(container, event: "arrived").count == 3, "each arrived once")
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/locked.txt"))
    }

    @Test func aFullDiskLeavesTheHardLinkedItemAndTheOthersGoOn() throws {
        let folder = try Scratch()
        let root = folder.path + "/small"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        guard let mount = TemporaryMount(at: root, size: "1m") else { return }
        defer { mount.remove() }
        let container = root + "/container"
        #expect(try InboxProcess.run("--container", container, "init").status == 0)
        // A 700 KB file in tmp, hard-linked into the Inbox: its private copy does not fit.
        let big = container + "/tmp/big.bin"
        try Data(repeating: 7, count: 700_000).write(to: URL(fileURLWithPath: big))
        #expect(link(big, container + "/Documents/Inbox/big.bin") == 0)
        let small = try folder.file("small.txt", "small")
        #expect(try InboxProcess.run("--container", container, "deliver", small).status == 0)
        let watch = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(watch.status == 74, "ENOSPC is an I/O error: \(watch.stderr)")
        #expect(
            logRecords(container, event: "arrived").compactMap { $0["path"] as? String } == [
                "Documents/Inbox/small.txt"
            ])
        #expect(logRecords(container, event: "error").first?["errno"] as? Int == Int(ENOSPC))
        #expect(FileManager.default.contents(atPath: container + "/Documents/Inbox/big.bin")?.count == 700_000)
        #expect(try FileManager.default.attributesOfItem(atPath: big)[.referenceCount] as? Int == 2)
    }

    @Test func aReplacedDocumentsIsReopenedAndTheLogNamesTheRealFolder() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let documents = container + "/Documents"
        let watcher = try WatchProcess(container, ["--on-arrival", "move"])
        try writeFiles(1, in: documents + "/Inbox", prefix: "first")
        #expect(waitUntil { logRecords(container, event: "moved").count == 1 })
        // Documents renamed away, and a new one made with its Inbox.
        try FileManager.default.moveItem(atPath: documents, toPath: container + "/Documents.old")
        try FileManager.default.createDirectory(atPath: documents + "/Inbox", withIntermediateDirectories: true)
        // Watched again at once ("documents replaced"), or, when the new Inbox was not there yet for that, at the
        // hub's next try ("watched again").
        let reasons: Set<String> = ["documents replaced", "watched again"]
        #expect(
            waitUntil {
                logRecords(container, event: "rescan").contains { reasons.contains($0["reason"] as? String ?? "") }
            })
        try writeFiles(1, in: documents + "/Inbox", prefix: "second")
        #expect(waitUntil { logRecords(container, event: "moved").count == 2 }, "an arrival in the new Inbox")
        #expect(FileManager.default.fileExists(atPath: documents + "/second0.txt"), "moved into the new Documents")
        // Documents deleted and made again.
        try FileManager.default.removeItem(atPath: documents)
        try FileManager.default.createDirectory(atPath: documents + "/Inbox", withIntermediateDirectories: true)
        try writeFiles(1, in: documents + "/Inbox", prefix: "third")
        #expect(waitUntil { logRecords(container, event: "moved").count == 3 })
        #expect(FileManager.default.fileExists(atPath: documents + "/third0.txt"))
        #expect(try watcher.stop().status == 0)
        #expect(logRecords(container, event: "error").isEmpty)
    }

    private func journalEntries(_ container: String) throws -> [String] {
        try MoveJournal(container: Container.open(at: container)).entriesLeft()
    }
}

/// Seconds since the epoch of a log record's `time`.
private func rfc3339(_ text: String) -> Double {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.date(from: text)?.timeIntervalSince1970 ?? 0
}

/// A tmpfs mounted over `path` for one test; nil (and a line saying why the test is skipped) where mounting
/// is not allowed.
struct TemporaryMount {
    let path: String

    init?(at path: String, size: String = "64m") {
        guard mount("inbox-test", path, "tmpfs", 0, "size=\(size)") == 0 else {
            print("skipped: cannot mount a tmpfs on \(path) (\(String(cString: strerror(errno)))): needs root")
            return nil
        }
        self.path = path
    }

    func remove() {
        umount2(path, Int32(MNT_DETACH))
    }
}

/// Runs `chattr FLAG PATH`; false (and a line saying why the test is skipped) where it cannot.
func chattr(_ flag: String, _ path: String) -> Bool {
    guard let process = try? runProgram("/usr/bin/chattr", [flag, path]) else {
        print("skipped: chattr is not installed (e2fsprogs)")
        return false
    }
    if process.status != 0 { print("skipped: chattr \(flag) is not supported on \(path)") }
    return process.status == 0
}

/// An arrival's identity tells a new file from an old one, even when the new one reuses the old one's inode.
@Suite struct IdentityTests {
    @Test(arguments: [false, true]) func aNewItemThatReusesAnOldInodeArrives(folder isFolder: Bool) throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let inbox = container + "/Documents/Inbox"
        let first = inbox + "/first"
        try make(first, folder: isFolder)
        #expect(try InboxProcess.run("--container", container, "watch", "--once").status == 0)
        #expect(logRecords(container, event: "arrived").count == 1)
        let old = try FileManager.default.attributesOfItem(atPath: first)
        let inode = old[.systemFileNumber] as? UInt64
        let modified = old[.modificationDate] as? Date
        try FileManager.default.removeItem(atPath: first)
        // The filesystem hands the freed inode to the next file made beside it (ext4 and tmpfs do); a `cp -p`
        // copy gets the same size and modification time.
        let second = inbox + "/second"
        try make(second, folder: isFolder)
        try FileManager.default.setAttributes([.modificationDate: modified as Any], ofItemAtPath: second)
        guard (try FileManager.default.attributesOfItem(atPath: second)[.systemFileNumber] as? UInt64) == inode else {
            print("skipped: this filesystem did not reuse the inode")
            return
        }
        #expect(try InboxProcess.run("--container", container, "watch", "--once").status == 0)
        #expect(
            logRecords(container, event: "arrived").compactMap { $0["path"] as? String }.last
                == "Documents/Inbox/second")
        #expect(logRecords(container, event: "arrived").count == 2)
    }

    private func make(_ path: String, folder: Bool) throws {
        if folder {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        } else {
            try Data("same bytes".utf8).write(to: URL(fileURLWithPath: path))
        }
    }
}

/// The watcher's cleanup never deletes what it has not handled yet (issue 9).
@Suite struct CleanupAndArrivalsTests {
    @Test func theStartUpCleanWaitsForTheStartUpScan() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>inboxMaxBytes</key><integer>1000</integer></dict></plist>
            """
        try Data(plist.utf8).write(to: URL(fileURLWithPath: container + "/Library/Preferences/inbox.plist"))
        let files = try (0..<3).map { try folder.file("big\($0).bin", String(repeating: "\($0)", count: 800)) }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        // A hook that takes its time: the clean must not go ahead of the arrivals it decides on.
        let watch = try InboxProcess.run(
            "--container", container, "watch", "--once", "--exec", "sleep 0.3; echo move", "--jobs", "1")
        #expect(watch.status == 0, "\(watch.stderr)")
        #expect(logRecords(container, event: "deleted").isEmpty, "the clean deleted arrivals it had not seen handled")
        #expect(logRecords(container, event: "moved").count == 3)
        for index in 0..<3 { #expect(FileManager.default.fileExists(atPath: container + "/Documents/big\(index).bin")) }
    }
}
