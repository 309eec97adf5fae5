import Foundation
import Glibc
import TestSupport
import Testing

/// The mover's copy path and the write bit on a FUSE filesystem (bindfs), which refuses `O_TMPFILE` (ARCHITECTURE.md,
/// "Network and FUSE filesystems"): a hard-linked item is copied into Documents under a staging name, and a file the
/// watcher held open while it moved it gets its write bit back.
@Suite(.serialized) struct FuseCopyTests {
    /// A container on the mount whose Inbox holds `item.txt`, with a second name `other.txt` beside the container.
    static func hardLinkedItem(_ mount: FuseMount) throws -> String {
        let container = mount.mountPoint + "/container"
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        try Data("linked twice".utf8).write(to: URL(fileURLWithPath: mount.mountPoint + "/other.txt"))
        #expect(link(mount.mountPoint + "/other.txt", container + "/Documents/Inbox/item.txt") == 0)
        return container
    }

    /// Documents (as the backing folder holds it) has `item.txt` alone, one copy with the content, owner-writable and
    /// not the foreign link's file; the Inbox has nothing, hidden or not; the foreign link keeps its content.
    static func expectCopied(_ mount: FuseMount, _ label: String) throws {
        let documents = mount.backing + "/container/Documents"
        let names = try FileManager.default.contentsOfDirectory(atPath: documents).filter { $0 != "Inbox" }
        #expect(names == ["item.txt"], "\(label): \(names)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: documents + "/Inbox").isEmpty, "\(label)")
        #expect(FileManager.default.contents(atPath: documents + "/item.txt") == Data("linked twice".utf8), "\(label)")
        var copy = stat()
        var other = stat()
        #expect(stat(documents + "/item.txt", &copy) == 0 && stat(mount.backing + "/other.txt", &other) == 0)
        #expect(copy.st_ino != other.st_ino && copy.st_nlink == 1, "\(label): a copy of one name")
        #expect(copy.st_mode & S_IWUSR != 0, "\(label): the copy is owner-writable")
        #expect(other.st_nlink == 1, "\(label): the foreign name is the shared file's only one now")
        #expect(FileManager.default.contents(atPath: mount.backing + "/other.txt") == Data("linked twice".utf8))
    }

    @Test func aHardLinkedItemIsCopiedByInboxMove() throws {
        let mount = try FuseMount()
        let container = try Self.hardLinkedItem(mount)
        let move = try InboxProcess.run("--container", container, "move", "item.txt")
        #expect(move.status == 0, "\(move.stderr)")
        try Self.expectCopied(mount, "inbox move")
        #expect(logRecords(container, event: "moved").compactMap { $0["to"] as? String } == ["Documents/item.txt"])
    }

    @Test func aHardLinkedItemIsMovedByTheWatcher() throws {
        let mount = try FuseMount()
        let container = try Self.hardLinkedItem(mount)
        let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(watch.status == 0, "\(watch.stderr)")
        try Self.expectCopied(mount, "watch")
        #expect(logRecords(container, event: "moved").compactMap { $0["to"] as? String } == ["Documents/item.txt"])
    }

    /// A deletion renames the item aside (`.inbox-delete.<name>`) by `link` and `unlink` on the mount; killed between
    /// the two, both names hold the item, and the next start puts it back under its own name alone.
    @Test func aDeletionCutBetweenLinkAndUnlinkLeavesTheItemOnceUnderItsName() throws {
        let mount = try FuseMount()
        let container = mount.mountPoint + "/container"
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        let inbox = container + "/Documents/Inbox"
        try Data("kept".utf8).write(to: URL(fileURLWithPath: inbox + "/item.txt"))
        #expect(link(inbox + "/item.txt", inbox + "/.inbox-delete.item.txt") == 0)
        let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "keep")
        #expect(watch.status == 0, "\(watch.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: mount.backing + "/container/Documents/Inbox")
        #expect(names == ["item.txt"], "\(names)")
    }

    /// The watcher holds the item open while it moves it: libfuse keeps the Inbox name it unlinks as `.fuse_hidden…`
    /// until then, and the moved file counts two links; that name is the watcher's own, not another hard link.
    @Test func aFileTheWatcherMovesOnTheMountIsOwnerWritable() throws {
        let mount = try FuseMount()
        let container = mount.mountPoint + "/container"
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        try Data("written".utf8).write(to: URL(fileURLWithPath: container + "/Documents/Inbox/item.txt"))
        let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(watch.status == 0, "\(watch.stderr)")
        var moved = stat()
        #expect(stat(mount.backing + "/container/Documents/item.txt", &moved) == 0)
        #expect(moved.st_mode & 0o777 == 0o644, "mode \(String(moved.st_mode & 0o777, radix: 8))")
    }
}
