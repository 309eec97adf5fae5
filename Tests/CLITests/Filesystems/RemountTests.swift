import Foundation
import TestSupport
import Testing

/// A container on a FUSE filesystem (bindfs), which gets a new device number at every mount, as network filesystems
/// do (ARCHITECTURE.md, "Network and FUSE filesystems").
@Suite struct RemountTests {
    @Test func itemsKeptInTheInboxDoNotArriveAgainAfterARemount() throws {
        let mount = try FuseMount()
        let container = mount.mountPoint + "/container"
        let made = try InboxProcess.run("--container", container, "init", "--single-host")
        #expect(made.status == 0, "\(made.stderr)")
        for name in ["scan.pdf", "notes.txt"] {
            #expect(FileManager.default.createFile(atPath: container + "/Documents/Inbox/" + name, contents: Data([1])))
        }
        func watchOnce() throws {
            let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "keep")
            #expect(watch.status == 0, "\(watch.stderr)")
        }
        try watchOnce()
        #expect(logRecords(container, event: "arrived").count == 2)
        var before = stat()
        #expect(stat(container + "/Documents/Inbox", &before) == 0)

        try mount.remount()
        var after = stat()
        #expect(stat(container + "/Documents/Inbox", &after) == 0)
        #expect(after.st_dev != before.st_dev, "a new mount, a new device number")
        try watchOnce()
        #expect(logRecords(container, event: "arrived").count == 2, "kept items arrived again")
        // Their age still counts from their arrival records (FUSE fakes ctime: the record is all there is).
        var old: Set<String> = []
        let deadline = Date().addingTimeInterval(20)
        while old.count < 2 && Date() < deadline {
            let clean = try InboxProcess.run(
                "--container", container, "clean", "--dry-run", "--json", "--inbox-max-age", "1s")
            #expect(clean.status == 0, "\(clean.stderr)")
            let listed = try JSONSerialization.jsonObject(with: Data(clean.stdout)) as? [[String: Any]] ?? []
            old = Set(listed.compactMap { ($0["path"] as? String)?.split(separator: "/").last.map(String.init) })
            if old.count < 2 { usleep(200_000) }
        }
        #expect(old == ["scan.pdf", "notes.txt"], "the items' arrival was lost with the remount")
    }
}
