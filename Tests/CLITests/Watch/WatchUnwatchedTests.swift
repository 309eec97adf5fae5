import Foundation
import Glibc
import TestSupport
import Testing

/// A started watcher whose folders cannot be watched again (ARCHITECTURE.md, "libinotifytools"): said once and
/// logged, its Inbox polled meanwhile so that what is delivered still moves, and watched again once it can be; an
/// Inbox that cannot even be read ends the watcher as it ends one at start-up.
@Suite struct WatchUnwatchedTests {
    @Test(.enabled(if: WatchLimit.canBeSet, "needs a user namespace whose inotify watch limit can be set (unshare)"))
    func anInboxThatCannotBeWatchedStillMovesItsFilesAndIsWatchedAgainOnceItCanBe() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let documents = container + "/Documents"
        // In a user namespace of its own, whose limit of inotify watches (its user's) the test sets.
        let watcher = try WatchProcess(container, ["--on-arrival", "move"], under: WatchLimit.unshare)
        #expect(waitUntil { !logRecords(container, event: "rescan").isEmpty }, "the start-up scan is done")
        #expect(try WatchLimit.set(0, for: watcher.child.pid))
        // The Inbox renamed away: the watcher makes it again and starts over, and cannot watch it.
        try FileManager.default.moveItem(atPath: documents + "/Inbox", toPath: folder.path + "/moved-away")
        let unwatched = {
            logRecords(container, event: "error").filter { $0["during"] as? String == "watch the Inbox" }
        }
        #expect(waitUntil { !unwatched().isEmpty }, "the failure is logged in the container")
        #expect(unwatched().first?["errno"] as? Int == Int(ENOSPC))
        #expect(unwatched().first?["path"] as? String == "Documents/Inbox")
        let polled = { logRecords(container, event: "rescan").filter { $0["reason"] as? String == "unwatched" } }

        // Delivered meanwhile: found by a scan the poll asks for.
        try deliverByRename("meanwhile", into: documents + "/Inbox", folder)
        #expect(
            waitUntil { FileManager.default.fileExists(atPath: documents + "/meanwhile0.txt") },
            "moved though the Inbox is not watched")
        #expect(polled().contains { $0["found"] as? Int == 1 }, "by the poll's scan")
        // Once the last change is older than a clock tick could hide, the poll asks for no scan.
        #expect(waitUntil(timeout: 30) { stillFor(2.5) { polled().count } }, "no scan while nothing changes")

        #expect(try WatchLimit.set(1000, for: watcher.child.pid))
        #expect(
            waitUntil {
                logRecords(container, event: "rescan").contains { $0["reason"] as? String == "watched again" }
            }, "watched again once it can be, and scanned")
        try deliverByRename("after", into: documents + "/Inbox", folder)
        #expect(waitUntil { FileManager.default.fileExists(atPath: documents + "/after0.txt") }, "and moves again")
        let stopped = try watcher.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(unwatched().count == 1, "one record for the streak")
        let lines = stopped.stderr.split(separator: "\n")
        #expect(lines.filter { $0.contains("inotify watches are all taken") }.count == 1, "\(stopped.stderr)")
        #expect(lines.filter { $0.hasSuffix("watching the Inbox again") }.count == 1, "\(stopped.stderr)")
        #expect(logRecords(container, event: "moved").count == 2)
    }

    @Test func anInboxThatCannotBeReadAfterStartEndsTheWatcherAsAtStartUp() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let documents = container + "/Documents"
        let watcher = try WatchProcess(container, ["--on-arrival", "move"])
        // After the start-up scan: Documents swapped for a file in one step, so the watcher can neither make the
        // Inbox again nor watch it, nor read it.
        #expect(waitUntil { !logRecords(container, event: "rescan").isEmpty }, "the start-up scan is done")
        _ = try replaceWithFile(documents)
        #expect(waitUntil(timeout: 30) { processIsGone(watcher.child.pid) }, "the watcher ends")
        let ended = try watcher.stop()
        #expect(ended.status == 66, "\(ended.stderr)")
        #expect(
            logRecords(container, event: "error").filter { $0["during"] as? String == "watch the Inbox" }.count == 1,
            "the failure to watch is logged in the container")
        let ends = { logRecords(container, event: "error").filter { $0["during"] as? String == "watch" } }
        #expect(ends().map { $0["exit_status"] as? Int } == [66], "the end is logged in the container")
        // The same line, status and record as a watcher started so.
        let started = try InboxProcess.run("--container", container, "watch", "--on-arrival", "move")
        #expect(started.status == 66)
        #expect(ends().count == 2 && ends()[0]["message"] as? String == ends()[1]["message"] as? String)
        let last = ended.stderr.split(separator: "\n").last.map(String.init)
        #expect(last != nil && last == started.stderr.split(separator: "\n").last.map(String.init), "\(ended.stderr)")
    }

    @Test(.enabled(if: WatchLimit.canBeSet, "needs a user namespace whose inotify watch limit can be set (unshare)"))
    func aFleetsContainerLogsWatchStartedOnlyOnceItsInboxIsWatched() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        let container = root + "/a"
        #expect(try InboxProcess.run("--container", container, "init").status == 0)
        // One watch: the root's. The container's three cannot be had.
        let fleet = try InboxProcess.start(
            (Array(WatchLimit.unshare.dropFirst()) + [
                "/bin/sh", "-c", "echo 1 > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\"",
                InboxProcess.binary, "watch", "--root", root, "--on-arrival", "move",
            ]).map { Array($0.utf8) }, executable: WatchLimit.unshare[0])
        defer { _ = fleet.terminate() }
        let failed = {
            logRecords(container, event: "error").contains {
                $0["during"] as? String == "watch" && ($0["message"] as? String)?.contains("inotify watches") == true
            }
        }
        #expect(waitUntil(timeout: 30, failed), "its watcher fails, and says why in the container")
        #expect(logRecords(container, event: "watch-started").isEmpty, "no watch-started: it was never watched")
        #expect(logRecords(container, event: "watch-stopped").isEmpty)

        #expect(try WatchLimit.set(1000, for: fleet.pid))
        #expect(waitUntil(timeout: 60) { logRecords(container, event: "watch-started").count == 1 }, "tried again")
        try deliverByRename("served", into: container + "/Documents/Inbox", folder)
        #expect(waitUntil { FileManager.default.fileExists(atPath: container + "/Documents/served0.txt") })
        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
        let watching = result.stderr.split(separator: "\n").filter { $0.contains("\(container): watching ") }
        #expect(watching.count == 1, "said once, when watched: \(result.stderr)")
    }

    /// Writes `<prefix>0.txt` beside the container and renames it into `inbox`, as a mail importer does.
    private func deliverByRename(_ prefix: String, into inbox: String, _ folder: Scratch) throws {
        try writeFiles(1, in: folder.path + "/staging", prefix: prefix)
        try FileManager.default.moveItem(
            atPath: folder.path + "/staging/\(prefix)0.txt", toPath: inbox + "/\(prefix)0.txt")
    }

    /// Whether `value` stays the same for `seconds`: what no event can be waited for (a scan that must not come).
    private func stillFor(_ seconds: TimeInterval, _ value: () -> Int) -> Bool {
        let before = value()
        Thread.sleep(forTimeInterval: seconds)
        return value() == before
    }
}

/// The limit of inotify watches of a user namespace (`/proc/sys/user/max_inotify_watches`), which its root may set:
/// a watcher started in one of its own (`unshare`) can be left unable to watch, as one whose user took every watch.
enum WatchLimit {
    static let unshare = ["/usr/bin/unshare", "--user", "--map-root-user", "--"]

    static let canBeSet: Bool = {
        let probe = try? InboxProcess.run(
            (Array(unshare.dropFirst()) + ["/bin/sh", "-c", "echo 8 > /proc/sys/user/max_inotify_watches"]).map {
                Array($0.utf8)
            }, executable: unshare[0])
        return probe?.status == 0
    }()

    /// Sets the limit of the user namespace of process `pid`; returns whether it was set.
    static func set(_ limit: Int, for pid: pid_t) throws -> Bool {
        let result = try InboxProcess.run(
            ["--user", "--target", "\(pid)", "/bin/sh", "-c", "echo \(limit) > /proc/sys/user/max_inotify_watches"]
                .map { Array($0.utf8) }, executable: "/usr/bin/nsenter")
        return result.status == 0
    }
}
