import AppContainer
import Dispatch
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

@Suite struct HookRunnerTests {
    // MARK: - What the hook gets

    @Test func environmentArgumentsAndStdinAreExact() throws {
        let fixture = try HookFixture()
        let name = try #require(FileName(bytes: Array("a b\nc".utf8) + [0xFF] + Array(".txt".utf8)))
        let contents = (0..<1_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        let item = try fixture.item(name, contents)
        let outcome = try fixture.run(
            """
            printf '%s' "$INBOX_FILE" > "$OUT/file"; printf '%s' "$INBOX_NAME" > "$OUT/name"
            printf '%s' "$INBOX_CONTAINER" > "$OUT/container"; printf '%s' "$PATH" > "$OUT/path"
            printf '%s|%s' "$0" "$#" > "$OUT/arguments"; cat > "$OUT/stdin"
            (echo x >&0) 2>/dev/null; echo $? > "$OUT/write-stdin"; echo keep
            """, item: item)
        #expect(outcome.succeeded && outcome.exitStatus == 0 && outcome.signal == nil)
        #expect(outcome.disposition == .keep)
        #expect(outcome.landlocked == HookRunner.isLandlockAvailable)
        #expect(try fixture.report("file") == item.path)
        #expect(try fixture.report("name") == name.bytes)
        #expect(try fixture.report("container") == Array(fixture.container.utf8))
        #expect(try fixture.report("path") == Array((ProcessInfo.processInfo.environment["PATH"] ?? "").utf8))
        #expect(try fixture.report("arguments") == Array("sh|0".utf8))
        #expect(try fixture.report("stdin") == contents)
        #expect(try fixture.report("write-stdin") != Array("0\n".utf8), "stdin must be read-only")
    }

    @Test(
        arguments: [
            ("echo move", Disposition.move), ("printf '\\n\\t  DELETE now'", .delete), ("echo Keep; echo move", .keep),
            ("echo garbage", nil), ("printf keeper", nil), ("true", nil), ("printf 'deletedeletedelete'", nil),
            ("echo; echo; echo move", .move),
        ] as [(String, Disposition?)])
    func dispositionIsTheFirstWordOfStdout(command: String, expected: Disposition?) throws {
        let fixture = try HookFixture()
        let outcome = try fixture.run(command, item: try fixture.item(try #require(FileName("a.txt")), [1, 2, 3]))
        #expect(outcome.succeeded)
        #expect(outcome.disposition == expected)
    }

    /// A first word that is not a disposition is kept as written, to be shown (issue 49); a long one cut.
    @Test(
        arguments: [
            ("echo '  Yes please'", "Yes"), ("printf keeper", "keeper"), ("true", nil), ("echo move", nil),
            ("printf '%040d' 0", String(repeating: "0", count: 32) + "…"),
        ] as [(String, String?)])
    func aFirstWordThatIsNoDispositionIsKeptToBeShown(command: String, expected: String?) throws {
        let fixture = try HookFixture()
        let outcome = try fixture.run(command, item: try fixture.item(try #require(FileName("a.txt")), [1]))
        #expect(outcome.unknownAnswer.map { String(decoding: $0, as: UTF8.self) } == expected)
    }

    @Test func failureKeepsTheExitStatusAndTheEndOfStderr() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let failed = try fixture.run("echo oops >&2; echo move; exit 3", item: item)
        #expect(failed.exitStatus == 3 && failed.signal == nil && !failed.timedOut && !failed.succeeded)
        #expect(failed.stderrTail == "oops\n")
        #expect(failed.disposition == .move)

        let noisy = try fixture.run(
            #"i=0; while [ $i -lt 5000 ]; do echo "line $i é" >&2; i=$((i+1)); done"#, item: item)
        #expect(noisy.succeeded)
        #expect(noisy.stderrTail.utf8.count <= 2048 && noisy.stderrTail.utf8.count > 2000)
        #expect(noisy.stderrTail.hasSuffix("line 4998 é\nline 4999 é\n"))
        #expect(!noisy.stderrTail.contains("\u{FFFD}"))
    }

    @Test func signalsAreUnblockedAndDefaultWhateverTheCallingThreadHas() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let outcomes = onThreads(1) { _ in
            var all = sigset_t()
            sigfillset(&all)
            pthread_sigmask(SIG_BLOCK, &all, nil)
            // `exec`, as dash blocks every signal for a moment whenever it forks.
            let mask = try? fixture.run(
                #"exec grep -E '^Sig(Blk|Ign):' /proc/self/status > "$OUT/signals""#, item: item)
            let killed = try? fixture.run("kill -TERM $$; exit 9", item: item)
            return [mask, killed]
        }
        let outcome = try #require(outcomes.first?.last ?? nil)
        #expect(outcome.signal == SIGTERM && outcome.exitStatus == nil && !outcome.timedOut)
        let signals = String(decoding: try fixture.report("signals"), as: UTF8.self)
        #expect(signals == "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n")
    }

    // MARK: - Timeouts

    @Test(arguments: ["sleep 30", "sh -c 'sleep 30 & echo $! > \"$OUT/pid\"; wait'", "exec >/dev/null 2>&1; sleep 30"])
    func aHangingHookIsKilledWithWhatItStarted(command: String) throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let started = ContinuousClock.now
        let outcome = try fixture.run(command, item: item, timeout: .milliseconds(500))
        let elapsed = ContinuousClock.now - started
        #expect(outcome.timedOut && outcome.exitStatus == nil && !outcome.succeeded)
        #expect(outcome.signal == SIGKILL)
        #expect(elapsed >= .milliseconds(500) && elapsed < .seconds(10), "took \(elapsed)")
        if command.contains("pid") {
            let text = String(decoding: try fixture.report("pid"), as: UTF8.self)
            let pid = try #require(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
            #expect(
                waitUntil(timeout: 10, interval: 0.001) { processIsGone(pid) },
                "the grandchild \(pid) outlived the timeout")
        }
    }

    @Test func aHookIsDecidedOnItsOwnExitNotOnWhatItLeftRunning() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let started = ContinuousClock.now
        let outcome = try fixture.run(#"sleep 20 & echo $! > "$OUT/pid"; echo move"#, item: item, timeout: .seconds(15))
        let elapsed = ContinuousClock.now - started
        #expect(outcome.succeeded && !outcome.timedOut && outcome.exitStatus == 0, "\(outcome)")
        #expect(outcome.disposition == .move)
        #expect(elapsed < .seconds(10), "waited for the background sleep: \(elapsed)")
        let text = String(decoding: try fixture.report("pid"), as: UTF8.self)
        let pid = try #require(pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(
            waitUntil(timeout: 10, interval: 0.001) { processIsGone(pid) },
            "what the hook left running, \(pid), outlived it")
    }

    /// A descendant that starts a session of its own (`setsid`), directly or after a double fork that
    /// leaves it to the supervisor, is out of the hook's process group: it is killed all the same, at the
    /// timeout and at the hook's exit.
    @Test(arguments: [Detaching.setsid, .doubleFork])
    func aDetachedDescendantIsKilledAtTheTimeout(how: Detaching) throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let outcome = try fixture.run(how.command + "; sleep 100", item: item, timeout: .seconds(5))
        #expect(outcome.timedOut && outcome.signal == SIGKILL && !outcome.succeeded, "\(outcome)")
        let detached = try Detached(fixture)
        #expect(
            waitUntil(timeout: 10, interval: 0.001) { processIsGone(detached.pid) },
            "\(how): \(detached.pid) outlived the timeout")
    }

    @Test(arguments: [Detaching.setsid, .doubleFork])
    func aDetachedDescendantIsKilledWhenTheHookExits(how: Detaching) throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let started = ContinuousClock.now
        let outcome = try fixture.run(how.command + "; echo move", item: item, timeout: .seconds(30))
        let elapsed = ContinuousClock.now - started
        #expect(outcome.succeeded && !outcome.timedOut && outcome.exitStatus == 0, "\(outcome)")
        #expect(outcome.disposition == .move)
        #expect(elapsed < .seconds(20), "waited for the detached sleep: \(elapsed)")
        let detached = try Detached(fixture)
        #expect(
            waitUntil(timeout: 10, interval: 0.001) { processIsGone(detached.pid) },
            "\(how): \(detached.pid) outlived the hook")
    }

    @Test func aHookWhoseSupervisorCannotStartIsReportedAsNotStarted() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let plan = SyscallFaultPlan(failing: 1, only: "spawn_supervised", with: Errno(rawValue: EAGAIN))
        let outcome = try plan.run { try fixture.run(#"echo ran > "$OUT/ran"; echo move"#, item: item) }
        #expect(plan.injected?.name == "spawn_supervised", "\(plan.summary)")
        #expect(outcome.exitStatus == 127 && !outcome.succeeded && outcome.disposition == nil, "\(outcome)")
        #expect(outcome.stderrTail.contains("cannot start the hook"), "\(outcome.stderrTail)")
        #expect(!FileManager.default.fileExists(atPath: fixture.outside + "/ran"), "the hook ran")
    }

    // MARK: - Descriptors

    @Test func noDescriptorIsInheritedButTheThreeStreams() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        // Descriptors without close-on-exec, as libinotifytools makes its own (ARCHITECTURE.md, "libinotifytools").
        let leaked = open(fixture.container, O_RDONLY | O_DIRECTORY)
        try #require(leaked >= 0)
        defer { close(leaked) }
        #expect(fcntl(leaked, F_SETFD, 0) == 0)
        let high = fcntl(leaked, F_DUPFD, 300)
        try #require(high >= 300)
        defer { close(high) }
        #expect(fcntl(high, F_GETFD) & FD_CLOEXEC == 0)

        let outcome = try fixture.run(#"ls /proc/self/fd > "$OUT/fds""#, item: item)
        #expect(outcome.succeeded)
        let listed = Set(String(decoding: try fixture.report("fds"), as: UTF8.self).split(separator: "\n"))
        // 3 is the descriptor `ls` itself reads /proc/self/fd through.
        #expect(listed.isSubset(of: ["0", "1", "2", "3"]) && listed.isSuperset(of: ["0", "1", "2"]), "\(listed)")
    }

    @Test func anItemNotOpenReadOnlyIsRefused() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let fd = open(fixture.container + "/Documents/Inbox/a.txt", O_RDWR | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let outcome = fixture.runner().run(itemPath: item.path, name: item.name, file: fd)
        #expect(outcome.exitStatus == 127 && !outcome.succeeded)
        #expect(outcome.stderrTail.contains("not open read-only"))
    }

    // MARK: - Landlock

    @Test(
        .enabled(if: HookRunner.isLandlockAvailable, "Landlock is not available on this kernel"),
        arguments: [
            #"echo x >> "$INBOX_FILE""#, #"chmod u+w "$INBOX_FILE"; echo x >> "$INBOX_FILE""#, #"rm -f "$INBOX_FILE""#,
            #"echo new > "$INBOX_CONTAINER/Documents/Inbox/new.txt""#, #"echo new > "$INBOX_CONTAINER/new.txt""#,
            #"mkdir "$INBOX_CONTAINER/Library/new""#, #"mv "$INBOX_FILE" "$INBOX_CONTAINER/Documents/""#,
            #"ln "$INBOX_FILE" "$OUT/link""#, #"touch -d 2001-01-01 "$INBOX_FILE""#, #"truncate -s 0 "$INBOX_FILE""#,
            #"echo x >> /proc/self/fd/0"#, #"chattr +i "$INBOX_FILE""#,
        ])
    func aLandlockedHookCannotChangeTheContainer(attack: String) throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a b.txt")), Array("precious".utf8))
        let before = try fixture.snapshot()
        let outcome = try fixture.run(
            #"( \#(attack) ) 2>"$OUT/attack-stderr"; echo $? > "$OUT/status"; echo written > "$OUT/proof""#, item: item)
        #expect(outcome.succeeded && outcome.landlocked)
        let refusal = String(decoding: try fixture.report("attack-stderr"), as: UTF8.self)
        #expect(try fixture.report("status") != Array("0\n".utf8), "the attack succeeded")
        // EXDEV is Landlock's answer to a link or rename across folders it does not allow.
        let reasons = ["Permission denied", "Operation not permitted", "Invalid cross-device link"]
        #expect(reasons.contains { refusal.contains($0) }, "refused for another reason: \(refusal)")
        #expect(try fixture.snapshot() == before)
        #expect(try fixture.report("proof") == Array("written\n".utf8), "the hook could not write outside")
        #expect(!FileManager.default.fileExists(atPath: fixture.outside + "/link"))

        // The runner itself, on this thread and on others, stays free to write in the container.
        let path = fixture.container + "/Documents/after.txt"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("ok".utf8)))
        #expect(chmod(path, 0o600) == 0)
        #expect(onThreads(1) { _ in unlink(path) } == [0])
    }

    #if arch(x86_64)
        /// The calls that go around the file rules are refused with EPERM inside a hook (ARCHITECTURE.md, "The
        /// hook sandbox"); each is first made outside it, where it is not refused with EPERM (else the test cannot
        /// tell, and says so).
        @Test(
            .enabled(
                if: HookRunner.isLandlockAvailable, "the hook sandbox (Landlock and seccomp) is not available here"),
            arguments: [
                ("io_uring_setup", #"my $p = "\0" x 120; my $r = syscall(425, 4, $p);"#),
                ("ptrace", "my $r = syscall(101, 2, getppid(), 0, 0);"),
                ("process_vm_writev", "my $r = syscall(311, $$, 0, 0, 0, 0, 0);"),
                ("name_to_handle_at", #"my $d = "."; my $r = syscall(303, -100, $d, 0, 0, 0);"#),
                ("open_by_handle_at", "my $r = syscall(304, -1, 0, 0);"),
                ("userfaultfd", "my $r = syscall(323, 0);"),
                ("bpf", "my $r = syscall(321, 0, 0, 0);"),
                ("personality", "my $r = syscall(135, 0xffffffff);"),
                (
                    "mount",
                    #"my ($s, $t, $f) = ("none", "/inbox-no-such", "tmpfs"); my $r = syscall(165, $s, $t, $f, 0, 0);"#
                ),
                ("open_tree", #"my $e = ""; my $r = syscall(428, -1, $e, 0);"#),
            ])
        func aHookCannotGoAroundTheFileRules(call: String, perl: String) throws {
            let script = perl + #" print $r < 0 ? $!+0 : "ok";"#
            let unsandboxed = try runProgram("/usr/bin/perl", ["-e", script]).stdoutText
            guard unsandboxed != "\(EPERM)" else {
                print("skipped: \(call) is refused here even outside a hook")
                return
            }
            let fixture = try HookFixture()
            let item = try fixture.item(try #require(FileName("a.txt")), Array("precious".utf8))
            let outcome = try fixture.run("perl -e '\(script)' > \"$OUT/result\"", item: item)
            #expect(outcome.succeeded)
            let result = String(decoding: try fixture.report("result"), as: UTF8.self)
            #expect(result == "\(EPERM)", "\(call) gave \(result) in a hook, \(unsandboxed) outside")
        }
    #endif

    @Test(.enabled(if: HookRunner.isLandlockAvailable, "Landlock is not available on this kernel"))
    func aRulesetIsKeptUntilAFolderItListsChanges() throws {
        // Not in /tmp, which other tests change all the time: folders this test alone changes.
        let fixture = try HookFixture(base: "/var/tmp/inbox-landlock-cache-test")
        let root = try system_realpath(fixture.container)
        // A clock a minute ahead: every folder on the way has settled.
        let later = Timestamp(seconds: Timestamp.now().seconds + 60, nanoseconds: 0)
        let first = try Landlock.sharedRuleset(sparing: root, now: later)
        #expect(try Landlock.sharedRuleset(sparing: root, now: later) === first, "kept while nothing changed")
        try FileManager.default.createDirectory(atPath: fixture.folder + "/new", withIntermediateDirectories: false)
        let second = try Landlock.sharedRuleset(sparing: root, now: later)
        #expect(second !== first, "built again once the container's parent gained a name")
        #expect(try Landlock.sharedRuleset(sparing: root, now: later) === second)
        // With the real clock, a parent modified a moment ago is not trusted: what is built is not kept.
        try FileManager.default.createDirectory(atPath: fixture.folder + "/newer", withIntermediateDirectories: false)
        let fresh = try Landlock.sharedRuleset(sparing: root)
        #expect(try Landlock.sharedRuleset(sparing: root) !== fresh)
    }

    @Test(.enabled(if: HookRunner.isLandlockAvailable, "Landlock is not available on this kernel"))
    func aHookMayWriteBesideTheContainerInAFolderMadeAfterTheFirstHook() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), Array("a".utf8))
        #expect(try fixture.run(#"echo one > "$OUT/one""#, item: item).succeeded)
        let beside = fixture.folder + "/made-later"
        try FileManager.default.createDirectory(atPath: beside, withIntermediateDirectories: false)
        let outcome = try fixture.run("echo two > '\(beside)/two'", item: item)
        #expect(outcome.succeeded && outcome.landlocked, "\(outcome.stderrTail)")
        #expect(FileManager.default.contents(atPath: beside + "/two") == Data("two\n".utf8))
    }

    // MARK: - Concurrency

    @Test func hooksOnFourThreadsEachGetTheirOwnOutcome() throws {
        let fixture = try HookFixture()
        let runs = 6
        let items = try (0..<4).flatMap { thread in
            try (0..<runs).map { run in
                try fixture.item(try #require(FileName("item-\(thread)-\(run)")), Array("from \(thread)/\(run)\n".utf8))
            }
        }
        let command = """
            cat >&2; n=${INBOX_NAME#item-}; t=${n%-*}; i=${n#*-}
            case $((i % 3)) in 0) echo keep;; 1) echo move;; *) echo delete;; esac; exit $((t * 10 + i))
            """
        let outcomes = onThreads(4) { thread in
            (0..<runs).map { run in try? fixture.run(command, item: items[thread * runs + run]) }
        }
        try #require(outcomes.count == 4)
        for (thread, results) in outcomes.enumerated() {
            for (run, outcome) in results.enumerated() {
                #expect(outcome?.exitStatus == Int32(thread * 10 + run))
                #expect(outcome?.stderrTail == "from \(thread)/\(run)\n")
                #expect(outcome?.disposition == [Disposition.keep, .move, .delete][run % 3])
            }
        }
    }
}

// MARK: - Helpers

/// How a hook starts a process that leaves its process group and session: the process writes
/// "PID SESSION" to `$OUT/detached`, and the hook waits for that before it goes on.
enum Detaching: String, CustomTestStringConvertible {
    case setsid, doubleFork

    var command: String {
        let detached = #"setsid sh -c 'echo "$$ $(cut -d " " -f 6 /proc/$$/stat)" > "$OUT/detached"; exec sleep 100' &"#
        let start = self == .setsid ? detached : "( \(detached) )"
        return start + "\n" + #"until [ -s "$OUT/detached" ]; do sleep 0.01; done"#
    }

    var testDescription: String { rawValue }
}

/// The process a `Detaching` command started, as it reported itself.
private struct Detached {
    let pid: pid_t

    /// Reads the report and checks that the process was the leader of a session of its own.
    init(_ fixture: HookFixture) throws {
        let text = String(decoding: try fixture.report("detached"), as: UTF8.self)
        let fields = text.split(whereSeparator: \.isWhitespace).compactMap { pid_t($0) }
        try #require(fields.count == 2, "report: \(text)")
        pid = fields[0]
        #expect(fields[1] == pid, "\(pid) is not a session leader: session \(fields[1])")
    }
}

/// A throwaway folder holding a container (`container/Documents/Inbox`) and, beside it, the folder
/// `outside` that hooks write their reports to (`$OUT`).
private final class HookFixture: Sendable {
    private let scratch: Scratch
    var folder: String { scratch.path }
    var container: String { folder + "/container" }
    var outside: String { folder + "/outside" }

    /// - Parameter base: the folder to make it in; it is made if missing, and left.
    init(base: String = "/tmp") throws {
        scratch = try Scratch(under: base)
        for path in ["/container/Documents/Inbox", "/container/Library", "/outside"] {
            try FileManager.default.createDirectory(atPath: scratch.path + path, withIntermediateDirectories: true)
        }
    }

    func runner(timeout: Duration = .seconds(30), _ command: String = "true") -> HookRunner {
        HookRunner(command: "OUT='\(outside)'; export OUT\n" + command, timeout: timeout, containerRoot: container)
    }

    /// An Inbox item sealed read-only (0444), as the watcher leaves it.
    func item(_ name: FileName, _ contents: [UInt8]) throws -> (path: [UInt8], name: FileName) {
        let path = Array((container + "/Documents/Inbox/").utf8) + name.bytes
        let file = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: 0o444)
        try file.writeAll(contents)
        try file.close()
        return (path, name)
    }

    /// Runs `command` for `item`, handing it the item opened read-only.
    func run(_ command: String, item: (path: [UInt8], name: FileName), timeout: Duration = .seconds(30))
        throws -> HookOutcome
    {
        let file = try FileDescriptor(item.path, .readOnly)
        return runner(timeout: timeout, command).run(itemPath: item.path, name: item.name, file: file.rawValue)
    }

    /// The bytes of a report the hook wrote to `$OUT`.
    func report(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: outside + "/" + name)))
    }

    /// Every path in the container with its kind, mode, size, mtime, inode, link count and contents.
    func snapshot() throws -> [String: String] {
        var result: [String: String] = [:]
        let enumerator = FileManager.default.enumerator(atPath: container)
        while let relative = enumerator?.nextObject() as? String {
            let status = try fileStatus(in: currentDirectory, container + "/" + relative)
            let bytes =
                status.kind == .regular
                ? (try? Data(contentsOf: URL(fileURLWithPath: container + "/" + relative))) : nil
            result[relative] =
                "\(status.kind) \(String(status.mode, radix: 8)) \(status.size) \(status.modified) \(status.inode) "
                + "\(status.linkCount) \(bytes?.base64EncodedString() ?? "-")"
        }
        return result
    }
}

/// Runs `body(index)` on `count` new threads at once and returns their results in index order; what
/// finished within two minutes.
private func onThreads<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
    let results = Mutex<[Int: T]>([:])
    let finished = DispatchSemaphore(value: 0)
    for index in 0..<count {
        Thread.detachNewThread {
            let result = body(index)
            results.withLock { $0[index] = result }
            finished.signal()
        }
    }
    let deadline = DispatchTime.now() + .seconds(120)
    for _ in 0..<count where finished.wait(timeout: deadline) == .timedOut { break }
    return results.withLock { all in (0..<count).compactMap { all[$0] } }
}

/// Each line a hook writes on stderr handed on as it comes (`watch --verbose`, issue 40), besides its tail.
extension HookRunnerTests {
    @Test func eachLineIsHandedOnAsItComesTheLastWithoutItsNewlineAndLongOnesInPieces() throws {
        let fixture = try HookFixture()
        let item = try fixture.item(try #require(FileName("a.txt")), [1])
        let lines = Mutex<[String]>([])
        let go = fixture.outside + "/go"
        // The hook goes on only once the first line has been handed on: lines are not held until it exits.
        let runner = HookRunner(
            command: """
                echo first >&2; i=0
                while [ ! -e "$OUT/go" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
                [ -e "$OUT/go" ] && echo seen >&2
                printf 'partial' >&2; head -c 5000 /dev/zero | tr '\\0' x >&2; echo keep
                """.replacingOccurrences(of: "$OUT", with: fixture.outside),
            timeout: .seconds(60), containerRoot: fixture.container,
            stderrLine: { name, line in
                #expect(name.string == "a.txt")
                lines.withLock { $0.append(line) }
                if line == "first" { #expect(FileManager.default.createFile(atPath: go, contents: Data())) }
            })
        let file = try FileDescriptor(item.path, .readOnly)
        let outcome = runner.run(itemPath: item.path, name: item.name, file: file.rawValue)
        #expect(outcome.succeeded && outcome.disposition == .keep)
        let got = lines.withLock { $0 }
        let long = "partial" + String(repeating: "x", count: 5000)
        #expect(got.count == 4, "\(got.map { $0.prefix(20) })")
        #expect(Array(got.prefix(2)) == ["first", "seen"])
        #expect(got.dropFirst(2).joined() == long && got.dropFirst(2).first?.utf8.count == 4096)
        #expect(outcome.stderrTail.hasSuffix(String(repeating: "x", count: 100)), "the tail is kept as before")
    }
}
