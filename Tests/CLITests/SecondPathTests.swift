import Foundation
import Glibc
import TestSupport
import Testing

/// One container reached through two paths on this host: a bindfs mount and its backing folder (ARCHITECTURE.md,
/// "One watcher per container"). bindfs keeps `flock` in this kernel's view of the mount, so each path's watcher
/// takes its own lock: `watch.lock` names the host, its boot and the watcher, and a watcher through the other path
/// that finds a live one named there exits 75.
@Suite(.serialized) struct SecondPathTests {
    /// A declared container on a bindfs mount, and its path on either side.
    private static func container() throws -> (mount: FuseMount, mounted: String, backing: String) {
        let mount = try FuseMount()
        let mounted = mount.mountPoint + "/c"
        let made = try InboxProcess.run("--container", mounted, "init", "--single-host")
        #expect(made.status == 0, "\(made.stderr)")
        return (mount, mounted, mount.backing + "/c")
    }

    @Test(arguments: [true, false])
    func aSecondWatcherThroughTheOtherPathExits75(firstThroughTheMount: Bool) throws {
        let (mount, mounted, backing) = try Self.container()
        _ = mount
        let (first, second) = firstThroughTheMount ? (mounted, backing) : (backing, mounted)
        let watcher = try WatchProcess(first, ["--on-arrival", "move", "--poll-interval", "0.2", "--settle", "0.3"])
        defer { watcher.kill9() }
        let started = logRecords(first, event: "watch-started").count
        for arguments in [["watch", "--once"], ["watch", "--on-arrival", "move"]] {
            let refused = try InboxProcess.run(["--container", second] + arguments)
            #expect(refused.status == 75, "\(arguments): \(refused.stderr)")
            let lines = refused.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(lines)")
            #expect(lines.first?.contains("pid \(watcher.child.pid)") == true, "\(refused.stderr)")
        }
        #expect(logRecords(first, event: "watch-started").count == started, "the second logged nothing")
        // The first goes on alone: a file delivered through either path is moved once.
        for (index, path) in [mounted, backing].enumerated() {
            try Data("file \(index)".utf8).write(to: URL(fileURLWithPath: path + "/Documents/f\(index).part"))
            #expect(rename(path + "/Documents/f\(index).part", path + "/Documents/Inbox/f\(index).txt") == 0)
        }
        #expect(waitUntil(timeout: 30) { logRecords(first, event: "moved").count == 2 })
        #expect(logRecords(first, event: "arrived").count == 2)
        #expect(try InboxProcess.run(["--container", first, "ls"]).stdoutText.isEmpty)
        let stopped = try watcher.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        // Once it has stopped, the other path's watcher starts.
        let once = try InboxProcess.run(["--container", second, "watch", "--once"])
        #expect(once.status == 0, "\(once.stderr)")
    }

    /// A lock whose named watcher is gone (killed), or whose pid another process has since, holds nothing.
    @Test func aLockNamingAGoneWatcherHoldsNothing() throws {
        let (mount, mounted, backing) = try Self.container()
        _ = mount
        let watcher = try WatchProcess(mounted, ["--poll-interval", "0.2"])
        watcher.kill9()
        let once = try InboxProcess.run(["--container", backing, "watch", "--once"])
        #expect(once.status == 0, "\(once.stderr)")
        // This test's own pid, with another start time: not the watcher.
        let lock = backing + "/Library/Application Support/inbox/watch.lock"
        let text = try String(contentsOfFile: lock, encoding: .utf8)
        let forged = text.split(separator: "\n").enumerated().map { index, line in
            index == 0 ? "\(getpid())" : line.hasPrefix("started ") ? "started 1" : String(line)
        }
        try (forged.joined(separator: "\n") + "\n").write(toFile: lock, atomically: false, encoding: .utf8)
        let again = try InboxProcess.run(["--container", mounted, "watch", "--once"])
        #expect(again.status == 0, "\(again.stderr)")
    }
}
