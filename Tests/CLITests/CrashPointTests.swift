import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// `inbox move`, `inbox watch` and `inbox restore` killed (SIGKILL) at every one of their system calls in turn
/// (`INBOX_CRASH_AT_CALL=N`, debug builds), then started again: nothing lost, nothing twice, and every file
/// in Documents has exactly one `moved` record (ARCHITECTURE.md, "The log never lies").
@Suite(.long) struct CrashPointTests {
    /// Each record of the container's log as `event path [to]`, for a failure's message.
    static func logSummary(_ container: String) -> String {
        logRecords(container).map { record in
            [record["event"], record["path"] ?? record["from"], record["to"], record["reason"] ?? record["message"]]
                .compactMap { $0.map { "\($0)" } }.joined(separator: " ")
        }.joined(separator: " | ")
    }

    /// For `watch --once` on a polled Inbox (bindfs), which waits for what it lists to hold still for `--settle`
    /// (2 s): the files of a round are whole before it starts, and a sweep runs it hundreds of times.
    static let quickPoll = ["--poll-interval", "0.05", "--settle", "0.05"]

    /// A fresh folder for one round's container: in `folder`, or on `mount` (bindfs, where every move goes by `link`
    /// and `unlink`: ARCHITECTURE.md, "Network and FUSE filesystems"), removed when the round ends.
    static func roundFolder(_ folder: Scratch, on mount: FuseMount?, _ call: Int) throws -> String {
        guard let mount else { return folder.path }
        let path = mount.mountPoint + "/round-\(call)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    /// `roundFolder` with a container made in it (`init`): the round's folder and the container's path.
    static func roundContainer(_ folder: Scratch, on mount: FuseMount?, _ call: Int) throws
        -> (base: String, container: String)
    {
        let base = try roundFolder(folder, on: mount, call)
        let container = base + "/container"
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        return (base, container)
    }

    /// Writes `contents` at `path`, making its folders.
    static func write(_ path: String, _ contents: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
    }

    /// On bindfs, which refuses `O_TMPFILE`, the copy goes by a staging name (`UnnamedFile`).
    @Test(arguments: zip([false, true, false, true], [false, false, true, true]))
    func aMoveKilledAtAnyCallIsFinishedOrUndone(hardLinked: Bool, onFuse: Bool) throws {
        let bytes = String(repeating: "moved once ", count: 2_000)
        let mount = onFuse ? try FuseMount() : nil
        let label = (hardLinked ? "inbox move (copy)" : "inbox move (rename)") + (onFuse ? " on bindfs" : "")
        let points = try CrashSweep.everyCall(label) { call in
            let folder = try Scratch()
            let (base, container) = try Self.roundContainer(folder, on: mount, call)
            defer { if mount != nil { try? FileManager.default.removeItem(atPath: base) } }
            let source = try folder.file("item.pdf", bytes)
            #expect(try InboxProcess.run("--container", container, "deliver", source).status == 0)
            if hardLinked { #expect(link(container + "/Documents/Inbox/item.pdf", base + "/other.pdf") == 0) }
            let move = try InboxProcess.run(
                "--container", container, "move", "item.pdf", environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            guard move.status == CrashSweep.killed else {
                #expect(move.status == 0, "\(move.stderr)")
                return false
            }
            // The next start settles the journal.
            let start = ["--container", container, "watch", "--once"] + Self.quickPoll
            let settle = try InboxProcess.run(start.map { Array($0.utf8) })
            #expect(settle.status == 0, "\(settle.stderr)")
            Self.expectOnce(container, bytes: bytes, call: call)
            if hardLinked {
                #expect(FileManager.default.contents(atPath: base + "/other.pdf") == Data(bytes.utf8))
            }
            return true
        }
        #expect(points > 10)
    }

    /// On bindfs without the hard-linked file, to keep the points few: `FuseExchangeTests` kills its private copy
    /// there, and `FuseCopyTests` moves it.
    @Test(arguments: [false, true])
    func aWatcherKilledAtAnyCallLosesNothingAndHandlesNothingTwice(onFuse: Bool) throws {
        var files = ["a.txt": "delivered", "b.txt": "written in place", "c.txt": "hard-linked"]
        if onFuse { files["c.txt"] = nil }
        let mount = onFuse ? try FuseMount() : nil
        let points = try CrashSweep.everyCall("inbox watch --once --on-arrival move" + (onFuse ? " on bindfs" : "")) {
            call in
            let folder = try Scratch()
            let (base, container) = try Self.roundContainer(folder, on: mount, call)
            defer { if mount != nil { try? FileManager.default.removeItem(atPath: base) } }
            let inbox = container + "/Documents/Inbox"
            #expect(
                try InboxProcess.run("--container", container, "deliver", folder.file("a.txt", files["a.txt"]!)).status
                    == 0)
            try Self.write(inbox + "/b.txt", files["b.txt"]!)
            try Self.write(base + "/other.txt", "hard-linked")
            if !onFuse { #expect(link(base + "/other.txt", inbox + "/c.txt") == 0) }
            try Self.write(inbox + "/d/inside.txt", "in a folder")
            let arguments = ["--container", container, "watch", "--once", "--on-arrival", "move"] + Self.quickPoll
            let watch = try InboxProcess.run(
                arguments.map { Array($0.utf8) }, environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            guard watch.status == CrashSweep.killed else {
                #expect(watch.status == 0, "\(watch.stderr)")
                return false
            }
            let again = try InboxProcess.run(arguments.map { Array($0.utf8) })
            #expect(again.status == 0, "crash at call \(call): \(again.stderr)")
            let documents = container + "/Documents"
            for (name, text) in files {
                #expect(
                    FileManager.default.contents(atPath: documents + "/" + name) == Data(text.utf8),
                    "call \(call): \(name)")
                // A crash between the rename and the write bit's return leaves that to recovery.
                var info = stat()
                #expect(
                    stat(documents + "/" + name, &info) == 0 && info.st_mode & S_IWUSR != 0,
                    "call \(call): \(name) has no write bit in Documents")
            }
            // On bindfs a folder moves by `mkdir` then `rename`: the empty folder a crash between the two leaves goes
            // at the restart, and the folder takes its own name.
            let folders = try FileManager.default.contentsOfDirectory(atPath: documents).filter {
                FileManager.default.fileExists(atPath: documents + "/" + $0 + "/inside.txt")
            }
            #expect(folders == ["d"], "call \(call): the folder is in \(folders)")
            let names = try FileManager.default.contentsOfDirectory(atPath: documents).sorted()
            #expect(
                names == ["Inbox"] + (files.keys.sorted() + ["d"]).sorted(),
                "call \(call): Documents holds \(names); the log: \(Self.logSummary(container)); \(again.stderr)")
            let visible = try FileManager.default.contentsOfDirectory(atPath: inbox).filter { !$0.hasPrefix(".") }
            #expect(visible.isEmpty, "crash at call \(call): left in the Inbox: \(visible)")
            // Nor a move's private name, a claim or an aside (ARCHITECTURE.md, "Moves without rename flags").
            let asides = try FileManager.default.contentsOfDirectory(atPath: inbox).filter {
                $0.hasPrefix(".inbox-move.") || $0.hasPrefix(".inbox-claim.") || $0.hasPrefix(".inbox-delete.")
            }
            #expect(asides.isEmpty, "crash at call \(call): left in the Inbox: \(asides)")
            for kind in ["arrived", "moved"] {
                let paths = logRecords(container, event: kind).compactMap { ($0["path"] ?? $0["from"]) as? String }
                #expect(
                    paths.sorted() == (files.keys.sorted() + ["d"]).map { "Documents/Inbox/" + $0 },
                    "call \(call): \(kind)")
            }
            #expect(FileManager.default.contents(atPath: base + "/other.txt") == Data("hard-linked".utf8))
            return true
        }
        #expect(points > 50)
    }

    /// `inbox restore` killed at each of its calls in turn: the next command (`init` or `ls`, in turn) finds the
    /// container as it was or fully restored, never half (issue 9), and a second restore completes it, or says that
    /// it is done (73).
    @Test func aRestoreKilledAtAnyCallLeavesTheContainerAsItWasOrRestored() throws {
        let folder = try Scratch()
        let source = try folder.initContainer()
        try folder.file("container/Documents/letter.txt", "dear")
        try folder.file("container/Documents/Deep/notes.md", "notes")
        #expect(try InboxProcess.run("--container", source, "deliver", folder.file("in.txt", "handed in")).status == 0)
        let archive = folder.path + "/backup.tar"
        #expect(try InboxProcess.run("--container", source, "backup", "--to", archive).status == 0)
        let reference = folder.path + "/reference"
        #expect(try InboxProcess.run("--container", reference, "init", "--single-host").status == 0)
        #expect(try InboxProcess.run("--container", reference, "restore", archive).status == 0)
        // Locks are re-created by whichever command runs next: they are not what a restore gives back.
        let restored = try treeListing(reference).filter { !$0.contains(".lock ") }

        let points = try CrashSweep.everyCall("inbox restore") { call in
            let target = folder.path + "/target"
            defer { try? FileManager.default.removeItem(atPath: target) }
            #expect(try InboxProcess.run("--container", target, "init", "--single-host").status == 0)
            let before = try treeListing(target)
            let restore = try InboxProcess.run(
                "--container", target, "restore", archive, environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            guard restore.status == CrashSweep.killed else {
                #expect(restore.status == 0, "\(restore.stderr)")
                #expect(try treeListing(target).filter { !$0.contains(".lock ") } == restored)
                return false
            }
            let next = call % 2 == 0 ? ["init"] : ["ls", "documents"]
            let settled = try InboxProcess.run((["--container", target] + next).map { Array($0.utf8) })
            #expect(settled.status == 0, "crash at call \(call): \(next[0]): \(settled.stderr)")
            let after = try treeListing(target)
            let wasRestored = after.filter { !$0.contains(".lock ") } == restored
            #expect(after == before || wasRestored, "crash at call \(call), then \(next[0]): half restored: \(after)")
            let again = try InboxProcess.run("--container", target, "restore", archive)
            #expect(again.status == (wasRestored ? 73 : 0), "crash at call \(call): \(again.stderr)")
            #expect(try treeListing(target).filter { !$0.contains(".lock ") } == restored, "crash at call \(call)")
            return true
        }
        #expect(points > 20)
    }

    /// `inbox restore` killed while libarchive extracts, which makes no call the crash points count: the first of
    /// many files is written, the rest not. The next command finds the container as it was (or restored, when the
    /// kill came late), and a second restore completes it.
    @Test func aRestoreKilledWhileExtractingLeavesTheContainerAsItWas() throws {
        let folder = try Scratch()
        let source = try folder.initContainer()
        for index in 0..<3_000 { try folder.file("container/Documents/many/\(10_000 + index)", String(index)) }
        let archive = folder.path + "/backup.tar"
        #expect(try InboxProcess.run("--container", source, "backup", "--to", archive).status == 0)
        let target = folder.path + "/target"
        #expect(try InboxProcess.run("--container", target, "init", "--single-host").status == 0)
        let before = try treeListing(target)

        let restore = try InboxProcess.start(["--container", target, "restore", archive].map { Array($0.utf8) })
        // The first file, in the staging folder or (restored, or by an inbox that extracts in place) in Documents.
        let first = ["/.inbox-restore/Documents/many/10000", "/Documents/many/10000"].map { target + $0 }
        let seen = waitUntil { first.contains { access($0, F_OK) == 0 } }
        kill(restore.pid, SIGKILL)
        let status = try restore.finish().status
        #expect(seen && (status == CrashSweep.killed || status == 0), "restore: \(status)")

        #expect(try InboxProcess.run("--container", target, "ls", "documents").status == 0)
        let after = try treeListing(target)
        let wasRestored = after.contains("/Documents/many/12999 file 4")
        #expect(after == before || wasRestored, "half restored: \(after.count) entries")
        let again = try InboxProcess.run("--container", target, "restore", archive)
        #expect(again.status == (wasRestored ? 73 : 0), "\(again.stderr)")
        #expect(try treeListing(target).contains("/Documents/many/12999 file 4"))
    }

    /// The item is in the Inbox or in Documents, once; a `moved` record names it iff it is in Documents; no claim,
    /// aside or journal intent is left.
    static func expectOnce(_ container: String, bytes: String, call: Int) {
        let inbox = container + "/Documents/Inbox"
        let documents = container + "/Documents"
        let inInbox = ((try? FileManager.default.contentsOfDirectory(atPath: inbox)) ?? []).sorted()
        let inDocuments = ((try? FileManager.default.contentsOfDirectory(atPath: documents)) ?? []).filter {
            $0 != "Inbox"
        }
        let holding =
            inInbox.filter { FileManager.default.contents(atPath: inbox + "/" + $0) == Data(bytes.utf8) }
            + inDocuments.filter { FileManager.default.contents(atPath: documents + "/" + $0) == Data(bytes.utf8) }
        #expect(holding.count == 1, "crash at call \(call): the item is in \(holding)")
        #expect(inInbox.allSatisfy { !$0.hasPrefix(".") }, "crash at call \(call): left in the Inbox: \(inInbox)")
        let moved = logRecords(container, event: "moved").compactMap { $0["to"] as? String }
        #expect(
            moved == inDocuments.map { "Documents/" + $0 }, "crash at call \(call): moved \(moved), in \(inDocuments)")
        for name in inDocuments {
            var info = stat()
            #expect(
                stat(documents + "/" + name, &info) == 0 && info.st_mode & S_IWUSR != 0,
                "crash at call \(call): \(name) has no write bit in Documents")
        }
        let intents = Result { try MoveJournal(container: Container.open(at: container)).entriesLeft() }
        #expect((try? intents.get()) == [], "crash at call \(call): intents left: \(intents)")
    }
}
