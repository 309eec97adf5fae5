import Foundation
import Glibc
import TestSupport
import Testing

/// Why the mounts over ssh cannot be made here, in one line; nil when they can.
private let unavailable = FuseMount.unavailable(.sshfs) ?? FuseMount.unavailable(.rcloneSftp)

/// Containers on the network filesystems a user mounts over ssh, sshfs and rclone's sftp backend, each reaching an
/// OpenSSH server the test starts on loopback (DESIGN.md §13, "Identity must survive a link"): sshfs gives a file a
/// new inode number under each new name and rclone refuses `link`, so inbox refuses both, `init` included, with 73
/// (75 for `import -`) and one line naming the filesystem, and writes nothing there.
@Suite(.serialized, .enabled(if: unavailable == nil, Comment(rawValue: unavailable ?? "")))
struct SshMountTests {
    /// The fixture works at all: the mount is the filesystem named, what the server's side holds is read through
    /// the mount byte for byte, and what is written through the mount lands on the server's side.
    @Test(arguments: [FuseMount.Program.sshfs, .rcloneSftp])
    func aFileWrittenOnTheServerIsReadThroughTheMount(program: FuseMount.Program) throws {
        try SystemCheck.expectTheMountServesTheBacking(try FuseMount(program: program))
    }

    @Test(arguments: [FuseMount.Program.sshfs, .rcloneSftp])
    func initIsRefusedWithOneLineNamingTheFilesystem(program: FuseMount.Program) throws {
        let mount = try FuseMount(program: program)
        let container = mount.mountPoint + "/c"
        SystemCheck.expectRefused(
            try InboxProcess.run(["--container", container, "init"], killedAfter: 60), "init",
            naming: program.mountType)
        #expect(!FileManager.default.fileExists(atPath: mount.backing + "/c/Documents"), "no container was built")
    }

    /// A container made on the server (`inbox init` in the backing folder) and reached through sshfs: every
    /// command refuses, one line each, and nothing is logged or moved.
    @Test func aContainerMadeOnTheServerIsRefusedThroughSshfsByEveryCommand() throws {
        let mount = try FuseMount(program: .sshfs)
        let served = mount.backing + "/c"
        let made = try InboxProcess.run("--container", served, "init")
        #expect(made.status == 0, "\(made.stderr)")
        try Data("an item".utf8).write(to: URL(fileURLWithPath: served + "/Documents/Inbox/x"))
        let source = mount.root + "/f"
        try Data("to deliver".utf8).write(to: URL(fileURLWithPath: source))
        let before = try SystemCheck.Snapshot(container: served)
        #expect(before.log["events.jsonl"] != nil && before.documents["Inbox/x"] != nil, "\(before)")
        let container = mount.mountPoint + "/c"
        let message = "From: a@example.com\nTo: b@example.com\nSubject: on sshfs\n\nbody\n"

        let commands: [(arguments: [String], input: String, status: Int32)] = [
            (["status"], "", 73), (["ls"], "", 73), (["move", "x"], "", 73), (["deliver", source], "", 73),
            (["watch", "--once"], "", 73), (["import", "-"], message, 75), (["clean"], "", 73),
        ]
        for (arguments, input, status) in commands {
            let result = try InboxProcess.run(["--container", container] + arguments, input: input, killedAfter: 60)
            SystemCheck.expectRefused(result, arguments.joined(separator: " "), naming: "fuse.sshfs", status: status)
            #expect(
                try SystemCheck.Snapshot(container: served) == before, "\(arguments): nothing logged, nothing moved")
        }
        #expect(FileManager.default.contents(atPath: source) == Data("to deliver".utf8), "the source stays")
    }
}
