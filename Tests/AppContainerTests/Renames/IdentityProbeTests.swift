import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// `IdentityProbe` on real filesystems (ARCHITECTURE.md, "Network and FUSE filesystems"): a bind mount keeps a
/// file's inode under a second name and lists it; the probe leaves nothing behind, and removes what a killed probe
/// left. sshfs, which fails it, is `SystemTests`'; rclone, which refuses `link`, `RcloneTests`'.
@Suite(.serialized) struct IdentityProbeTests {
    @Test func aBindMountKeepsIdentityAndTheProbeLeavesNothing() throws {
        let mount = try FuseMount(options: ["attr_timeout=30", "entry_timeout=30"])
        // A killed probe's folder: its file no longer locked by anyone.
        #expect(mkdir(mount.mountPoint + "/.inbox-probe.1.2", 0o700) == 0)
        try makeFile(mount.mountPoint + "/.inbox-probe.1.2/a", [])
        #expect(link(mount.mountPoint + "/.inbox-probe.1.2/a", mount.mountPoint + "/.inbox-probe.1.2/b") == 0)
        // A live probe's, its file locked by its prober: left alone.
        #expect(mkdir(mount.mountPoint + "/.inbox-probe.3.4", 0o700) == 0)
        let live = try FileDescriptor(
            mount.mountPoint + "/.inbox-probe.3.4/a", [.writeOnly, .create, .exclusive], mode: 0o600)
        #expect(flock(live.rawValue, LOCK_EX) == 0)
        let folder = try FileDescriptor(folder: mount.mountPoint)
        #expect(IdentityProbe.verdict(in: folder.rawValue) == .keepsIdentity)
        // A FUSE client may still hold a name unlinked a moment after its file was closed as a hidden name of its own.
        let left = try FileManager.default.contentsOfDirectory(atPath: mount.backing).filter {
            !$0.hasPrefix(".fuse_hidden")
        }
        #expect(left == [".inbox-probe.3.4"], "\(left)")
        // Asked again, remembered: nothing is made.
        #expect(IdentityProbe.verdict(in: folder.rawValue) == .keepsIdentity)
    }
}
