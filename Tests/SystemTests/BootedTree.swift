import Foundation
import Glibc
import TestSupport
import Testing

/// A clean Debian 12 tree booted under its own systemd, with the package installed (ARCHITECTURE.md, "Packages
/// and services"): made once with mmdebstrap and cached as a tarball under `.build/system-tree`, unpacked afresh
/// for each run, the `.deb` installed in it with `apt-get` before the boot, then booted with `systemd-nspawn
/// --private-network` (its own loopback: its Postfix never meets the machine's). Commands run inside through
/// `nsenter` into its PID 1; the tree's files are reached from here under `root`.
final class BootedTree: Sendable {
    /// Why the tree cannot be booted here, in one line; nil when it can.
    static let unavailable: String? = {
        if getuid() != 0 { return "needs root (systemd-nspawn, mmdebstrap)" }
        for tool in ["/usr/bin/systemd-nspawn", "/usr/bin/mmdebstrap", "/usr/bin/nsenter", "/usr/bin/lintian"]
        where !FileManager.default.isExecutableFile(atPath: tool) {
            return "needs \(tool) (make deps)"
        }
        if package == nil { return "no .build/inbox_*.deb to install (make deb; make test-system makes it)" }
        if !mirrorAnswers() { return "Debian's archive (\(mirror)) does not answer: no tree can be made or installed" }
        return nil
    }()

    /// The archive mmdebstrap makes the tree from and apt installs the package's libraries from.
    static let mirror = "http://deb.debian.org/debian"

    /// Whether the archive serves bookworm's Release file.
    private static func mirrorAnswers() -> Bool {
        let target = NSTemporaryDirectory() + "inbox-release-\(getpid())"
        defer { unlink(target) }
        let fetched = try? InboxProcess.run(
            ["download-file", mirror + "/dists/bookworm/Release", target].map { Array($0.utf8) },
            executable: "/usr/lib/apt/apt-helper")
        return fetched?.status == 0
    }

    /// The tree of this test run, booted on first use and shut down when the process exits.
    static let shared = Result { try BootedTree() }

    /// What the base tree holds beyond Debian's minimal one: the init system, logind for user managers, Postfix and
    /// procmail for the mail tests. The package brings the rest.
    static let includes = ["systemd", "systemd-sysv", "dbus", "libpam-systemd", "passwd", "postfix", "procmail"]

    /// The package folder (`.build` lives there).
    static let packageRoot = TestPaths.repository

    /// The package to install: `INBOX_DEB`, else the newest `.build/inbox_*.deb`.
    static let package: String? = {
        if let path = ProcessInfo.processInfo.environment["INBOX_DEB"] { return path }
        let folder = packageRoot + "/.build"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return names.filter { $0.hasPrefix("inbox_") && $0.hasSuffix(".deb") }.map { folder + "/" + $0 }
            .max { modified($0) < modified($1) }
    }()

    /// The host's path of the tree's `/`.
    let root: String
    /// The `systemd-nspawn` process, and the tree's PID 1 (its child).
    let nspawn: pid_t
    let pid1: pid_t

    private init() throws {
        let folder = Self.packageRoot + "/.build/system-tree"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Self.stopLeftover(in: folder)
        let base = try Self.baseTarball(in: folder)
        root = folder + "/booted"
        try Self.mustRun("/bin/mkdir", [root])
        try Self.mustRun("/bin/tar", ["-C", root, "-xf", base])
        try Self.mustRun("/bin/cp", [try #require(Self.package), root + "/root/inbox.deb"])
        // Installed before the boot, with the machine's network, as a user installs it: apt pulls in what it needs.
        try Self.mustRun(
            "/usr/bin/systemd-nspawn",
            [
                "-q", "-D", root, "--register=no", "--keep-unit", "--resolv-conf=replace-host",
                "-E", "DEBIAN_FRONTEND=noninteractive", "/bin/sh", "-c",
                "apt-get update -qq && apt-get install -y -qq /root/inbox.deb",
            ])
        let log = open(folder + "/booted.log", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        defer { close(log) }
        nspawn = try spawn(
            "/usr/bin/systemd-nspawn",
            ["-D", root, "-b", "--private-network", "--register=no", "--keep-unit", "--console=read-only"],
            output: log)
        bootedNspawn = nspawn
        atexit { shutDownBootedTree() }
        try Data("\(nspawn)\n".utf8).write(to: URL(fileURLWithPath: folder + "/booted.pid"))
        pid1 = try Self.initProcess(of: nspawn)
        try Self.awaitBoot(pid1)
    }

    /// The host's path of `path` in the tree.
    func path(_ path: String) -> String { root + path }

    /// Runs `ARGS…` in the tree (as `user`, when given), with a clean environment, to the end.
    @discardableResult
    func run(_ arguments: [String], as user: String? = nil, input: String = "") throws -> InboxProcess.Result {
        try Self.runInside(pid1, user.map { ["runuser", "-u", $0, "--"] + arguments } ?? arguments, input: input)
    }

    /// Runs `ARGS…` in the tree and throws, with what it printed, unless it exits 0.
    @discardableResult
    func mustRun(_ arguments: [String], as user: String? = nil, input: String = "") throws -> InboxProcess.Result {
        let result = try run(arguments, as: user, input: input)
        guard result.status == 0 else {
            throw Failure("\(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
        }
        return result
    }

    /// `systemctl ARGS…` of the system manager, or of `user`'s manager.
    @discardableResult
    func systemctl(_ arguments: [String], user: String? = nil) throws -> InboxProcess.Result {
        guard let user else { return try run(["systemctl"] + arguments) }
        let uid = try mustRun(["id", "-u", user]).stdoutText.trimmingCharacters(in: .newlines)
        return try run(["env", "XDG_RUNTIME_DIR=/run/user/\(uid)", "systemctl", "--user"] + arguments, as: user)
    }

    /// A property of a unit (`systemctl show -P`).
    func property(_ name: String, of unit: String, user: String? = nil) throws -> String {
        try systemctl(["show", "-P", name, unit], user: user).stdoutText.trimmingCharacters(in: .newlines)
    }

    /// Waits until `condition` holds, or `timeout` seconds pass; whether it held.
    func waitUntil(timeout: TimeInterval = 60, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            usleep(50_000)
        }
        return try condition()
    }

    private static func runInside(_ pid1: pid_t, _ arguments: [String], input: String = "") throws
        -> InboxProcess.Result
    {
        let command =
            ["-t", "\(pid1)", "-a", "/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"]
            + arguments
        return try InboxProcess.run(
            command.map { Array($0.utf8) }, input: Array(input.utf8), executable: "/usr/bin/nsenter")
    }

    /// The minimal Debian 12 tree with `includes`, as a tarball made once and kept (named by what it holds).
    private static func baseTarball(in folder: String) throws -> String {
        let key = includes.joined(separator: ",")
        let tarball =
            folder + "/bookworm-\(key.utf8.reduce(UInt32(2_166_136_261)) { ($0 ^ UInt32($1)) &* 16_777_619 }).tar"
        if FileManager.default.fileExists(atPath: tarball) { return tarball }
        try mustRun(
            "/usr/bin/mmdebstrap",
            [
                "--quiet", "--variant=minbase", "--format=tar", "--include=\(key)", "bookworm", tarball + ".partial",
                "deb \(mirror) bookworm main", "deb \(mirror) bookworm-updates main",
                "deb \(mirror)-security bookworm-security main",
            ])
        try mustRun("/bin/mv", [tarball + ".partial", tarball])
        return tarball
    }

    /// Stops the tree an earlier run left booted (a test process killed before its exit) and removes it.
    private static func stopLeftover(in folder: String) throws {
        if let text = try? String(contentsOfFile: folder + "/booted.pid", encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)),
            (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "systemd-nspawn\n"
        {
            kill(pid, SIGKILL)
            while kill(pid, 0) == 0 { usleep(20_000) }
        }
        try mustRun("/bin/rm", ["-rf", folder + "/booted", folder + "/booted.pid"])
    }

    /// Waits until the tree's systemd has started every unit of the boot (`is-system-running --wait` answers once its
    /// bus is up: before, it fails to connect, or says `offline` very early in the boot) and throws unless all of
    /// them started.
    private static func awaitBoot(_ pid1: pid_t) throws {
        let deadline = Date().addingTimeInterval(120)
        var state = try runInside(pid1, ["systemctl", "is-system-running", "--wait"])
        while ["", "offline\n"].contains(state.stdoutText) && Date() < deadline {
            usleep(100_000)
            state = try runInside(pid1, ["systemctl", "is-system-running", "--wait"])
        }
        guard state.stdoutText == "running\n" else {
            let failed = try runInside(pid1, ["systemctl", "--failed", "--no-legend"]).stdoutText
            let ended = state.stdoutText.trimmingCharacters(in: .newlines)
            throw Failure("the tree's boot ended \(ended) \(state.stderr): \(failed)")
        }
    }

    /// The tree's PID 1: the child of `nspawn` once it runs systemd.
    private static func initProcess(of nspawn: pid_t) throws -> pid_t {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            let children = (try? String(contentsOfFile: "/proc/\(nspawn)/task/\(nspawn)/children", encoding: .utf8))
            for child in (children ?? "").split(separator: " ").compactMap({ pid_t($0) })
            where (try? String(contentsOfFile: "/proc/\(child)/comm", encoding: .utf8)) == "systemd\n" {
                return child
            }
            guard kill(nspawn, 0) == 0 else {
                throw Failure("systemd-nspawn exited: see .build/system-tree/booted.log")
            }
            usleep(20_000)
        }
        throw Failure("the tree's systemd did not start in 60 s: see .build/system-tree/booted.log")
    }

    @discardableResult
    private static func mustRun(_ program: String, _ arguments: [String]) throws -> InboxProcess.Result {
        let result = try InboxProcess.run(arguments.map { Array($0.utf8) }, executable: program)
        guard result.status == 0 else {
            let output = (result.stdoutText + result.stderr).split(separator: "\n").suffix(15).joined(separator: "\n")
            throw Failure("\(program) \(arguments.joined(separator: " ")) exited \(result.status): \(output)")
        }
        return result
    }

    private static func modified(_ path: String) -> Date {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date) ?? .distantPast
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// The `systemd-nspawn` of the booted tree, for the exit handler (a C function pointer captures nothing).
nonisolated(unsafe) private var bootedNspawn: pid_t = 0

/// Shuts the tree down as a container is shut down (SIGTERM: nspawn asks its systemd to power off), waits for it,
/// and removes it. Run at the test process's exit.
private func shutDownBootedTree() {
    guard bootedNspawn > 0 else { return }
    kill(bootedNspawn, SIGTERM)
    var status: Int32 = 0
    let deadline = Date().addingTimeInterval(30)
    while waitpid(bootedNspawn, &status, WNOHANG) == 0 && Date() < deadline { usleep(50_000) }
    if kill(bootedNspawn, 0) == 0 {
        kill(bootedNspawn, SIGKILL)
        waitpid(bootedNspawn, &status, 0)
    }
    let folder = BootedTree.packageRoot + "/.build/system-tree"
    _ = try? InboxProcess.run([Array("-rf".utf8), Array((folder + "/booted").utf8)], executable: "/bin/rm")
    unlink(folder + "/booted.pid")
}
