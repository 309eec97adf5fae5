import Foundation
import Glibc
import TestSupport
import Testing

/// One container, one watcher, whatever happens to `watch.lock` or the container (ARCHITECTURE.md, "One watcher per
/// container"): a watcher whose lock file is unlinked or replaced handles no batch beside another, a container
/// removed while `watch --root` serves it is let go with one line and nothing is made again in it, and a watcher
/// that cannot start writes nothing into the running one's log.
@Suite struct WatcherLockTests {
    private static let stateFolder = "/Library/Application Support/inbox"
    private static let lockName = stateFolder + "/watch.lock"

    /// Starts `inbox watch`, does `disturb` to its lock file, starts a second `inbox watch` (which takes the new
    /// name), then delivers a batch: the first stops at it with exit status 75 and one line, and every file
    /// arrives once, by the second.
    private func twoWatchers(_ disturb: (_ lock: String, _ folder: Scratch) throws -> Void) throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let first = try WatchProcess(container)
        defer { _ = first.child.terminate() }
        try disturb(container + Self.lockName, folder)
        let second = try WatchProcess(container)
        defer { _ = second.child.terminate() }
        try writeFiles(40, in: folder.path + "/batch", prefix: "item")
        try renameAll(from: folder.path + "/batch", into: container + "/Documents/Inbox")
        #expect(waitUntil { logRecords(container, event: "arrived").count >= 40 })
        let ended = waitUntil(timeout: 30) { processIsGone(first.child.pid) }
        #expect(ended, "the first watcher stops at the batch it may no longer handle")
        let paths = logRecords(container, event: "arrived").compactMap { $0["path"] as? String }
        #expect(paths.count == 40 && Set(paths).count == 40, "\(paths.count) arrived records for 40 files")
        #expect(logRecords(container, event: "error").isEmpty, "the first writes nothing as it stops")
        #expect(!processIsGone(second.child.pid), "the second goes on")
        #expect(try second.stop().status == 0)
        guard ended else { return }
        let result = try first.child.finish()
        #expect(result.status == 75)
        // Past the line it said when it started, one line: why it stopped.
        let said = result.stderr.split(separator: "\n").dropFirst()
        #expect(said.count == 1 && said.first?.contains("watch.lock") == true, "\(said)")
    }

    @Test func anUnlinkedLockLetsTheSecondWatcherAloneHandleTheBatch() throws {
        try twoWatchers { lock, _ in #expect(unlink(lock) == 0) }
    }

    @Test func aReplacedLockLetsTheSecondWatcherAloneHandleTheBatch() throws {
        try twoWatchers { lock, folder in
            let replacement = try folder.file("new.lock", "")
            #expect(rename(replacement, lock) == 0)
        }
    }

    @Test func aSecondWatcherThatCannotStartWritesNothingInTheFirstsLog() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let first = try WatchProcess(container)
        defer { _ = first.child.terminate() }
        // The start-up scan done: the first's log holds still.
        #expect(waitUntil { !logRecords(container, event: "rescan").isEmpty })
        let log = container + Self.stateFolder + "/events.jsonl"
        let before = FileManager.default.contents(atPath: log)
        let second = try InboxProcess.run("--container", container, "watch")
        #expect(second.status == 75)
        #expect(second.stderr.hasPrefix("inbox: ") && second.stderr.contains("pid \(first.child.pid)"))
        #expect(FileManager.default.contents(atPath: log) == before, "the second added a record")
        #expect(try first.stop().status == 0)
    }

    /// 500 times: a container is made under the root (renamed in, whole), served (its one file moved), removed
    /// with `rm -rf` and let go. Nothing is left behind, nothing handled twice, one line said per removal.
    @Test(.long) func containersRemovedWhileServedLeaveNothingBehind() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let template = folder.path + "/template"
        #expect(try InboxProcess.run("--container", template, "init").status == 0)
        // stderr into a file: read as the fleet runs, and never a full pipe.
        let stderrFile = folder.path + "/fleet.stderr"
        let fleet = try InboxProcess.start(
            ["-c", "exec \"$0\" watch --root \"$1\" --on-arrival move 2>\"$2\"", InboxProcess.binary, root, stderrFile]
                .map { Array($0.utf8) }, executable: "/bin/sh")
        defer { _ = fleet.terminate() }
        let path = root + "/c"
        let staging = folder.path + "/staging"
        /// The fleet's lines about the container, but for those that say it is watched.
        func lines() -> [Substring] {
            let text = (try? String(contentsOfFile: stderrFile, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").filter { $0.contains(" \(path): ") && !$0.contains(": watching ") }
        }
        /// Whether the fleet holds a descriptor in the container (or on the file `named`).
        func holdsAny(named: String? = nil) -> Bool {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(fleet.pid)/fd")) ?? []
            return fds.contains {
                let target = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(fleet.pid)/fd/" + $0))
                if let named { return target == named }
                return target.map { $0 == path || $0.hasPrefix(path + "/") } ?? false
            }
        }
        var leftBehind: [String] = []
        var handled: [Int] = []
        var said: [Int] = []
        let began = Date()
        for round in 0..<500 {
            let (copied, copyOutput) = try runProgram("/bin/cp", ["-a", template, staging], mergingStderr: true)
                .statusAndOutput
            #expect(copied == 0, "\(copyOutput)")
            try writeFiles(1, in: staging + "/Documents/Inbox", prefix: "round\(round)-")
            #expect(rename(staging, path) == 0)
            // Served: its file moved, its start-up scan over (the checkpoint written after it) and its first clean
            // (its lock made, and let go). A removal at the very moment the watcher makes a file can still leave
            // it (ARCHITECTURE.md, "One watcher per container"). An event in the root wakes the inotify thread,
            // which takes up a new container's folders when it next wakes.
            let served = waitUntil(timeout: 30) {
                close(open(root + "/.wake", O_CREAT | O_WRONLY, 0o644))
                unlink(root + "/.wake")
                return logRecords(path, event: "moved").count == 1
                    && FileManager.default.fileExists(atPath: path + Self.stateFolder + "/arrived.checkpoint")
                    && FileManager.default.fileExists(atPath: path + Self.stateFolder + "/cleanup.lock")
                    && !holdsAny(named: path + Self.stateFolder + "/cleanup.lock")
            }
            #expect(served, "round \(round): the file is moved")
            if logRecords(path, event: "arrived").count != 1 { handled.append(round) }
            let before = lines().count
            let (removed, removeOutput) = try runProgram("/bin/rm", ["-rf", path], mergingStderr: true).statusAndOutput
            let letGo = waitUntil(timeout: 30) { lines().count > before && !holdsAny() }
            #expect(letGo, "round \(round): the container is let go")
            if removed != 0 || FileManager.default.fileExists(atPath: path) {
                let left = FileManager.default.subpaths(atPath: path) ?? []
                leftBehind.append("round \(round): \(removeOutput) holding \(left)")
                #expect(waitUntil { (try? FileManager.default.removeItem(atPath: path)) != nil })
            }
            // Said once: nothing more comes once it is let go.
            if lines().count != before + 1 { said.append(round) }
            if !served || !letGo || leftBehind.count > 5 { break }
        }
        print("500 containers made, served, removed and let go in \(Int(Date().timeIntervalSince(began))) s")
        #expect(leftBehind.isEmpty, "\(leftBehind.count) left behind: \(leftBehind.prefix(5))")
        #expect(handled.isEmpty, "handled other than once in rounds \(handled.prefix(10))")
        #expect(said.isEmpty, "other than one line in rounds \(said.prefix(10)): \(lines().suffix(5))")
        kill(fleet.pid, SIGTERM)
        #expect(try fleet.finish().status == 0)
        #expect(lines().count == 500, "one line per removal")
    }
}
