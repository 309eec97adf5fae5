import Dispatch
import Foundation
import Glibc
import TestSupport
import Testing

/// A container on a real rclone mount, which refuses `renameat2`'s flags and `link` too (ARCHITECTURE.md, "Network
/// and FUSE filesystems"): no container can live there, so `init` is refused, and a container made on the "server"
/// (the backing folder) and reached through the mount is refused by every command: 73 (75 for `import -`), one line
/// naming the filesystem, nothing logged, nothing lost.
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
        expectOneLineRefusal(result, command, status: status, naming: ["fuse.rclone", "hard links"])
    }

    @Test func initIsRefusedAndBuildsNothing() throws {
        let mount = try FuseMount(program: .rclone)
        Self.expectOneLineNamingRclone(try Self.run("--container", mount.mountPoint + "/c", "init"), "init")
        #expect(try Self.visible(mount.mountPoint).isEmpty, "no folder is made")
        Self.expectOneLineNamingRclone(
            try Self.run("--container", mount.mountPoint + "/c", "init", "--single-host"), "init --single-host")
    }

    @Test func aContainerReachedThroughTheMountIsRefusedByEveryCommandAndLosesNothing() throws {
        let mount = try FuseMount(program: .rclone)
        // Made on the "server", with an item in its Inbox.
        let served = mount.backing + "/c"
        #expect(try Self.run("--container", served, "init", "--single-host").status == 0)
        try Data("kept".utf8).write(to: URL(fileURLWithPath: served + "/Documents/Inbox/b.txt"))
        let log = served + "/Library/Application Support/inbox/events.jsonl"
        let logged = FileManager.default.contents(atPath: log)
        let container = mount.mountPoint + "/c"
        let outside = try Scratch()
        let source = try outside.file("a.txt", "delivered")
        let message = ImportCrashTests.message(1, subject: "on rclone", attachments: ["c.bin"])
        let mail = try outside.file("message.eml", message)
        for command in [
            ["status"], ["ls"], ["log"], ["deliver", source], ["move", "b.txt"], ["import", mail], ["clean"],
            ["watch", "--once", "--single-host", "--on-arrival", "move"], ["init"],
        ] {
            Self.expectOneLineNamingRclone(try InboxProcess.run(["--container", container] + command), "\(command)")
        }
        // Standard input is an MTA's: anything but the message's own fault is 75, for it to try again (never
        // bounced), with the same one line.
        Self.expectOneLineNamingRclone(
            try Self.run("--container", container, "import", "-", input: message), "import -", status: 75)
        #expect(FileManager.default.contents(atPath: source) == Data("delivered".utf8), "the source stays")
        #expect(FileManager.default.contents(atPath: log) == logged, "nothing is logged")
        #expect(try Self.visible(served + "/Documents/Inbox") == ["b.txt"])
        #expect(try Self.visible(served + "/Documents") == ["Inbox"])
    }
}
