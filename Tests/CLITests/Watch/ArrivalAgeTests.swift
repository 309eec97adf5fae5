import Foundation
import Glibc
import TestSupport
import Testing

/// An Inbox item's age counts from its arrival in the Inbox, never from the file's own dates (issue 39;
/// ARCHITECTURE.md, "Age from arrival"), for the watcher's rounds and `inbox clean` alike; `watch --no-clean`.
@Suite struct ArrivalAgeTests {
    /// A file with the given modification time, `mv`d (renamed) into the Inbox as a user would.
    private func moveIn(_ folder: Scratch, _ container: String, _ name: String, modifiedDaysAgo days: Int)
        throws -> String
    {
        let outside = try folder.file(name, "brought in with its own dates\n")
        let then = timespec(tv_sec: time(nil) - days * 86_400, tv_nsec: 0)
        #expect(utimensat(AT_FDCWD, outside, [then, then], 0) == 0)
        let inside = container + "/Documents/Inbox/" + name
        #expect(rename(outside, inside) == 0)
        return inside
    }

    /// Sets `inboxMaxAge` in the container's preferences.
    private func setInboxMaxAge(_ container: String, seconds: Int) throws {
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>inboxMaxAge</key><integer>\(seconds)</integer></dict></plist>
            """
        try Data(plist.utf8).write(to: URL(fileURLWithPath: container + "/Library/Preferences/inbox.plist"))
    }

    /// What `clean --dry-run --json` plans, as (path, reason).
    private func planned(_ container: String, _ extra: [String] = []) throws -> [(String, String)] {
        let result = try InboxProcess.run(
            (["--container", container, "clean", "--dry-run", "--json"] + extra).map { Array($0.utf8) })
        #expect(result.status == 0, "\(result.stderr)")
        let array = try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]] ?? []
        return array.map { ($0["path"] as? String ?? "", $0["reason"] as? String ?? "") }
    }

    /// Waits until `inbox clean` would delete `path` for its age: its arrival, not any date of its own, is old.
    private func waitUntilExpired(_ container: String, _ path: String) throws -> Bool {
        try waitUntil(timeout: 20, interval: 0.2) { try planned(container).contains { $0.0 == path } }
    }

    @Test func aFileMovedInWithAFortyDayOldModificationTimeIsArrivedNotDeleted() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let item = try moveIn(folder, container, "old-mail.pdf", modifiedDaysAgo: 40)

        // `inbox clean` where no watcher has served the container yet: it just arrived.
        #expect(try planned(container).isEmpty)
        let watch = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(watch.status == 0, "\(watch.stderr)")
        #expect(FileManager.default.fileExists(atPath: item), "the start-up cleanup deleted an arrival")
        let arrived = logRecords(container, event: "arrived")
        #expect(arrived.map { $0["path"] as? String } == ["Documents/Inbox/old-mail.pdf"])
        #expect(logRecords(container, event: "deleted").isEmpty)

        for arguments in [["--dry-run", "--json"], ["--json"], []] {
            let clean = try InboxProcess.run((["--container", container, "clean"] + arguments).map { Array($0.utf8) })
            #expect(clean.status == 0, "\(clean.stderr)")
            #expect(clean.lines == (arguments.isEmpty ? [] : ["[]"]), "\(arguments): \(clean.stdoutText)")
        }
        #expect(FileManager.default.fileExists(atPath: item))
        #expect(logRecords(container, event: "deleted").isEmpty)
    }

    @Test func anItemWhoseArrivalIsOldGoesWhateverItsOwnDatesSay() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try setInboxMaxAge(container, seconds: 1)
        // Modified "tomorrow": its own date would keep it forever.
        let first = try moveIn(folder, container, "first.pdf", modifiedDaysAgo: -1)
        let watch = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(watch.status == 0, "\(watch.stderr)")
        #expect(FileManager.default.fileExists(atPath: first), "deleted the moment it arrived")

        // The watcher's start-up round deletes it once its arrival is old.
        #expect(try waitUntilExpired(container, first))
        let again = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(!FileManager.default.fileExists(atPath: first))
        let deleted = logRecords(container, event: "deleted")
        #expect(deleted.map { $0["path"] as? String } == ["Documents/Inbox/first.pdf"])
        #expect(deleted.map { $0["reason"] as? String } == ["older than 1 second"])

        // And so does `inbox clean`, in a container no watcher serves.
        let other = try Scratch()
        let unserved = try other.initContainer()
        try setInboxMaxAge(unserved, seconds: 1)
        let second = try moveIn(other, unserved, "second.pdf", modifiedDaysAgo: -1)
        #expect(try waitUntilExpired(unserved, second))
        let clean = try InboxProcess.run("--container", unserved, "clean", "--json")
        #expect(clean.status == 0, "\(clean.stderr)")
        let array = try #require(try JSONSerialization.jsonObject(with: Data(clean.stdout)) as? [[String: Any]])
        #expect(array.map { $0["path"] as? String } == [second])
        #expect(array.map { $0["deleted"] as? Bool } == [true])
        #expect(!FileManager.default.fileExists(atPath: second))
    }

    @Test func watchNoCleanLeavesAnExpiredItemAlone() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try setInboxMaxAge(container, seconds: 1)
        let item = try moveIn(folder, container, "expired.pdf", modifiedDaysAgo: 0)
        #expect(try waitUntilExpired(container, item))

        let kept = try InboxProcess.run("--container", container, "watch", "--once", "--no-clean")
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(FileManager.default.fileExists(atPath: item))
        #expect(logRecords(container, event: "arrived").count == 1)
        #expect(logRecords(container, event: "deleted").isEmpty)

        // The arrival just logged makes it young again: wait for that to age too.
        #expect(try waitUntilExpired(container, item))
        let again = try InboxProcess.run("--container", container, "watch", "--once", "--no-clean")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(FileManager.default.fileExists(atPath: item), "--no-clean cleaned")

        let cleaning = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(cleaning.status == 0, "\(cleaning.stderr)")
        #expect(!FileManager.default.fileExists(atPath: item))
        #expect(logRecords(container, event: "deleted").map { $0["reason"] as? String } == ["older than 1 second"])
    }

    @Test func watchHelpNamesNoClean() throws {
        let help = try InboxProcess.run("watch", "--help")
        #expect(help.status == 0)
        #expect(help.stdoutText.contains("--no-clean"))
    }
}
