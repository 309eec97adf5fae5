import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// The empty folder that a folder's move without rename flags makes as its new name (ARCHITECTURE.md, "Network and
/// FUSE filesystems"): told from a user's folder, and removed only while empty.
@Suite(.serialized) struct FolderPlaceholderTests {
    /// What the fallback leaves when cut off between its `mkdir` and its `rename` (here the rename fails, and so
    /// does the removal of the placeholder) is what `removeFolderPlaceholder` removes.
    @Test func theFallbacksLeftoverIsAPlaceholder() throws {
        let mount = try FuseMount()
        #expect(mkdir(mount.mountPoint + "/d", 0o755) == 0 && mkdir(mount.mountPoint + "/to", 0o755) == 0)
        let folder = try FileDescriptor(folder: mount.mountPoint)
        let target = try FileDescriptor(folder: mount.mountPoint + "/to")
        // The plain `rename` after the `mkdir`: the second `renameat2`, or the first once the device is known.
        let plan = SyscallFaultPlan(
            failing: RenameFlagSupport.isKnownRefusing(target.rawValue) ? 1 : 2, only: "renameat2", with: .ioError,
            also: (name: "unlinkat", call: 1, error: .ioError))
        #expect(throws: Errno.ioError) {
            try plan.run { try renameNoReplace(folder.rawValue, "d", target.rawValue, "d") }
        }
        #expect(try status(mount.backing + "/to/d").mode == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: mount.backing + "/to/d").isEmpty)
        #expect(try removeFolderPlaceholder(in: target.rawValue, "d"))
        try renameNoReplace(folder.rawValue, "d", target.rawValue, "d")
        #expect(try status(mount.backing + "/to/d").mode == 0o755)
        #expect(!(try removeFolderPlaceholder(in: target.rawValue, "d")))
    }

    @Test func onlyEmptyFoldersOfModeZeroAmongTheItemsNamesAreRemoved() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let documents = try FileDescriptor(folder: scratch.path)
        #expect(mkdir(scratch.at("d"), 0o755) == 0)  // a user's empty folder
        #expect(mkdir(scratch.at("d 2"), 0) == 0)  // a placeholder
        #expect(mkdir(scratch.at("d 3"), 0) == 0 && chmod(scratch.at("d 3"), 0o700) == 0)
        try makeFile(scratch.at("d 3/inside"))
        #expect(chmod(scratch.at("d 3"), 0) == 0)  // mode 0, but not empty
        #expect(mkdir(scratch.at("d 5"), 0) == 0)  // past the first free name
        #expect(mkdir(scratch.at("e"), 0) == 0)  // another item's name
        let removed = try removeFolderPlaceholders(
            for: try name("d"), in: documents.rawValue, naming: .documents)
        #expect(removed == 1)
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted()
        #expect(left == ["d", "d 3", "d 5", "e"])
        #expect(chmod(scratch.at("d 3"), 0o700) == 0)
    }
}
