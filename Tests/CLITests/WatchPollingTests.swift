import Foundation
import FuseSupport
import Glibc
import Testing

/// `inbox watch` and `inbox status` on FUSE mounts (ARCHITECTURE.md, "Network and FUSE filesystems"): polling said
/// and shown, a remote file handed over, and `--single-host` where the lock does not reach other hosts (a bindfs
/// mount named `fuse.sshfs` by its subtype stands for sshfs).
@Suite(.serialized) struct WatchPollingTests {
    @Test func onAnSshfsMountWatchStartsOnlyWithSingleHost() throws {
        let mount = try FuseMount(options: ["subtype=sshfs"])
        let container = mount.mountPoint + "/c"
        #expect(try InboxProcess.run("--container", container, "init").status == 0)
        let refused = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(refused.status == 64)
        let lines = refused.stderr.split(separator: "\n")
        // One line says why; after it, as after every usage error (64), the usage line.
        #expect(lines.first?.contains("fuse.sshfs") == true && lines.first?.contains("--single-host") == true)
        #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("Usage: ") || $0.hasPrefix("See ") }, "\(lines)")
        #expect(logRecords(container, event: "watch-started").isEmpty, "nothing is started or logged")
        // A remote file (written into the backing folder) is there before the start.
        try Data("remote\n".utf8).write(to: URL(fileURLWithPath: mount.backing + "/c/Documents/Inbox/remote.txt"))
        let once = try InboxProcess.run(
            "--container", container, "watch", "--once", "--single-host", "--poll-interval", "0.2", "--settle", "0.5")
        #expect(once.status == 0, "\(once.stderr)")
        #expect(once.stderr.contains("polling every"), "\(once.stderr)")
        let started = logRecords(container, event: "watch-started")
        #expect(started.last?["polling"] as? String == "fuse.sshfs")
        // `--once` waits for what is settling: the remote file arrived, once.
        let arrived = logRecords(container, event: "arrived").compactMap { $0["path"] as? String }
        #expect(arrived == ["Documents/Inbox/remote.txt"])
        let status = try InboxProcess.run("--container", container, "status", "--json")
        let object = try JSONSerialization.jsonObject(with: Data(status.stdoutText.utf8)) as? [String: Any]
        let filesystem = object?["filesystem"] as? [String: Any]
        #expect(filesystem?["polling"] as? String == "fuse.sshfs")
        #expect(filesystem?["cache_options"] as? [String] == [])
        #expect((object?["watcher"] as? [String: Any])?["running"] as? Bool == false, "§7's fields stay")
        let text = try InboxProcess.run("--container", container, "status")
        #expect(text.stdoutText.contains("filesystem fuse.sshfs: polling"), "\(text.stdoutText)")
    }

    /// `watch --root` on a bindfs mount: each container's Inbox polled in the pool's turns; a remote file is moved
    /// into Documents once, beside a local delivery into another container.
    @Test func aFleetOnAFuseMountMovesRemoteFilesOnce() throws {
        let mount = try FuseMount()
        let root = mount.mountPoint + "/apps"
        for name in ["a", "b"] {
            #expect(try InboxProcess.run("--container", root + "/" + name, "init").status == 0)
        }
        let fleet = try InboxProcess.start(
            ["watch", "--root", root, "--on-arrival", "move", "--poll-interval", "0.2", "--settle", "0.5"].map {
                Array($0.utf8)
            })
        defer { _ = fleet.terminate() }
        for name in ["a", "b"] {
            #expect(waitUntil(timeout: 30) { !logRecords(root + "/" + name, event: "rescan").isEmpty })
        }
        try Data("remote\n".utf8).write(to: URL(fileURLWithPath: mount.backing + "/apps/b/Documents/Inbox/r.txt"))
        // This host's write through the mount (inotify sees it), renamed in from beside the Inbox: `deliver` on
        // bindfs needs the rename fallback of the other moves.
        try Data("local\n".utf8).write(to: URL(fileURLWithPath: root + "/a/Documents/l.txt.part"))
        #expect(rename(root + "/a/Documents/l.txt.part", root + "/a/Documents/Inbox/l.txt") == 0)
        #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: root + "/b/Documents/r.txt") })
        #expect(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: root + "/a/Documents/l.txt") })
        #expect(waitUntil(timeout: 30) { logRecords(root + "/b", event: "moved").count == 1 })
        #expect(logRecords(root + "/b", event: "arrived").count == 1)
        #expect(logRecords(root + "/b", event: "watch-started").last?["polling"] as? String == "fuse")
        #expect(fleet.terminate() == 0)
    }

    @Test func pollIntervalAndSettleTakeSecondsAboveZero() throws {
        let folder = try TemporaryFolder()
        let container = try folder.container()
        for (option, value) in [("--poll-interval", "0"), ("--settle", "nan"), ("--poll-interval", "soon")] {
            let result = try InboxProcess.run("--container", container, "watch", "--once", option, value)
            #expect(result.status == 64, "\(option) \(value)")
            #expect(result.stderr.hasPrefix("inbox: '\(option)' needs a number of seconds"), "\(result.stderr)")
        }
        #expect(try InboxProcess.run("--container", container, "watch", "--once", "--settle", "0.5").status == 0)
    }
}
