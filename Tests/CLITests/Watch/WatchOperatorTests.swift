import Foundation
import Glibc
import TestSupport
import Testing

/// What `inbox watch` tells an operator (issue 40): what `--root` serves, at the start and as it changes;
/// `--root --once`; a hook's stderr with `--verbose`; the log's rotation set by the preferences.
@Suite struct WatchOperatorTests {
    private func initContainer(_ path: String, _ extra: [String] = []) throws {
        let result = try InboxProcess.run((["--container", path, "init"] + extra).map { Array($0.utf8) })
        #expect(result.status == 0, "init \(path): \(result.stderr)")
    }

    private func deliver(_ container: String, _ name: String, _ folder: Scratch) throws {
        let source = try folder.file("sources/\(UUID().uuidString)/" + name, "for \(container)")
        let result = try InboxProcess.run("--container", container, "deliver", source)
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test func theRootSaysWhatItServesAtTheStartAndEachTimeThatChanges() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let fleet = try InboxProcess.start(["watch", "--root", root].map { Array($0.utf8) })
        defer { _ = fleet.terminate() }
        let stderr = StderrReader(fleet)
        #expect(stderr.waitFor("inbox: serving no containers under \(root) yet\n"), "\(stderr.text)")
        try initContainer(root + "/a")
        #expect(stderr.waitFor("inbox: serving 1 container under \(root)\n"), "\(stderr.text)")
        try initContainer(root + "/b")
        try initContainer(root + "/c")
        #expect(stderr.waitFor("inbox: serving 3 containers under \(root)\n"), "\(stderr.text)")
        // One removed: one line on it, and the new count.
        try FileManager.default.moveItem(atPath: root + "/b", toPath: folder.path + "/b-away")
        #expect(stderr.waitFor("inbox: serving 2 containers under \(root)\n"), "\(stderr.text)")
        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
        let all = stderr.text + result.stderr
        // One calm line on the container removed (besides its watcher's own "watching" and "stopped").
        let aboutB = all.split(separator: "\n").filter {
            $0.contains(root + "/b: ") && !$0.contains(root + "/b: watching ") && !$0.hasSuffix("/b: stopped")
        }
        // Its watcher may see its lock gone first, or the fleet its folder.
        let calm = ["/b: removed: no longer watched", "(is the container being removed?): let go"]
        #expect(aboutB.count == 1 && calm.contains { aboutB.first?.hasSuffix($0) == true }, "\(all)")
        // Each count said once, in order.
        let counts = all.split(separator: "\n").filter { $0.hasPrefix("inbox: serving ") }
        #expect(counts.first == "inbox: serving no containers under \(root) yet", "\(all)")
        #expect(counts.last == "inbox: serving 2 containers under \(root)", "\(all)")
        #expect(zip(counts, counts.dropFirst()).allSatisfy { $0 != $1 }, "said again unchanged: \(all)")
    }

    @Test func aRootThatIsItselfAContainerIsSaidSo() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let line =
            "inbox: \(container) is itself a container: serving no containers under it; use --container \(container) to watch it\n"
        let fleet = try InboxProcess.start(["watch", "--root", container].map { Array($0.utf8) })
        defer { _ = fleet.terminate() }
        let stderr = StderrReader(fleet)
        #expect(stderr.waitFor(line), "\(stderr.text)")
        kill(fleet.pid, SIGTERM)
        #expect(try fleet.finish().status == 0)
        let once = try InboxProcess.run("watch", "--root", container, "--once")
        #expect(once.status == 0 && once.stderr == line, "\(once.stderr)")
    }

    @Test func rootOnceDrainsEachContainerAndExitsWithTheWorstStatus() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        for name in ["a", "b", "held"] { try initContainer(root + "/" + name) }
        try FileManager.default.createDirectory(atPath: root + "/not-a-container", withIntermediateDirectories: true)
        // A sealed bundle, then changed: its watcher must not start (exit status 65).
        try folder.file("Source.app/Info.plist", "<plist>info</plist>\n")
        try initContainer(root + "/sealed", ["--app", "Mail", "--bundle", folder.path + "/Source.app"])
        let plist = root + "/sealed/Mail.app/Info.plist"
        chmod(plist, 0o644)
        try Data("<plist>changed</plist>\n".utf8).write(to: URL(fileURLWithPath: plist))
        for name in ["a", "b", "held"] { try deliver(root + "/" + name, "\(name).txt", folder) }
        let single = try WatchProcess(root + "/held")

        let drain = { try InboxProcess.run("watch", "--root", root, "--once", "--on-arrival", "move") }
        var result = try drain()
        // The broken seal (65) is worse than the container held by another watcher (75); the others are drained.
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("inbox: serving 4 containers under \(root)\n"), "\(result.stderr)")
        #expect(result.stderr.contains("inbox: \(root)/a: watching "), "each container says what it does")
        #expect(result.stderr.contains("inbox: \(root)/sealed: "), "\(result.stderr)")
        #expect(result.stderr.contains("inbox: \(root)/held: "), "\(result.stderr)")
        #expect(result.stderr.contains("inbox: 2 of 4 containers failed"), "\(result.stderr)")
        #expect(!result.stderr.contains("not-a-container"), "\(result.stderr)")
        for name in ["a", "b"] {
            #expect(FileManager.default.fileExists(atPath: root + "/\(name)/Documents/\(name).txt"), "\(name)")
            #expect(logRecords(root + "/" + name, event: "watch-stopped").count == 1)
        }
        // Only the busy one left: 75, try again.
        try FileManager.default.removeItem(atPath: root + "/sealed")
        result = try drain()
        #expect(result.status == 75, "\(result.stderr)")
        // Once the single watcher is gone, all are drained: 0.
        #expect(try single.stop().status == 0)
        try deliver(root + "/held", "later.txt", folder)
        result = try drain()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("inbox: serving 3 containers under \(root)\n"), "\(result.stderr)")
        #expect(!result.stderr.contains("failed"), "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: root + "/held/Documents/later.txt"))
        // Several named containers are drained the same way.
        try deliver(root + "/b", "named.txt", folder)
        let named = try InboxProcess.run(
            "--container", root + "/a", "--container", root + "/b", "watch", "--once", "--on-arrival", "move")
        #expect(named.status == 0, "\(named.stderr)")
        #expect(FileManager.default.fileExists(atPath: root + "/b/Documents/named.txt"))
    }

    @Test func verboseShowsEachLineAHookWritesOnStderr() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try deliver(container, "report.txt", folder)
        let hook = "echo first line >&2; printf 'no newline' >&2; echo keep"
        let quiet = try InboxProcess.run("--container", container, "watch", "--once", "--exec", hook)
        #expect(quiet.status == 0 && !quiet.stderr.contains("first line"), "\(quiet.stderr)")
        try deliver(container, "later.txt", folder)
        let verbose = try InboxProcess.run("--container", container, "watch", "--once", "--verbose", "--exec", hook)
        #expect(verbose.status == 0, "\(verbose.stderr)")
        #expect(verbose.stderr.contains("inbox: hook for later.txt: first line\n"), "\(verbose.stderr)")
        #expect(verbose.stderr.contains("inbox: hook for later.txt: no newline\n"), "\(verbose.stderr)")
        #expect(!verbose.stderr.contains("report.txt"), "\(verbose.stderr)")
    }

    @Test func theLogsRotationIsSetByThePreferencesAndABadValueIsOneLine() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let preferences = container + "/Library/Preferences/inbox.plist"
        let set = { (entries: String) in
            try Data(
                """
                <?xml version="1.0" encoding="UTF-8"?>
                <plist version="1.0"><dict>\(entries)</dict></plist>
                """.utf8
            ).write(to: URL(fileURLWithPath: preferences))
        }
        try set("<key>logMaxBytes</key><integer>100</integer>")
        let refused = try InboxProcess.run("--container", container, "deliver", try folder.file("x.txt", "x"))
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(
            refused.stderr
                == "inbox: 'logMaxBytes' in '\(preferences)' must be a whole number of bytes, at least 65536: fix it\n")
        #expect(try InboxProcess.run("--container", container, "log").status == 0, "a reader reads on")

        // 64 KiB a file, two kept: deliveries of long names rotate it, and only the newest two stay.
        try set("<key>logMaxBytes</key><integer>65536</integer><key>logKeepRotated</key><integer>2</integer>")
        let long = String(repeating: "n", count: 200)
        for round in 0..<4 {
            let files = try (0..<100).map { try folder.file("r\(round)/\(long)-\($0).txt", "\($0)") }
            let result = try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) })
            #expect(result.status == 0, "\(result.stderr)")
        }
        let state = container + "/Library/Application Support/inbox"
        let rotated = try FileManager.default.contentsOfDirectory(atPath: state).filter {
            $0.hasPrefix("events.0") && $0.hasSuffix(".jsonl")
        }
        #expect(rotated.count == 2, "\(rotated)")
    }
}
