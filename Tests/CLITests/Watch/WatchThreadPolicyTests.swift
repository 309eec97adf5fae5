import Dispatch
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// Which of a watcher's threads wait their turn (ARCHITECTURE.md, "Threads that wait their turn"): the preparing thread
/// is `SCHED_BATCH`, and so is the inotify thread of a watcher of one container while a backlog of names waits; a
/// process serving many keeps that thread ordinary, and every thread that renames is ordinary.
@Suite struct WatchThreadPolicyTests {
    /// `SCHED_OTHER` and `SCHED_BATCH` of `<sched.h>`.
    private static let ordinary = 0
    private static let batch = 3

    /// Each thread of `pid` by name, with its scheduling policy (field 41 of `/proc/PID/task/TID/stat`).
    private func policies(_ pid: pid_t) -> [(name: String, policy: Int)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            let folder = "/proc/\(pid)/task/\(task)/"
            guard let name = try? String(contentsOfFile: folder + "comm", encoding: .utf8),
                let stat = try? String(contentsOfFile: folder + "stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // After the name's closing parenthesis come the fields from the third (the state) on.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 38, let policy = Int(fields[38]) else { return nil }
            return (name.trimmingCharacters(in: .whitespacesAndNewlines), policy)
        }
    }

    /// Delivers `count` files into `container`'s Inbox at once and waits until Documents holds them.
    private func burst(_ count: Int, into container: String, _ folder: Scratch, prefix: String) throws {
        try writeFiles(count, in: folder.path + "/" + prefix, prefix: prefix)
        try renameAll(from: folder.path + "/" + prefix, into: container + "/Documents/Inbox")
        let moved = waitUntil(timeout: 60) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: container + "/Documents")) ?? []
            return names.filter { $0.hasPrefix(prefix) }.count == count
        }
        #expect(moved, "every file of the burst moved into \(container)/Documents")
    }

    @Test func aWatcherOfOneContainerReadsItsEventsInTheBackgroundOnlyWhileABacklogWaits() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let watcher = try WatchProcess(container, ["--on-arrival", "move"])
        let pid = watcher.child.pid
        func policy(of name: String) -> [Int] { policies(pid).filter { $0.name == name }.map(\.policy) }
        #expect(policy(of: "inbox-inotify") == [Self.ordinary], "no backlog yet")

        // A burst renamed in on another thread, while this one looks at the inotify thread's policy.
        let count = 20_000
        try writeFiles(count, in: folder.path + "/staging", prefix: "burst")
        let renamed = DispatchSemaphore(value: 0)
        let renameFailure = Mutex<String?>(nil)
        let (staging, inbox) = (folder.path + "/staging", container + "/Documents/Inbox")
        Thread.detachNewThread {
            do {
                try renameAll(from: staging, into: inbox)
            } catch {
                renameFailure.withLock { $0 = "\(error)" }
            }
            renamed.signal()
        }
        func movedCount() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: container + "/Documents")) ?? []).count - 1
        }
        var sawBackground = false
        _ = waitUntil(timeout: 120, interval: 0.001) {
            sawBackground = policy(of: "inbox-inotify") == [Self.batch]
            return sawBackground || movedCount() == count
        }
        #expect(sawBackground, "in the background during the burst")
        #expect(policy(of: "inbox-prepare") == [Self.batch], "the next batch's preparation: \(policies(pid))")
        #expect(policies(pid).first { $0.name == "inbox" }?.policy == Self.ordinary, "the thread that renames")
        #expect(renamed.wait(timeout: .now() + 120) == .success)
        #expect(renameFailure.withLock { $0 } == nil, "the burst renamed into the Inbox")
        #expect(waitUntil(timeout: 120) { movedCount() == count }, "every file moved")
        // No event for a second: the next file's wake is news again.
        #expect(waitUntil(timeout: 30) { policy(of: "inbox-inotify") == [Self.ordinary] }, "\(policies(pid))")
        #expect(try watcher.stop().status == 0)
    }

    @Test func aProcessServingManyContainersKeepsItsInotifyThreadAndItsTurnsOrdinary() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        for name in ["a", "b"] {
            let result = try InboxProcess.run("--container", root + "/" + name, "init")
            #expect(result.status == 0, "\(result.stderr)")
        }
        let fleet = try InboxProcess.start(["watch", "--root", root, "--on-arrival", "move"].map { Array($0.utf8) })
        defer { _ = fleet.terminate() }
        for name in ["a", "b"] {
            #expect(waitUntil(timeout: 30) { !logRecords(root + "/" + name, event: "watch-started").isEmpty })
        }
        try burst(300, into: root + "/a", folder, prefix: "first")
        try burst(300, into: root + "/b", folder, prefix: "second")
        let threads = policies(fleet.pid)
        kill(fleet.pid, SIGTERM)
        #expect(try fleet.finish().status == 0)
        let byName = Dictionary(grouping: threads, by: \.name).mapValues { $0.map(\.policy) }
        #expect(byName["inbox-inotify"] == [Self.ordinary], "\(threads)")
        // The pool's threads take the turns, renames included; some are started by background threads.
        #expect(byName["inbox-watch"]?.isEmpty == false, "\(threads)")
        #expect(byName["inbox-watch"]?.allSatisfy { $0 == Self.ordinary } == true, "\(threads)")
    }
}
