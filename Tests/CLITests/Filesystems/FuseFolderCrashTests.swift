import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// A folder item moved on a FUSE filesystem (bindfs), where a folder moves by `mkdir` of its new name, then `rename`
/// onto that empty folder (ARCHITECTURE.md, "Network and FUSE filesystems"), by `inbox move` and by the watcher,
/// killed at each of their `mkdirat` and `renameat2` calls in turn, then started again: Documents holds the folder
/// once, under its own name, whole, and no empty folder beside it.
@Suite(.long, .serialized) struct FuseFolderCrashTests {
    /// Runs `round(call, name)` at each call of `mkdirat`, then of `renameat2` (`INBOX_CRASH_COUNTING`), until the
    /// command is no longer killed; returns how many rounds were.
    static func everyFallbackCall(_ label: String, _ round: (Int, String) throws -> Bool) throws -> Int {
        var crashes = 0
        for name in ["mkdirat", "renameat2"] {
            crashes += try CrashSweep.everyCall("\(label) at \(name)") { call in try round(call, name) }
        }
        return crashes
    }

    /// A container on the mount whose Inbox holds the folder `d`, two files in it.
    static func containerWithFolder(_ mount: FuseMount, _ name: String) throws -> String {
        let container = mount.mountPoint + "/" + name
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        try CrashPointTests.write(container + "/Documents/Inbox/d/one.txt", "one")
        try CrashPointTests.write(container + "/Documents/Inbox/d/deep/two.txt", "two")
        return container
    }

    /// Documents (as the backing folder holds it) has `d` and the Inbox alone, `d` whole, and one `moved` record.
    static func expectFolderOnce(_ mount: FuseMount, _ name: String, _ label: String) throws {
        let documents = mount.backing + "/" + name + "/Documents"
        #expect(try FileManager.default.contentsOfDirectory(atPath: documents).sorted() == ["Inbox", "d"], "\(label)")
        #expect(FileManager.default.contents(atPath: documents + "/d/one.txt") == Data("one".utf8), "\(label)")
        #expect(FileManager.default.contents(atPath: documents + "/d/deep/two.txt") == Data("two".utf8), "\(label)")
        let visible = try FileManager.default.contentsOfDirectory(atPath: documents + "/Inbox").filter {
            !$0.hasPrefix(".")
        }
        #expect(visible.isEmpty, "\(label): left in the Inbox: \(visible)")
        let moved = logRecords(mount.mountPoint + "/" + name, event: "moved").compactMap { $0["to"] as? String }
        #expect(moved == ["Documents/d"], "\(label)")
    }

    @Test func aFolderMovedByInboxMoveKilledAtAnyCallTakesItsOwnNameOnce() throws {
        let mount = try FuseMount()
        let points = try Self.everyFallbackCall("inbox move (folder) on bindfs") { call, name in
            let round = "c-\(name)-\(call)"
            let container = try Self.containerWithFolder(mount, round)
            defer { try? FileManager.default.removeItem(atPath: container) }
            let move = try InboxProcess.run(
                "--container", container, "move", "d",
                environment: ["INBOX_CRASH_AT_CALL": "\(call)", "INBOX_CRASH_COUNTING": name])
            guard move.status == CrashSweep.killed else {
                #expect(move.status == 0, "\(move.stderr)")
                try Self.expectFolderOnce(mount, round, "not killed")
                return false
            }
            // Started again: the journal is settled, and the folder moved (66 when the crash came after its rename).
            let again = try InboxProcess.run("--container", container, "move", "d")
            #expect(again.status == 0 || again.status == 66, "crash at \(name) \(call): \(again.stderr)")
            try Self.expectFolderOnce(mount, round, "crash at \(name) \(call)")
            return true
        }
        #expect(points >= 3)
    }

    @Test func aFolderMovedByTheWatcherKilledAtAnyCallTakesItsOwnNameOnce() throws {
        let mount = try FuseMount()
        let arguments = ["watch", "--once", "--on-arrival", "move"]
        let points = try Self.everyFallbackCall("inbox watch (folder) on bindfs") { call, name in
            let round = "c-\(name)-\(call)"
            let container = try Self.containerWithFolder(mount, round)
            defer { try? FileManager.default.removeItem(atPath: container) }
            let watch = try InboxProcess.run(
                (["--container", container] + arguments).map { Array($0.utf8) },
                environment: ["INBOX_CRASH_AT_CALL": "\(call)", "INBOX_CRASH_COUNTING": name])
            guard watch.status == CrashSweep.killed else {
                #expect(watch.status == 0, "\(watch.stderr)")
                try Self.expectFolderOnce(mount, round, "not killed")
                return false
            }
            let again = try InboxProcess.run((["--container", container] + arguments).map { Array($0.utf8) })
            #expect(again.status == 0, "crash at \(name) \(call): \(again.stderr)")
            try Self.expectFolderOnce(mount, round, "crash at \(name) \(call)")
            return true
        }
        #expect(points >= 3)
    }

    /// An item's deletion moves it aside (`.inbox-delete.<name>`) first; for a folder on bindfs by `mkdir` then
    /// `rename`, and a kill between the two leaves the empty placeholder (mode 0: `FolderPlaceholderTests`) beside the
    /// item. The next start removes it: it never comes back as an empty item beside the folder (`d-1`).
    @Test func aFolderDeletionCutBeforeItsRenameLeavesNoFolderBesideIt() throws {
        let mount = try FuseMount()
        let container = try Self.containerWithFolder(mount, "c-delete")
        let inbox = container + "/Documents/Inbox"
        #expect(mkdir(inbox + "/.inbox-delete.d", 0) == 0)
        let keeping = ["--container", container, "watch", "--once", "--on-arrival", "keep"] + CrashPointTests.quickPoll
        let watch = try InboxProcess.run(keeping.map { Array($0.utf8) })
        #expect(watch.status == 0, "\(watch.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: mount.backing + "/c-delete/Documents/Inbox")
        #expect(left.filter { !$0.hasPrefix(".inbox-index") } == ["d"], "\(left)")
        #expect(FileManager.default.contents(atPath: inbox + "/d/one.txt") == Data("one".utf8))
    }

    /// A clean sets each entry aside (`.inbox-clean.<inode>`) before it removes it; for a folder on bindfs by `mkdir`
    /// then `rename`. Killed at each of those calls, the next clean settles the batch: the folder is gone once, with
    /// its `deleted` record, and no empty placeholder stays behind it (hidden, walks pass it over: it stayed for good).
    @Test func aFolderCleanedKilledAtAnyCallLeavesNoPlaceholder() throws {
        let mount = try FuseMount()
        let points = try Self.everyFallbackCall("inbox clean (folder) on bindfs") { call, name in
            let round = "c-clean-\(name)-\(call)"
            let container = mount.mountPoint + "/" + round
            #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
            defer { try? FileManager.default.removeItem(atPath: container) }
            try CrashPointTests.write(container + "/tmp/work/part", "scratch")
            let clean = try InboxProcess.run(
                "--container", container, "clean",
                environment: ["INBOX_CRASH_AT_CALL": "\(call)", "INBOX_CRASH_COUNTING": name])
            if clean.status == CrashSweep.killed {
                let again = try InboxProcess.run("--container", container, "clean")
                #expect(again.status == 0, "crash at \(name) \(call): \(again.stderr)")
            } else {
                #expect(clean.status == 0, "\(clean.stderr)")
            }
            let left = try FileManager.default.contentsOfDirectory(atPath: mount.backing + "/" + round + "/tmp")
            #expect(left.isEmpty, "crash at \(name) \(call): tmp holds \(left)")
            let deleted = logRecords(container, event: "deleted").compactMap { $0["path"] as? String }
            #expect(deleted == ["tmp/work"], "crash at \(name) \(call)")
            return clean.status == CrashSweep.killed
        }
        #expect(points >= 2)
    }

    /// A folder item holding a file with a hard link outside is copied, never renamed whole (ARCHITECTURE.md, "One
    /// mover"): `inbox move` killed at each of its calls in turn, on ext4 and on bindfs, then run again: Documents holds
    /// the folder once, whole, a copy (its file no longer the one outside, which is as it was), with one `moved`
    /// record, and neither a claim, a staging folder, a placeholder nor an intent is left.
    @Test(arguments: [false, true])
    func aFolderHoldingAHardLinkMovedByInboxMoveKilledAtAnyCallIsCopiedOnce(onFuse: Bool) throws {
        let mount = onFuse ? try FuseMount() : nil
        let label = "inbox move (folder holding a hard link)" + (onFuse ? " on bindfs" : "")
        let points = try CrashSweep.everyCall(label) { call in
            let folder = try Scratch()
            let (base, container) = try CrashPointTests.roundContainer(folder, on: mount, call)
            defer { if mount != nil { try? FileManager.default.removeItem(atPath: base) } }
            try CrashPointTests.write(container + "/Documents/Inbox/d/one.txt", "one")
            try CrashPointTests.write(container + "/Documents/Inbox/d/deep/two.txt", "two")
            try CrashPointTests.write(base + "/other.txt", "shared")
            #expect(link(base + "/other.txt", container + "/Documents/Inbox/d/deep/shared.txt") == 0)
            let move = try InboxProcess.run(
                "--container", container, "move", "d", environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            let killed = move.status == CrashSweep.killed
            if killed {
                let again = try InboxProcess.run("--container", container, "move", "d")
                #expect(again.status == 0 || again.status == 66, "crash at call \(call): \(again.stderr)")
            } else {
                #expect(move.status == 0, "\(move.stderr)")
            }
            let documents = container + "/Documents"
            let names = try FileManager.default.contentsOfDirectory(atPath: documents).sorted()
            #expect(names == ["Inbox", "d"], "crash at call \(call): Documents holds \(names)")
            for (path, text) in [("d/one.txt", "one"), ("d/deep/two.txt", "two"), ("d/deep/shared.txt", "shared")] {
                #expect(
                    FileManager.default.contents(atPath: documents + "/" + path) == Data(text.utf8),
                    "crash at call \(call): \(path)")
            }
            var outside = stat()
            var copied = stat()
            #expect(stat(base + "/other.txt", &outside) == 0 && stat(documents + "/d/deep/shared.txt", &copied) == 0)
            #expect(outside.st_ino != copied.st_ino && outside.st_nlink == 1, "crash at call \(call): not a copy")
            #expect(FileManager.default.contents(atPath: base + "/other.txt") == Data("shared".utf8))
            let inbox = try FileManager.default.contentsOfDirectory(atPath: documents + "/Inbox")
            #expect(inbox.isEmpty, "crash at call \(call): left in the Inbox: \(inbox)")
            let moved = logRecords(container, event: "moved").compactMap { $0["to"] as? String }
            #expect(moved == ["Documents/d"], "crash at call \(call): \(CrashPointTests.logSummary(container))")
            let intents = Result { try MoveJournal(container: Container.open(at: container)).entriesLeft() }
            #expect((try? intents.get()) == [], "crash at call \(call): intents left: \(intents)")
            return killed
        }
        #expect(points > 10)
    }
}
