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
