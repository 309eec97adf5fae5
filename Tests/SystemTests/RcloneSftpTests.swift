import Foundation
import FuseSupport
import Glibc
import Testing

/// A container on rclone's sftp backend, over an OpenSSH server the test starts on loopback: rclone refuses `link`,
/// so `init` refuses the filesystem (DESIGN.md §13) with 73 and one line naming `fuse.rclone`.
@Suite(
    .serialized,
    .enabled(
        if: FuseMount.unavailable(.rcloneSftp) == nil, Comment(rawValue: FuseMount.unavailable(.rcloneSftp) ?? ""))
)
struct RcloneSftpTests {
    @Test func aFileWrittenOnTheServerIsReadThroughTheMount() throws {
        let mount = try FuseMount(program: .rcloneSftp)
        try SystemCheck.expectTheMountServesTheBacking(mount, type: "fuse.rclone")
    }

    @Test func initIsRefusedWithOneLineNamingTheFilesystem() throws {
        let mount = try FuseMount(program: .rcloneSftp)
        let container = mount.mountPoint + "/c"
        SystemCheck.expectRefused(
            try InboxProcess.run(["--container", container, "init"], killedAfter: 60), "init", naming: "fuse.rclone")
        #expect(!FileManager.default.fileExists(atPath: mount.backing + "/c/Documents"), "no container was built")
    }
}
