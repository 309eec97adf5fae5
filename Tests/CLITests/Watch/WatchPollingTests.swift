import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox watch` and `inbox status` on FUSE mounts (ARCHITECTURE.md, "Network and FUSE filesystems"): polling said
/// and shown, a remote file handed over, and the single-host declaration where the lock does not reach other hosts
/// or paths (every FUSE filesystem; a bindfs mount named `fuse.sshfs` by its subtype shows the name).
@Suite(.serialized) struct WatchPollingTests {
    /// One line on stderr that names the filesystem and the declaration; `status` (73, 75 for `import -`).
    static func expectRefusedUntilDeclared(_ result: InboxProcess.Result, _ what: String, status: Int32 = 73) {
        expectOneLineRefusal(result, what, status: status, naming: ["fuse.sshfs", "init --single-host"])
    }

    @Test func onAFuseMountNothingWritesUntilTheContainerIsDeclaredSingleHost() throws {
        let mount = try FuseMount(options: ["subtype=sshfs"])
        let container = mount.mountPoint + "/c"
        // `init` builds the container and says, in one line, how to declare it.
        let made = try InboxProcess.run("--container", container, "init")
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stderr.split(separator: "\n").count == 1, "\(made.stderr)")
        #expect(made.stderr.contains("fuse.sshfs") && made.stderr.contains("init --single-host"), "\(made.stderr)")
        let logged = logRecords(container, event: nil).count
        let outside = try Scratch()
        let source = try outside.file("a.txt", "delivered")
        try Data("kept".utf8).write(to: URL(fileURLWithPath: container + "/Documents/Inbox/b.txt"))
        let message = ImportCrashTests.message(1, subject: "on fuse", attachments: ["c.bin"])
        let mail = try outside.file("message.eml", message)
        Self.expectRefusedUntilDeclared(try InboxProcess.run("--container", container, "deliver", source), "deliver")
        Self.expectRefusedUntilDeclared(try InboxProcess.run("--container", container, "move", "b.txt"), "move")
        Self.expectRefusedUntilDeclared(try InboxProcess.run("--container", container, "import", mail), "import")
        Self.expectRefusedUntilDeclared(
            try InboxProcess.run("--container", container, "import", "-", input: message), "import -",
            status: 75)
        Self.expectRefusedUntilDeclared(try InboxProcess.run("--container", container, "clean"), "clean")
        Self.expectRefusedUntilDeclared(try InboxProcess.run("--container", container, "watch", "--once"), "watch")
        #expect(logRecords(container, event: nil).count == logged, "nothing is logged")
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox") == ["b.txt"])
        #expect(try InboxProcess.run("--container", container, "status").status == 0, "reading needs no declaration")
        // Declared: kept in the preferences, every command writes.
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        let delivered = try InboxProcess.run("--container", container, "deliver", source)
        #expect(delivered.status == 0, "\(delivered.stderr)")
        #expect(delivered.stderr.isEmpty, "\(delivered.stderr)")
        #expect(try InboxProcess.run("--container", container, "move", "b.txt").status == 0)
    }

    /// `watch --single-host` declares it for one run.
    @Test func onAnSshfsNamedMountWatchSingleHostPollsForOneRun() throws {
        let mount = try FuseMount(options: ["subtype=sshfs"])
        let container = mount.mountPoint + "/c"
        #expect(try InboxProcess.run("--container", container, "init").status == 0)
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
            #expect(try InboxProcess.run("--container", root + "/" + name, "init", "--single-host").status == 0)
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
        let folder = try Scratch()
        let container = try folder.initContainer()
        for (option, value) in [("--poll-interval", "0"), ("--settle", "nan"), ("--poll-interval", "soon")] {
            let result = try InboxProcess.run("--container", container, "watch", "--once", option, value)
            #expect(result.status == 64, "\(option) \(value)")
            #expect(result.stderr.hasPrefix("inbox: '\(option)' needs a number of seconds"), "\(result.stderr)")
        }
        #expect(try InboxProcess.run("--container", container, "watch", "--once", "--settle", "0.5").status == 0)
    }
}
