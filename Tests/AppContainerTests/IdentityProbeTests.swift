import AppContainer
import Foundation
import FuseSupport
import Glibc
import Testing

/// `IdentityProbe` on real filesystems (ARCHITECTURE.md, "Network and FUSE filesystems"): a bind mount keeps a
/// file's inode under a second name and lists it; the probe leaves nothing behind, and removes what a killed probe
/// left. sshfs, which fails it, is `SystemTests`'; rclone, which refuses `link`, `RcloneTests`'.
@Suite(.serialized) struct IdentityProbeTests {
    @Test func aBindMountKeepsIdentityAndTheProbeLeavesNothing() throws {
        let mount = try FuseMount(options: ["attr_timeout=30", "entry_timeout=30"])
        // A killed probe's names: its file no longer locked by anyone.
        try makeFile(mount.mountPoint + "/.inbox-probe.1.2", [])
        #expect(link(mount.mountPoint + "/.inbox-probe.1.2", mount.mountPoint + "/.inbox-probe.1.2.link") == 0)
        // A live probe's name, locked by its prober: left alone.
        let live = try FileDescriptor(
            mount.mountPoint + "/.inbox-probe.3.4", [.writeOnly, .create, .exclusive], mode: 0o600)
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
