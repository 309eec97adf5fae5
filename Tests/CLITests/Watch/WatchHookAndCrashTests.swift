import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// `inbox watch --exec` and a watcher killed mid-burst.
@Suite struct WatchHookAndCrashTests {
    @Test func theHookGetsTheFileOnStdinAndItsEnvironmentAndChoosesTheDisposition() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let report = folder.path + "/report"
        let script = try folder.file(
            "hook.sh",
            """
            {
              printf '%s\\n' "$INBOX_FILE" "$INBOX_NAME" "$INBOX_CONTAINER"
              cat
            } > "\(report)/$(printf %s "$INBOX_NAME" | od -An -tx1 | tr -d ' \\n')"
            echo move
            """)
        try FileManager.default.createDirectory(atPath: report, withIntermediateDirectories: true)
        let source = try folder.file("with space.txt", "the contents\n")
        #expect(try InboxProcess.run("--container", container, "deliver", source).status == 0)
        let result = try InboxProcess.run("--container", container, "watch", "--once", "--exec", "sh " + script)
        #expect(result.status == 0, "\(result.stderr)")
        let hexName = Array("with space.txt".utf8).map { String(format: "%02x", $0) }.joined()
        let seen = try String(contentsOfFile: report + "/" + hexName, encoding: .utf8)
        #expect(seen == "\(container)/Documents/Inbox/with space.txt\nwith space.txt\n\(container)\nthe contents\n")
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/with space.txt"), "the hook said move")
        let handled = try #require(logRecords(container, event: "handled").first)
        #expect(handled["status"] as? Int == 0)
        #expect(handled["disposition"] as? String == "move")
    }

    @Test(.enabled(if: HookRunner.isLandlockAvailable, "the kernel has no Landlock"))
    func aHookCannotChangeItsFile() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let source = try folder.file("keep.txt", "original\n")
        // Landlock leaves the hook write access beside the container, not in the folders above it.
        let marker = try folder.file("outside/marker", "")
        #expect(try InboxProcess.run("--container", container, "deliver", source).status == 0)
        let attack = """
            echo x >> "$INBOX_FILE"; chmod u+w "$INBOX_FILE"; echo y > "$INBOX_FILE"; rm -f "$INBOX_FILE"; \
            touch "$INBOX_CONTAINER/Documents/Inbox/new.txt"; echo ran > \(marker)
            """
        let result = try InboxProcess.run("--container", container, "watch", "--once", "--exec", attack)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try String(contentsOfFile: marker, encoding: .utf8) == "ran\n", "the hook ran and could write outside")
        let inbox = container + "/Documents/Inbox"
        #expect(try String(contentsOfFile: inbox + "/keep.txt", encoding: .utf8) == "original\n")
        #expect(
            try FileManager.default.attributesOfItem(atPath: inbox + "/keep.txt")[.posixPermissions] as? Int == 0o444)
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox) == ["keep.txt"])
    }

    @Test func aHangingHookIsKilledAtItsTimeoutAndTheWatcherGoesOn() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let files = try ["slow.txt", "next.txt"].map { try folder.file($0, $0) }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        let hook = #"if [ "$INBOX_NAME" = slow.txt ]; then echo stuck >&2; sleep 60; fi; echo move"#
        let started = Date()
        let result = try InboxProcess.run(
            "--container", container, "watch", "--once", "--hook-timeout", "1", "--jobs", "2", "--exec", hook)
        #expect(result.status == 0)
        #expect(Date().timeIntervalSince(started) < 50, "killed long before its 60 s sleep ended")
        let handled = logRecords(container, event: "handled")
        let slow = try #require(handled.first { $0["path"] as? String == "Documents/Inbox/slow.txt" })
        #expect(slow["timed_out"] as? Bool == true)
        #expect((slow["stderr"] as? String)?.contains("stuck") == true)
        #expect(slow["disposition"] as? String == "keep", "a failed hook leaves the item")
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/Inbox/slow.txt"))
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/next.txt"), "the next item was handled")
    }

    /// The hook's supervisor outlives a watcher killed with SIGKILL just long enough to kill what the hook
    /// started, a process in a session of its own included.
    @Test func aWatcherKilledMidHookLeavesNothingOfTheHookRunning() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let out = folder.path + "/out"  // beside the container: Landlock lets the hook write there
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        let source = try folder.file("a.txt", "a\n")
        #expect(try InboxProcess.run("--container", container, "deliver", source).status == 0)
        let hook = #"setsid sh -c 'echo $$ > "$OUT/detached"; exec sleep 600' & echo $$ > "$OUT/hook"; sleep 600"#
        let watcher = try WatchProcess(
            container, ["--hook-timeout", "600", "--exec", "export OUT='\(out)'; " + hook])
        // The shell makes each file (its redirection) before echo writes the pid: wait for a whole line.
        func pid(_ name: String) -> pid_t? {
            guard let text = try? String(contentsOfFile: out + "/" + name, encoding: .utf8), text.hasSuffix("\n")
            else { return nil }
            return pid_t(text.dropLast())
        }
        let reported = waitUntil(timeout: 30) { pid("hook") != nil && pid("detached") != nil }
        try #require(reported, "the hook started")
        let pids = ["hook", "detached"].compactMap(pid)
        #expect(pids.count == 2)
        #expect(pids.allSatisfy { !processIsGone($0) }, "both run while the watcher does")
        watcher.kill9()
        for pid in pids {
            #expect(waitUntil(timeout: 30) { processIsGone(pid) }, "\(pid) outlived the watcher")
        }
    }

    @Test func afterKill9MidBurstEveryFileIsHandledAndNoneTwice() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try writeFiles(5_000, in: folder.path + "/staging", prefix: "crash")
        let watcher = try WatchProcess(container, ["--on-arrival", "move"])
        try renameAll(from: folder.path + "/staging", into: container + "/Documents/Inbox")
        #expect(waitUntil { logRecords(container, event: "arrived").count >= 1_000 })
        watcher.kill9()
        let restarted = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(restarted.status == 0, "\(restarted.stderr)")
        let documents = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents").filter {
            $0 != "Inbox"
        }
        #expect(documents.count == 5_000, "every file is in Documents")
        #expect(
            documents.allSatisfy { $0.hasPrefix("crash") && $0.hasSuffix(".txt") && !$0.contains(" ") }, "none twice")
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").isEmpty)
        let arrived = logRecords(container, event: "arrived").compactMap { $0["path"] as? String }
        #expect(arrived.count == 5_000 && Set(arrived).count == 5_000, "each arrived once: \(arrived.count)")
        let moved = logRecords(container, event: "moved").compactMap { $0["from"] as? String }
        #expect(moved.count == 5_000 && Set(moved).count == 5_000, "each moved once: \(moved.count)")
    }

    @Test func afterTwoKill9sWhileHooksRunNoHookIsAskedTwiceAndNothingIsLost() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let count = 300
        try writeFiles(count, in: folder.path + "/staging", prefix: "hook")
        // Each run leaves a line beside the container, where Landlock lets the hook write.
        let runs = try folder.file("outside/runs", "")
        let hook = ["--jobs", "4", "--exec", "echo \"$INBOX_NAME\" >> \(runs); sleep 0.02; echo move"]
        func runCount() -> Int {
            ((try? String(contentsOfFile: runs, encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        var watcher = try WatchProcess(container, hook)
        try renameAll(from: folder.path + "/staging", into: container + "/Documents/Inbox")
        for threshold in [40, 120] {
            #expect(waitUntil { runCount() >= threshold }, "the hooks ran")
            watcher.kill9()
            if threshold == 40 { watcher = try WatchProcess(container, hook) }
        }
        let last = try InboxProcess.run((["--container", container, "watch", "--once"] + hook).map { Array($0.utf8) })
        #expect(last.status == 0, "\(last.stderr)")

        let lines = try String(contentsOfFile: runs, encoding: .utf8).split(separator: "\n").map(String.init)
        #expect(Set(lines).count == lines.count, "no hook ran twice: \(lines.count - Set(lines).count) repeats")
        let inbox = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox")
        let documents = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents").filter {
            $0 != "Inbox"
        }
        #expect(Set(inbox + documents) == Set((0..<count).map { "hook\($0).txt" }), "each file once, none lost")
        #expect(inbox.count + documents.count == count)
        let handled = logRecords(container, event: "handled")
        let paths = handled.compactMap { $0["path"] as? String }
        #expect(paths.count == count && Set(paths).count == count, "one answer for each arrival: \(paths.count)")
        // What a kill cut off is kept, and says so; everything else went where its hook said.
        let interrupted = handled.filter { $0["interrupted"] as? Bool == true }
        #expect(!interrupted.isEmpty, "the kills cut off some answers")
        #expect(interrupted.allSatisfy { $0["disposition"] as? String == "keep" && $0["id"] != nil })
        #expect(Set(interrupted.compactMap { $0["path"] as? String }) == Set(inbox.map { "Documents/Inbox/" + $0 }))
        let moved = logRecords(container, event: "moved").compactMap { $0["from"] as? String }
        #expect(Set(moved) == Set(documents.map { "Documents/Inbox/" + $0 }) && moved.count == documents.count)
    }
}
