import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox watch --root DIR`: one process for every container under DIR (ARCHITECTURE.md, "Many containers"),
/// found as they are made, let go as they are removed; a failing container is logged in it and on stderr while
/// the others go on; the per-container lock keeps a single-container watcher and the fleet from both serving one.
@Suite struct WatchRootTests {
    /// `inbox watch --root ROOT --on-arrival move`.
    private func startFleet(_ root: String) throws -> InboxProcess.Child {
        try InboxProcess.start(["watch", "--root", root, "--on-arrival", "move"].map { Array($0.utf8) })
    }

    private func initContainer(_ path: String, _ extra: [String] = []) throws {
        let result = try InboxProcess.run((["--container", path, "init"] + extra).map { Array($0.utf8) })
        #expect(result.status == 0, "init \(path): \(result.stderr)")
    }

    /// Delivers a file named `name` into `container` and waits for the fleet to move it into Documents.
    private func deliveredIsMoved(_ container: String, _ name: String, _ folder: Scratch) throws -> Bool {
        let source = try folder.file("sources/" + name, "for \(container)")
        let result = try InboxProcess.run("--container", container, "deliver", source)
        #expect(result.status == 0, "\(result.stderr)")
        return waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: container + "/Documents/" + name) }
    }

    private func started(_ container: String, atLeast count: Int = 1) -> Bool {
        waitUntil(timeout: 30) { logRecords(container, event: "watch-started").count >= count }
    }

    @Test func containersMadeUnderTheRootAreServedAndOneRemovedLeavesTheOthers() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        for name in ["a", "b"] { try initContainer(root + "/" + name) }
        let fleet = try startFleet(root)
        defer { _ = fleet.terminate() }
        #expect(started(root + "/a") && started(root + "/b"))
        #expect(try deliveredIsMoved(root + "/a", "first.txt", folder))
        #expect(try deliveredIsMoved(root + "/b", "second.txt", folder))

        // A container made while the fleet runs.
        try initContainer(root + "/c")
        #expect(started(root + "/c"), "the new container is watched")
        #expect(try deliveredIsMoved(root + "/c", "third.txt", folder))

        // One removed: the others go on. Its watcher may still write in it (a failure logged, a folder made
        // again) until the fleet sees it go, so `rm -rf` is tried until the folder is gone.
        let removed = waitUntil(timeout: 30) {
            (try? FileManager.default.removeItem(atPath: root + "/a")) != nil
                || !FileManager.default.fileExists(atPath: root + "/a")
        }
        #expect(removed, "the container could be removed")
        #expect(try deliveredIsMoved(root + "/b", "fourth.txt", folder))
        #expect(try deliveredIsMoved(root + "/c", "fifth.txt", folder))

        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
        // The fleet may see the folder go first, or the watcher its lock file: either says so in one calm line.
        let calm = [root + "/a: removed", root + "/a: its watch.lock was removed or replaced"]
        #expect(calm.contains { result.stderr.contains($0) }, "\(result.stderr)")
        for name in ["b", "c"] {
            #expect(logRecords(root + "/" + name, event: "watch-stopped").count == 1, "\(name) stopped cleanly")
        }
    }

    @Test func aContainerLetGoLeavesNoDescriptorOpenInIt() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        try initContainer(root + "/a")
        let fleet = try startFleet(root)
        defer { _ = fleet.terminate() }
        #expect(started(root + "/a"))
        #expect(try deliveredIsMoved(root + "/a", "a.txt", folder))
        let away = folder.path + "/away"
        try FileManager.default.moveItem(atPath: root + "/a", toPath: away)
        // What the fleet's descriptors name inside the container: its log, lock and folders while it served it.
        func held() -> [String] {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(fleet.pid)/fd")) ?? []
            return fds.compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(fleet.pid)/fd/" + $0)
            }
            .filter { $0.hasPrefix(away + "/") }
        }
        #expect(waitUntil(timeout: 30) { held().isEmpty }, "still open: \(held())")
        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains(root + "/a: removed"), "\(result.stderr)")
    }

    @Test func aRootThatCannotBeWatchedAgainIsSaidOnceAndContainersMadeOnceItIsAreServed() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let fleet = try startFleet(root)
        defer { _ = fleet.terminate() }
        try initContainer(root + "/a")
        #expect(started(root + "/a"), "the fleet watches its root")
        // The root replaced by a file at once: the fleet cannot watch it again.
        let aside = try replaceWithFile(root)
        // The hub tries again each second; a few tries fail before the file goes, each after the first unsaid.
        Thread.sleep(forTimeInterval: 2.5)
        try exchange(root, with: aside)
        try initContainer(root + "/b")
        #expect(started(root + "/b"), "a container made once the root is watched again is served")
        #expect(try deliveredIsMoved(root + "/b", "b.txt", folder))
        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(
            lines.filter { $0.contains("trying again every second, reading it when it changes") }.count == 1,
            "\(result.stderr)")
        #expect(lines.filter { $0.hasSuffix("watching \(root) again") }.count == 1, "\(result.stderr)")
    }

    @Test func systemdHearsReadyOnceTheRootIsWatchedAndStoppingOnceAtTheEnd() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        for name in ["a", "b"] { try initContainer(root + "/" + name) }
        let socket = try NotifySocket(folder.path + "/notify.sock")
        let fleet = try InboxProcess.start(
            ["watch", "--root", root].map { Array($0.utf8) }, environment: ["NOTIFY_SOCKET": socket.path])
        defer { _ = fleet.terminate() }
        let stderr = StderrReader(fleet)
        #expect(socket.receive(within: 30) == "READY=1")
        #expect(started(root + "/a") && started(root + "/b"))
        // A container removed (after its start-up scan, which writes the checkpoint by path): its watcher stops,
        // the fleet does not. The fleet may see its folder go first (the watcher then closes in place: one
        // `watch-stopped` in it), or the watcher its lock file moved (then nothing more is written in it).
        #expect(waitUntil { !logRecords(root + "/b", event: "rescan").isEmpty })
        try FileManager.default.moveItem(atPath: root + "/b", toPath: folder.path + "/b-away")
        #expect(stderr.waitFor("inbox: serving 1 container under \(root)\n"), "\(stderr.text)")
        #expect(logRecords(folder.path + "/b-away", event: "watch-stopped").count <= 1)
        kill(fleet.pid, SIGTERM)
        #expect(try fleet.finish().status == 0)
        var heard: [String] = []
        while let message = socket.receive(within: 0.5) { heard.append(message) }
        #expect(heard == ["STOPPING=1"], "nothing from the containers' watchers, one STOPPING=1 from the fleet")
    }

    @Test func aBrokenContainerAndOneHeldByAnotherWatcherLeaveTheOthersServed() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        try initContainer(root + "/good")
        try initContainer(root + "/held")
        // A sealed bundle, then changed: its watcher must not start (exit status 65).
        try folder.file("Source.app/Info.plist", "<plist>info</plist>\n")
        try initContainer(root + "/sealed", ["--app", "Mail", "--bundle", folder.path + "/Source.app"])
        let plist = root + "/sealed/Mail.app/Info.plist"
        chmod(plist, 0o644)
        try Data("<plist>changed</plist>\n".utf8).write(to: URL(fileURLWithPath: plist))
        // A watcher of its own holds `held`.
        let single = try WatchProcess(root + "/held")

        let fleet = try startFleet(root)
        defer { _ = fleet.terminate() }
        #expect(started(root + "/good"))
        #expect(try deliveredIsMoved(root + "/good", "report.txt", folder))
        let failed = { (name: String, status: Int) in
            waitUntil(timeout: 30) {
                logRecords(root + "/" + name, event: "error").contains {
                    $0["during"] as? String == "watch" && $0["exit_status"] as? Int == status
                        && ($0["message"] as? String)?.isEmpty == false && $0["errno"] is Int
                }
            }
        }
        #expect(failed("sealed", 65), "the broken seal is logged in its container")

        // Once the single watcher stops, the fleet takes the container over.
        #expect(try single.stop().status == 0)
        #expect(started(root + "/held", atLeast: 2), "the fleet serves it after the single watcher")
        #expect(try deliveredIsMoved(root + "/held", "later.txt", folder))

        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains(root + "/sealed: "), "\(result.stderr)")
        #expect(result.stderr.contains(root + "/held: "), "\(result.stderr)")
        // Held by another, the container is tried again but logged nowhere: the record would land in the other's log.
        #expect(logRecords(root + "/held", event: "error").isEmpty, "nothing in the single watcher's log")
        // The pause doubles from a tenth of a second, and is said so (it read "0 s" while under a second).
        #expect(result.stderr.contains("; trying again in 0.1 s"), "\(result.stderr)")
        #expect(result.stderr.contains("; trying again in 0.2 s"), "\(result.stderr)")
    }

    @Test func severalContainerFlagsAreServedInOneProcessAndOnlyByWatch() throws {
        let folder = try Scratch()
        let first = folder.path + "/one"
        let second = folder.path + "/elsewhere/two"
        let third = folder.path + "/apps/three"
        for path in [first, second, third] { try initContainer(path) }
        // One before the command, one after it, and one under a root.
        let fleet = try InboxProcess.start(
            [
                "--container", first, "watch", "--container", second, "--root", folder.path + "/apps", "--on-arrival",
                "move",
            ]
            .map { Array($0.utf8) })
        defer { _ = fleet.terminate() }
        #expect(started(first) && started(second) && started(third))
        #expect(try deliveredIsMoved(first, "a.txt", folder))
        #expect(try deliveredIsMoved(second, "b.txt", folder))
        #expect(try deliveredIsMoved(third, "c.txt", folder))
        kill(fleet.pid, SIGTERM)
        #expect(try fleet.finish().status == 0)
        for path in [first, second, third] { #expect(logRecords(path, event: "watch-stopped").count == 1) }

        // Another command names one container; the same one twice is one.
        let status = try InboxProcess.run("--container", first, "--container", second, "status")
        #expect(status.status == 64)
        #expect(status.stderr.hasPrefix("inbox: '--container' names one container here; only watch serves several"))
        #expect(try InboxProcess.run("--container", first, "status", "--container", first).status == 0)
        // `--once` drains each container in turn (WatchOperatorTests).
        let once = try InboxProcess.run("--container", first, "--container", second, "watch", "--once")
        #expect(once.status == 0, "\(once.stderr)")
        for path in [first, second] { #expect(logRecords(path, event: "watch-stopped").count == 2) }
    }

    /// This process's limits on open descriptors: `rlim_cur` it may open, `rlim_max` it (and what it starts) may
    /// raise that to; zeros when they cannot be read.
    private static var descriptorLimits: rlimit {
        var limit = rlimit()
        return getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? limit : rlimit()
    }

    /// Started with a soft limit on open files too low for its containers (systemd starts a service with 1024; a
    /// container holds about six descriptors), the fleet raises it to the hard limit and serves them all, and a
    /// hook gets the soft limit it had back.
    @Test(.enabled(if: descriptorLimits.rlim_max >= 1_024, "needs a hard RLIMIT_NOFILE of 1,024 or more"))
    func aSoftLimitOnOpenFilesTooLowForTheContainersIsRaisedAndAHookGetsItBack() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        let names = (10..<70).map { "c\($0)" }
        for name in names { try initContainer(root + "/" + name) }
        let hook = #"if [ "$(ulimit -S -n)" = 200 ]; then echo move; else echo keep; fi"#
        let fleet = try InboxProcess.start(
            ["-c", #"ulimit -S -n 200 && exec "$0" watch --root "$1" --exec "$2""#, InboxProcess.binary, root, hook]
                .map { Array($0.utf8) },
            executable: "/bin/sh")
        defer { _ = fleet.terminate() }
        let unserved = { names.filter { logRecords(root + "/" + $0, event: "watch-started").isEmpty } }
        #expect(waitUntil(timeout: 30) { unserved().isEmpty }, "not served: \(unserved())")
        #expect(try deliveredIsMoved(root + "/c69", "last.txt", folder), "the hook saw a soft limit of 200")
        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stderr.contains("Too many open files"), "\(result.stderr)")
    }

    /// A process holding a thousand descriptors or more (a fleet does) gets an inotify descriptor past what
    /// libinotifytools' fortified `select()` takes: the watcher says so and fails, rather than being aborted.
    @Test(.enabled(if: descriptorLimits.rlim_cur >= 1_200, "needs a soft RLIMIT_NOFILE of 1,200 or more"))
    func anInotifyDescriptorPastSelectsLimitIsAFailureNotAnAbort() throws {
        let folder = try Scratch()
        let container = folder.path + "/c"
        try initContainer(container)
        let shell = try runProgram(
            "/bin/bash",
            [
                "-c", #"for i in $(seq 3 1100); do eval "exec $i</dev/null"; done; exec "$0" --container "$1" watch"#,
                InboxProcess.binary, container,
            ])
        let stderr = shell.stderr
        // Exited with 1 (a process killed by a signal has 128 + the signal).
        #expect(shell.status == 1, "\(stderr)")
        #expect(stderr.contains("cannot start inotify: its descriptor 11"), "\(stderr)")
        #expect(stderr.contains("is past what select() takes (1024)"), "\(stderr)")
    }
}
