import Dispatch
import Foundation
import FuseSupport
import Glibc
import Testing

/// A container on a real rclone mount, which refuses `renameat2`'s flags and `link` too (ARCHITECTURE.md, "Network
/// and FUSE filesystems"): no move can be made there, so each command that needs one exits 73 with one line naming
/// the filesystem, and nothing is lost; the watcher starts only with `--single-host`, and stops with 73.
@Suite(.serialized) struct RcloneTests {
    /// The names in a folder, hidden ones (staging, claims) left out.
    static func visible(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") }.sorted()
    }

    /// Runs `inbox ARGS…` to its end, killed after `seconds` (a command that loops must not hang the suite).
    static func run(_ arguments: String..., input: String = "", seconds: Int = 60) throws -> InboxProcess.Result {
        try InboxProcess.run(arguments, input: input, killedAfter: seconds)
    }

    /// One line on stderr, naming the filesystem and why; exit status 73 (`status`).
    static func expectOneLineNamingRclone(_ result: InboxProcess.Result, _ command: String, status: Int32 = 73) {
        #expect(result.status == status, "\(command): \(result.status) \(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(command): \(lines)")
        #expect(lines.first?.contains("fuse.rclone") == true, "\(command): \(result.stderr)")
        #expect(lines.first?.contains("hard links") == true, "\(command): \(result.stderr)")
    }

    @Test func deliverMoveImportAndWatchOnceExit73AndLoseNothing() throws {
        let mount = try FuseMount(program: .rclone)
        let container = mount.mountPoint + "/c"
        let made = try Self.run("--container", container, "init")
        #expect(made.status == 0, "\(made.stderr)")
        // Read through the mount: rclone writes a file into its backing folder a few seconds after it is closed.
        let inbox = container + "/Documents/Inbox"
        let outside = try TemporaryFolder()
        let source = try outside.file("a.txt", "delivered")
        Self.expectOneLineNamingRclone(try Self.run("--container", container, "deliver", source), "deliver")
        #expect(FileManager.default.contents(atPath: source) == Data("delivered".utf8), "the source stays")
        #expect(try Self.visible(inbox).isEmpty)
        // Items put in the Inbox through the mount (rclone lists its backing folder anew only every 5 minutes), a
        // file and a folder, stay there.
        try Data("kept".utf8).write(to: URL(fileURLWithPath: inbox + "/b.txt"))
        try FileManager.default.createDirectory(atPath: inbox + "/d", withIntermediateDirectories: false)
        try Data("inside".utf8).write(to: URL(fileURLWithPath: inbox + "/d/e.txt"))
        Self.expectOneLineNamingRclone(try Self.run("--container", container, "move", "b.txt"), "move a file")
        Self.expectOneLineNamingRclone(try Self.run("--container", container, "move", "d"), "move a folder")
        let message = ImportCrashTests.message(1, subject: "on rclone", attachments: ["c.bin"])
        let mail = try outside.file("message.eml", message)
        Self.expectOneLineNamingRclone(try Self.run("--container", container, "import", mail), "import a file")
        #expect(FileManager.default.contents(atPath: mail) == Data(message.utf8), "the source stays")
        // Standard input is an MTA's: anything but the message's own fault is 75, for it to try again (never
        // bounced), with the same one line.
        Self.expectOneLineNamingRclone(
            try Self.run("--container", container, "import", "-", input: message), "import -", status: 75)
        #expect(try Self.visible(inbox) == ["b.txt", "d"])
        let watch = try Self.run(
            "--container", container, "watch", "--once", "--single-host", "--on-arrival", "move", "--no-clean",
            "--poll-interval", "0.2", "--settle", "0.5")
        #expect(watch.status == 73, "\(watch.stderr)")
        // Each item's failure is one line, and the run's end one more; each names the filesystem.
        let failures = watch.stderr.split(separator: "\n").filter { $0.contains("hard links") }
        #expect(!failures.isEmpty && failures.allSatisfy { $0.contains("fuse.rclone") }, "\(watch.stderr)")
        #expect(try Self.visible(inbox) == ["b.txt", "d"])
        #expect(try Self.visible(inbox + "/d") == ["e.txt"])
        #expect(try Self.visible(container + "/Documents") == ["Inbox"])
        #expect(FileManager.default.contents(atPath: inbox + "/b.txt") == Data("kept".utf8))
    }

    @Test func watchStartsOnlyWithSingleHost() throws {
        let mount = try FuseMount(program: .rclone)
        let container = mount.mountPoint + "/c"
        #expect(try Self.run("--container", container, "init").status == 0)
        for once in [["--once"], []] {
            let refused = try Self.runList(["--container", container, "watch"] + once)
            #expect(refused.status == 64, "\(refused.stderr)")
            let lines = refused.stderr.split(separator: "\n")
            #expect(lines.first?.contains("fuse.rclone") == true && lines.first?.contains("--single-host") == true)
            #expect(lines.dropFirst().allSatisfy { $0.hasPrefix("Usage: ") || $0.hasPrefix("See ") }, "\(lines)")
        }
        #expect(logRecords(container, event: "watch-started").isEmpty, "nothing is started or logged")
    }

    /// A running watcher whose move is refused stops, rather than retry forever: 73, the reason logged and said.
    @Test func aRunningWatcherStopsWith73AndKeepsTheItem() throws {
        let mount = try FuseMount(program: .rclone)
        let container = mount.mountPoint + "/c"
        #expect(try Self.run("--container", container, "init").status == 0)
        let watcher = try RunningWatcher(
            container,
            ["--single-host", "--on-arrival", "move", "--no-clean", "--poll-interval", "0.2", "--settle", "0.5"])
        defer { watcher.kill9() }
        try Data("kept".utf8).write(to: URL(fileURLWithPath: container + "/Documents/Inbox/f.txt"))
        let status = watcher.child.exitStatus(within: 30)
        #expect(status == 73, "the watcher stopped with 73")
        let inbox = container + "/Documents/Inbox"
        #expect(try Self.visible(inbox) == ["f.txt"])
        #expect(FileManager.default.contents(atPath: inbox + "/f.txt") == Data("kept".utf8))
        let errors = logRecords(container, event: "error")
        #expect(errors.contains { ($0["message"] as? String)?.contains("fuse.rclone") == true }, "\(errors)")
        #expect(errors.contains { $0["exit_status"] as? Int == 73 }, "the run's end is logged: \(errors)")
        // The item's failure, then the run's end: the batch's records are written before the watcher stops.
        let events = logRecords(container).compactMap { $0["event"] as? String }
        #expect(Array(events.suffix(3)) == ["error", "watch-stopped", "error"], "\(events)")
    }

    private static func runList(_ arguments: [String]) throws -> InboxProcess.Result {
        try InboxProcess.run(arguments.map { Array($0.utf8) })
    }
}
