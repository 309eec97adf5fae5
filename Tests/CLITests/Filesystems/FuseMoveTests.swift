import Foundation
import Glibc
import TestSupport
import Testing

/// A container on a real FUSE filesystem (bindfs), which refuses `renameat2`'s flags (ARCHITECTURE.md, "Network and
/// FUSE filesystems"): `deliver`, `move`, `import` and the watcher's moves go by `link` and `unlink`, each file once.
@Suite(.serialized) struct FuseMoveTests {
    /// The names in a folder of the container, hidden ones (staging, claims) left out.
    static func visible(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") && $0 != "Inbox" }
            .sorted()
    }

    /// Plain, and with an NFS-like attribute cache (`attr_timeout=30,entry_timeout=30`).
    @Test(arguments: [[], ["attr_timeout=30", "entry_timeout=30"]])
    func deliverMoveImportAndTheWatcherEachPlaceAFileOnce(options: [String]) throws {
        let mount = try FuseMount(options: options)
        let container = mount.mountPoint + "/container"
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        let outside = try Scratch()
        let delivered = try InboxProcess.run(
            "--container", container, "deliver", outside.file("a.txt", "delivered"), outside.file("b.txt", "watched"))
        #expect(delivered.status == 0, "\(delivered.stderr)")
        let moved = try InboxProcess.run("--container", container, "move", "a.txt")
        #expect(moved.status == 0, "\(moved.stderr)")
        let message = ImportCrashTests.message(1, subject: "on fuse", attachments: ["c.bin"])
        let imported = try InboxProcess.run("--container", container, "import", "-", input: message)
        #expect(imported.status == 0, "\(imported.stderr)")
        let inbox = container + "/Documents/Inbox"
        #expect(try Self.visible(inbox) == ["b.txt", "c.bin"])
        let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(watch.status == 0, "\(watch.stderr)")
        #expect(try Self.visible(inbox).isEmpty)
        // The backing folder tells the truth, whatever the mount's attribute cache still says.
        let documents = mount.backing + "/container/Documents"
        #expect(try Self.visible(documents) == ["a.txt", "b.txt", "c.bin"])
        for (name, text) in [("a.txt", "delivered"), ("b.txt", "watched"), ("c.bin", "content of c.bin")] {
            var info = stat()
            #expect(stat(documents + "/" + name, &info) == 0 && info.st_nlink == 1, "\(name) has one name")
            #expect(FileManager.default.contents(atPath: documents + "/" + name) == Data(text.utf8))
        }
        let deliveredPaths = logRecords(container, event: "delivered").compactMap { $0["path"] as? String }
        #expect(deliveredPaths.sorted() == ["a.txt", "b.txt", "c.bin"].map { "Documents/Inbox/" + $0 })
        let movedPaths = logRecords(container, event: "moved").compactMap { $0["to"] as? String }
        #expect(movedPaths.sorted() == ["a.txt", "b.txt", "c.bin"].map { "Documents/" + $0 })
    }

    /// The renames of the import index's rebuild and set-aside, and of a backup's archive, on the mount.
    @Test func aDamagedIndexIsRebuiltAndABackupWrittenOnTheMount() throws {
        let mount = try FuseMount()
        let container = mount.mountPoint + "/container"
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        let message = ImportCrashTests.message(1, subject: "rebuilt", attachments: ["c.bin"])
        #expect(try InboxProcess.run("--container", container, "import", "-", input: message).status == 0)
        let index = container + "/Library/Application Support/inbox/import.sqlite"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: index + suffix) }
        try Data(repeating: 0xA5, count: 16_384).write(to: URL(fileURLWithPath: index))
        let again = try InboxProcess.run("--container", container, "import", "-", input: message)
        #expect(again.status == 0 && again.stdout.isEmpty, "a duplicate: \(again.stderr)")
        #expect(try Self.visible(container + "/Documents/Inbox") == ["c.bin"])
        let state = try FileManager.default.contentsOfDirectory(
            atPath: mount.backing + "/container/Library/Application Support/inbox")
        #expect(state.filter { $0.hasPrefix("import.sqlite.damaged-") }.count == 1, "\(state)")
        #expect(!state.contains { $0.hasSuffix(".rebuilding") }, "\(state)")
        let archive = mount.mountPoint + "/backup.tar"
        let backup = try InboxProcess.run("--container", container, "backup", "--to", archive)
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(try Self.visible(mount.backing).contains("backup.tar"))
    }
}
