import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox watch` with real inotify, real files and real processes.
@Suite struct WatchTests {
    @Test func filesPresentBeforeStartAreHandledOnce() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let files = try (0..<5).map { try folder.file("before\($0).txt", "waiting \($0)") }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        let once = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(once.status == 0, "\(once.stderr)")
        let arrived = logRecords(container, event: "arrived")
        #expect(arrived.count == 5)
        #expect(Set(arrived.compactMap { $0["path"] as? String }).count == 5)
        #expect(arrived.allSatisfy { ($0["sha256"] as? String)?.count == 64 && $0["type"] as? String == "text" })
        let mode =
            try FileManager.default.attributesOfItem(atPath: container + "/Documents/Inbox/before0.txt")[
                .posixPermissions] as? Int
        #expect(mode == 0o444, "sealed read-only")
        // A second start finds the same files again and handles none of them twice.
        #expect(try InboxProcess.run("--container", container, "watch", "--once").status == 0)
        #expect(logRecords(container, event: "arrived").count == 5)
        let moved = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(moved.status == 0)
        #expect(
            logRecords(container, event: "arrived").count == 5, "already arrived: not moved by a later --on-arrival")
    }

    @Test func tenThousandFilesThreeWaysAreEachHandledExactlyOnce() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let inbox = container + "/Documents/Inbox"
        try writeFiles(3_334, in: folder.path + "/deliver", prefix: "delivered")
        try writeFiles(3_333, in: folder.path + "/staging", prefix: "renamed")
        let watcher = try WatchProcess(container)
        let sources = try FileManager.default.contentsOfDirectory(atPath: folder.path + "/deliver").map {
            folder.path + "/deliver/" + $0
        }
        let deliver = try InboxProcess.start((["--container", container, "deliver"] + sources).map { Array($0.utf8) })
        try renameAll(from: folder.path + "/staging", into: inbox)
        try writeFiles(3_333, in: inbox, prefix: "written")
        #expect(try deliver.finish().status == 0)
        let all = waitUntil(timeout: 180) { logRecords(container, event: "arrived").count >= 10_000 }
        let stopped = try watcher.stop()
        #expect(all, "every file arrived: \(logRecords(container, event: "arrived").count) of 10000")
        #expect(stopped.status == 0, "\(stopped.stderr)")
        let paths = logRecords(container, event: "arrived").compactMap { $0["path"] as? String }
        #expect(paths.count == 10_000, "none twice")
        #expect(Set(paths).count == 10_000)
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox).count == 10_000)
        #expect(logRecords(container, event: "watch-stopped").count == 1)
    }

    @Test func anOverflowLosesNothing() throws {
        let limitPath = "/proc/sys/fs/inotify/max_queued_events"
        guard let original = try? String(contentsOfFile: limitPath, encoding: .utf8),
            (try? "64\n".write(toFile: limitPath, atomically: false, encoding: .utf8)) != nil
        else {
            print("skipped: \(limitPath) cannot be written here (needs root outside a read-only /proc)")
            return
        }
        let folder = try Scratch()
        let container = try folder.initContainer()
        try writeFiles(3_000, in: folder.path + "/staging", prefix: "burst")
        let watcher: WatchProcess
        do {
            // The limit applies to inotify instances created while it is low: only this watcher's.
            defer { try? original.write(toFile: limitPath, atomically: false, encoding: .utf8) }
            watcher = try WatchProcess(container)
        }
        // The start-up scan first: a rescan still pending would absorb the overflow's.
        #expect(waitUntil { !logRecords(container, event: "rescan").isEmpty })
        // Stop the watcher from reading while the burst lands, so the small queue surely overflows.
        kill(watcher.child.pid, SIGSTOP)
        try renameAll(from: folder.path + "/staging", into: container + "/Documents/Inbox")
        kill(watcher.child.pid, SIGCONT)
        let all = waitUntil(timeout: 120) { logRecords(container, event: "arrived").count >= 3_000 }
        let stopped = try watcher.stop()
        #expect(all, "\(logRecords(container, event: "arrived").count) of 3000 arrived")
        #expect(stopped.status == 0)
        #expect(logRecords(container, event: "overflow").count >= 1, "the overflow is logged")
        #expect(logRecords(container, event: "rescan").contains { $0["reason"] as? String == "overflow" })
        #expect(Set(logRecords(container, event: "arrived").compactMap { $0["path"] as? String }).count == 3_000)
    }

    @Test func aDeletedAndRecreatedInboxIsWatchedAgain() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let inbox = container + "/Documents/Inbox"
        let watcher = try WatchProcess(container)
        try writeFiles(1, in: inbox, prefix: "first")
        #expect(waitUntil { logRecords(container, event: "arrived").count == 1 })
        try FileManager.default.removeItem(atPath: inbox)
        try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: true)
        // Rescanned for the event that the Inbox was made again, or for the retry of its lost watch (once a second)
        // when that came first under load: a rescan still pending absorbs the other.
        #expect(
            waitUntil {
                logRecords(container, event: "rescan").contains {
                    ["inbox replaced", "watched again", "unwatched"].contains($0["reason"] as? String ?? "")
                }
            })
        try writeFiles(1, in: inbox, prefix: "second")
        #expect(waitUntil { logRecords(container, event: "arrived").count == 2 }, "an arrival after the recreation")
        try FileManager.default.moveItem(atPath: inbox, toPath: folder.path + "/moved-away")
        #expect(waitUntil { FileManager.default.fileExists(atPath: inbox) }, "the watcher recreates a missing Inbox")
        try writeFiles(1, in: inbox, prefix: "third")
        #expect(waitUntil { logRecords(container, event: "arrived").count == 3 })
        #expect(try watcher.stop().status == 0)
    }

    @Test func aSecondWatcherExits75NamingTheFirst() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let first = try WatchProcess(container)
        let second = try InboxProcess.run("--container", container, "watch")
        #expect(second.status == 75)
        #expect(second.stderr.hasPrefix("inbox: ") && second.stderr.contains("pid \(first.child.pid)"))
        #expect(logRecords(container, event: "error").isEmpty, "the second writes nothing into the first's log")
        let status = try InboxProcess.run("--container", container, "status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout)) as? [String: Any])
        let watcher = try #require(object["watcher"] as? [String: Any])
        #expect(watcher["running"] as? Bool == true)
        #expect(watcher["pid"] as? Int == Int(first.child.pid))
        let stopped = try first.stop()
        #expect(stopped.status == 0, "SIGTERM ends the watcher cleanly")
        #expect(logRecords(container, event: "watch-stopped").count == 1)
        let after = try InboxProcess.run("--container", container, "status", "--json")
        let afterObject = try #require(try JSONSerialization.jsonObject(with: Data(after.stdout)) as? [String: Any])
        #expect((afterObject["watcher"] as? [String: Any])?["running"] as? Bool == false)
    }

    @Test func symbolicLinksAndSpecialFilesAreRejectedUnopened() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let inbox = container + "/Documents/Inbox"
        let target = try folder.file("outside.txt", "never touched")
        let watcher = try WatchProcess(container)
        try FileManager.default.createSymbolicLink(atPath: inbox + "/link.txt", withDestinationPath: target)
        #expect(mkfifo(inbox + "/pipe", 0o644) == 0)
        #expect(waitUntil { logRecords(container, event: "rejected").count == 2 })
        #expect(try watcher.stop().status == 0)
        let reasons = Set(logRecords(container, event: "rejected").compactMap { $0["reason"] as? String })
        #expect(reasons == ["symbolic link", "FIFO"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox).isEmpty)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "never touched")
        let mode = try FileManager.default.attributesOfItem(atPath: target)[.posixPermissions] as? Int
        #expect(mode == 0o644, "the link's target is never sealed")
    }

    @Test func aHardLinkIsReplacedByAPrivateCopyBeforeSealing() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let outside = try folder.file("shared.txt", "shared")
        let watcher = try WatchProcess(container)
        try FileManager.default.linkItem(atPath: outside, toPath: container + "/Documents/Inbox/shared.txt")
        #expect(waitUntil { logRecords(container, event: "arrived").count == 1 })
        #expect(try watcher.stop().status == 0)
        let outsideAttributes = try FileManager.default.attributesOfItem(atPath: outside)
        let inboxAttributes = try FileManager.default.attributesOfItem(
            atPath: container + "/Documents/Inbox/shared.txt")
        #expect(outsideAttributes[.posixPermissions] as? Int == 0o644, "the other link is not sealed")
        #expect(outsideAttributes[.referenceCount] as? Int == 1)
        #expect(inboxAttributes[.posixPermissions] as? Int == 0o444)
        #expect(inboxAttributes[.systemFileNumber] as? Int != outsideAttributes[.systemFileNumber] as? Int)
        #expect(try String(contentsOfFile: container + "/Documents/Inbox/shared.txt", encoding: .utf8) == "shared")
    }
}

@Suite struct WatchServiceTests {
    @Test func systemdHearsReadyOnceTheInboxIsWatched() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let socket = try NotifySocket(folder.path + "/notify.sock")
        let watcher = try WatchProcess(container, environment: ["NOTIFY_SOCKET": socket.path])
        #expect(socket.receive(within: 30) == "READY=1")
        #expect(logRecords(container, event: "watch-started").count == 1, "READY=1 comes with watch-started")
        #expect(try watcher.stop().status == 0)
    }

    @Test func statusReportsPlacesOverflowsScansAndLimits() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        #expect(
            try InboxProcess.run("--container", container, "deliver", try folder.file("a.txt", "12345")).status == 0)
        #expect(try InboxProcess.run("--container", container, "watch", "--once").status == 0)
        let result = try InboxProcess.run("--container", container, "status", "--json")
        #expect(result.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [String: Any])
        let places = try #require(object["places"] as? [String: [String: Int]])
        #expect(places["inbox"] == ["files": 1, "bytes": 5])
        #expect(places["documents"] == ["files": 0, "bytes": 0], "Documents is counted without its Inbox")
        #expect(object["overflows"] as? Int == 0)
        #expect((object["last_scan"] as? String)?.hasSuffix("Z") == true)
        let limits = try #require(object["inotify"] as? [String: Int])
        let queued = try String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)
        #expect(limits["max_queued_events"] == Int(queued.trimmingCharacters(in: .whitespacesAndNewlines)))
        let text = try InboxProcess.run("--container", container, "status")
        #expect(text.stdoutText.contains("not running"))
    }

    @Test func aFolderDroppedInArrivesWholeAndMovesWhole() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try writeFiles(3, in: folder.path + "/album/inner", prefix: "photo")
        try FileManager.default.moveItem(atPath: folder.path + "/album", toPath: container + "/Documents/Inbox/album")
        let result = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(result.status == 0, "\(result.stderr)")
        let arrived = try #require(logRecords(container, event: "arrived").first)
        #expect(arrived["type"] as? String == "folder")
        #expect(arrived["size"] as? Int == 3 * "photo number 0\n".utf8.count)
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/album/inner").count == 3)
    }

    @Test func aKeptFolderArrivesOnceAcrossScans() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try writeFiles(2, in: folder.path + "/kept", prefix: "page")
        try FileManager.default.moveItem(atPath: folder.path + "/kept", toPath: container + "/Documents/Inbox/kept")
        for _ in 0..<3 {
            #expect(try InboxProcess.run("--container", container, "watch", "--once").status == 0)
        }
        #expect(logRecords(container, event: "arrived").count == 1, "a kept folder is not handled again")
    }
}
