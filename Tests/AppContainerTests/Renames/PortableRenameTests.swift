import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// `renameNoReplace` on a real FUSE filesystem (bindfs), which refuses `renameat2`'s flags.
@Suite(.serialized) struct PortableRenameTests {
    @Test func aFileMovesByLinkThenUnlinkAndAClashIsRefused() throws {
        let mount = try FuseMount()
        let folder = try FileDescriptor(folder: mount.mountPoint)
        try makeFile(mount.mountPoint + "/a", [1])
        try makeFile(mount.mountPoint + "/taken", [2])
        let before = try status(mount.mountPoint + "/a")
        #expect(throws: Errno.invalidArgument) {
            try system_renameat2(folder.rawValue, "a", folder.rawValue, "b", .noReplace)
        }
        try renameNoReplace(folder.rawValue, "a", folder.rawValue, "b")
        #expect(!exists(mount.mountPoint + "/a"))
        // The mount's attribute cache may still count the old name: the backing folder tells.
        let after = try status(mount.backing + "/b")
        #expect(after.inode == before.inode && after.linkCount == 1)
        #expect(RenameFlagSupport.isKnownRefusing(folder.rawValue))
        #expect(throws: Errno.fileExists) { try renameNoReplace(folder.rawValue, "b", folder.rawValue, "taken") }
        #expect(try readFile(mount.mountPoint + "/b") == [1] && readFile(mount.mountPoint + "/taken") == [2])
    }

    @Test func aFolderMovesOntoAnEmptyFolderAndAClashIsRefused() throws {
        let mount = try FuseMount()
        let folder = try FileDescriptor(folder: mount.mountPoint)
        #expect(mkdir(mount.mountPoint + "/report", 0o755) == 0)
        try makeFile(mount.mountPoint + "/report/page", [1])
        #expect(mkdir(mount.mountPoint + "/taken", 0o755) == 0)
        try renameNoReplace(folder.rawValue, "report", folder.rawValue, "moved")
        #expect(try readFile(mount.mountPoint + "/moved/page") == [1])
        #expect(!exists(mount.mountPoint + "/report"))
        #expect(throws: Errno.fileExists) { try renameNoReplace(folder.rawValue, "moved", folder.rawValue, "taken") }
        #expect(exists(mount.mountPoint + "/moved/page"))
        let taken = try FileManager.default.contentsOfDirectory(atPath: mount.mountPoint + "/taken")
        #expect(taken.isEmpty)
    }

    @Test func aLinkThatAlreadyHappenedCountsAsDone() throws {
        let mount = try FuseMount()
        let folder = try FileDescriptor(folder: mount.mountPoint)
        // Once the filesystem is known to refuse rename flags (the kernel answers EEXIST for a taken name before it
        // asks the filesystem), a `link` that finds its own inode under the new name counts as made.
        try makeFile(mount.mountPoint + "/first", [0])
        try renameNoReplace(folder.rawValue, "first", folder.rawValue, "second")
        try makeFile(mount.mountPoint + "/a", [1])
        #expect(link(mount.mountPoint + "/a", mount.mountPoint + "/b") == 0)
        try renameNoReplace(folder.rawValue, "a", folder.rawValue, "b")
        #expect(!exists(mount.mountPoint + "/a"))
        #expect(try status(mount.backing + "/b").linkCount == 1)
    }

    /// An item moved aside (a claim, a deletion's or a cleanup's aside) by `link` and `unlink`, cut between the two:
    /// put back, the aside is unlinked, never renamed beside the item as a second name of it (`name-1`).
    @Test func anAsideCutBetweenLinkAndUnlinkIsPutBackByUnlinkingIt() throws {
        let mount = try FuseMount()
        let folder = try FileDescriptor(folder: mount.mountPoint)
        try makeFile(mount.mountPoint + "/item", [1])
        #expect(link(mount.mountPoint + "/item", mount.mountPoint + "/.aside") == 0)
        #expect(
            try putBack(name(".aside"), from: folder.rawValue, into: folder.rawValue, as: name("item")) == name("item"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: mount.backing) == ["item"])
        #expect(try status(mount.backing + "/item").linkCount == 1)
        // An aside that is another file still goes beside the name.
        try makeFile(mount.mountPoint + "/.other", [2])
        #expect(
            try putBack(name(".other"), from: folder.rawValue, into: folder.rawValue, as: name("item"))
                == name("item-1"))
        #expect(try readFile(mount.mountPoint + "/item") == [1] && readFile(mount.mountPoint + "/item-1") == [2])
    }

    @Test func aLocalFilesystemKeepsTheAtomicRename() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(folder: scratch.path)
        try makeFile(scratch.at("a"), [1])
        try renameNoReplace(folder.rawValue, "a", folder.rawValue, "b")
        #expect(!RenameFlagSupport.isKnownRefusing(folder.rawValue))
        #expect(try readFile(scratch.at("b")) == [1])
    }

    @Test func theMountTableTellsAFuseFilesystemApart() throws {
        let mount = try FuseMount(options: ["attr_timeout=30", "entry_timeout=30"])
        let folder = try FileDescriptor(folder: mount.mountPoint)
        let filesystem = try Filesystem(of: folder)
        #expect(filesystem.type == Filesystem.fuseType)
        #expect(filesystem.pollReason != nil)
        // No FUSE client can tell whether the filesystem forwards locks (bindfs does not by default).
        #expect(filesystem.localLockReason == "FUSE")
        let scratch = try Scratch()
        defer { scratch.remove() }
        let local = try Filesystem(of: try FileDescriptor(folder: scratch.path))
        #expect(local.pollReason == nil && local.localLockReason == nil)
    }

    @Test func fuseAndNolockNeedASingleHost() {
        #expect(Filesystem(type: Filesystem.fuseType, mountType: "fuse.sshfs", options: []).localLockReason == "FUSE")
        #expect(Filesystem(type: Filesystem.fuseType, mountType: "fuse", options: []).localLockReason == "FUSE")
        #expect(Filesystem(type: 0x6969, mountType: "nfs4", options: ["rw"]).localLockReason == nil)
        let nfs = Filesystem(type: 0x6969, mountType: "nfs4", options: ["rw", "local_lock=all", "acdirmax=60"])
        #expect(nfs.localLockReason == "local_lock=all" && nfs.pollReason == "nfs4")
        #expect(nfs.cacheOptions == ["acdirmax=60"])
        #expect(Filesystem(type: 0x6969, mountType: "nfs4", options: ["local_lock=none"]).localLockReason == nil)
    }
}
