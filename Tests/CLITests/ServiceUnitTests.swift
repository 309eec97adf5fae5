import Foundation
import Glibc
import TestSupport
import Testing

/// The systemd units in `systemd/` (README.md, "Running as a service"), as `make install` installs them, checked
/// by `systemd-analyze`, which needs no running systemd. Without systemd-analyze these tests fail: `make deps`
/// and `.ci/run` install it (the `systemd` package).
@Suite struct ServiceUnitTests {
    static let repository = TestPaths.repository

    /// The units `make install` installs for the system manager and for the user manager: paths under
    /// `systemd/`, read from the Makefile's SYSTEM_UNITS and USER_UNITS.
    static func installedUnits() throws -> (system: [String], user: [String]) {
        let makefile = try String(contentsOfFile: repository + "/Makefile", encoding: .utf8)
        func list(_ name: String) -> [String] {
            let line = makefile.split(separator: "\n").first { $0.hasPrefix(name + " = ") } ?? ""
            return line.dropFirst(name.count + 3).split(separator: " ").map(String.init)
        }
        return (list("SYSTEM_UNITS"), list("USER_UNITS"))
    }

    /// A unit file's settings, `Key=Value` a line, in order; comments left out.
    static func settings(_ unit: String) throws -> [(key: String, value: String)] {
        let text = try String(contentsOfFile: repository + "/systemd/" + unit, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#"), !line.hasPrefix("["), let equals = line.firstIndex(of: "=") else { return nil }
            return (String(line[..<equals]), String(line[line.index(after: equals)...]))
        }
    }

    static func values(_ key: String, in unit: String) throws -> [String] {
        try settings(unit).filter { $0.key == key }.map(\.value)
    }

    struct MissingTool: Error, CustomStringConvertible {
        let description: String
    }

    /// `systemd-analyze ARGS…` to its end: the exit status and its output (stdout and stderr together).
    static func systemdAnalyze(_ arguments: [String], environment: [String: String] = [:]) throws -> (Int32, String) {
        let folders = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        guard
            let program = (folders + ["/usr/bin", "/bin"]).map({ $0 + "/systemd-analyze" }).first(where: {
                FileManager.default.isExecutableFile(atPath: $0)
            })
        else {
            throw MissingTool(description: "systemd-analyze is missing: apt-get install systemd (make deps does)")
        }
        return try runProgram(program, arguments, environment: environment, mergingStderr: true).statusAndOutput
    }

    /// Copies `units` into `folder` as `make install` does, ExecStart pointed at the built binary; the paths
    /// of the copies.
    static func install(_ units: [String], into folder: String) throws -> [String] {
        try units.map { unit in
            let text = try String(contentsOfFile: repository + "/systemd/" + unit, encoding: .utf8)
            if unit.hasSuffix(".service") {
                let starts = text.split(separator: "\n").filter { $0.hasPrefix("ExecStart=") }
                #expect(
                    !starts.isEmpty && starts.allSatisfy { $0.contains("/usr/local/bin/inbox ") },
                    "\(unit): the path make install rewrites")
            }
            let copy = folder + "/" + (unit.split(separator: "/").last.map(String.init) ?? unit)
            try text.replacingOccurrences(of: "/usr/local/bin/inbox", with: InboxProcess.binary)
                .write(toFile: copy, atomically: true, encoding: .utf8)
            return copy
        }
    }

    /// The options that make `systemd-analyze verify` check `Documentation=man:inbox(1)` against the page the
    /// binary makes, where `man` is installed; elsewhere the check is left out.
    static func manOptions(in folder: Scratch) throws -> ([String], [String: String]) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/man") else { return (["--man=no"], [:]) }
        let page = try InboxProcess.run("man")
        #expect(page.status == 0, "\(page.stderr)")
        try FileManager.default.createDirectory(atPath: folder.path + "/man/man1", withIntermediateDirectories: true)
        try Data(page.stdout).write(to: URL(fileURLWithPath: folder.path + "/man/man1/inbox.1"))
        return ([], ["MANPATH": folder.path + "/man"])
    }

    @Test func everyUnitInTheSystemdFolderIsInstalled() throws {
        let (system, user) = try Self.installedUnits()
        #expect(system.contains("inbox-watch@.service") && user.contains("user/inbox-watch@.service"))
        let folder = Self.repository + "/systemd"
        let files = try FileManager.default.subpathsOfDirectory(atPath: folder).filter {
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: folder + "/" + $0, isDirectory: &isFolder)
                && !isFolder.boolValue
        }
        #expect(Set(files) == Set(system + user), "SYSTEM_UNITS and USER_UNITS in the Makefile")
    }

    @Test func theSystemUnitsVerify() throws {
        let folder = try Scratch()
        let units = try Self.install(try Self.installedUnits().system, into: folder.path)
        let (options, environment) = try Self.manOptions(in: folder)
        // The templates, and instances for a container path that needs escaping (what %f turns back).
        let instance = "srv-mail\\x2dapp"
        let instances =
            ["inbox-watch@", "inbox-drain@"].map { folder.path + "/" + $0 + instance + ".service" } + [
                folder.path + "/inbox-drain@" + instance + ".path"
            ]
        let (status, output) = try Self.systemdAnalyze(
            ["verify"] + options + units + instances, environment: environment)
        #expect(status == 0 && output.isEmpty, "systemd-analyze verify:\n\(output)")
    }

    @Test func theUserUnitsVerify() throws {
        let folder = try Scratch()
        let units = try Self.install(try Self.installedUnits().user, into: folder.path)
        var (options, environment) = try Self.manOptions(in: folder)
        // A user manager's paths start from $XDG_RUNTIME_DIR, which CI may not have; no manager runs.
        environment["XDG_RUNTIME_DIR"] = folder.path
        let instance = folder.path + "/inbox-drain@home-me-.local-share-inbox-default.path"
        let (status, output) = try Self.systemdAnalyze(
            ["--user", "verify"] + options + units + [instance], environment: environment)
        #expect(status == 0 && output.isEmpty, "systemd-analyze --user verify:\n\(output)")
    }

    /// The exposure `systemd-analyze security` gives a system service: 0.0 (safe) to 10.0 (exposed). (It rates a
    /// user service as if it ran as root with every capability, so the user units are not rated.)
    @Test(arguments: ["inbox-watch@.service", "inbox-drain@.service", "inbox-lmtp.service"])
    func aSystemServiceRatesTwoOrBetter(_ unit: String) throws {
        let folder = try Scratch()
        let copy = try #require(try Self.install([unit], into: folder.path).first)
        let (status, output) = try Self.systemdAnalyze(["security", "--offline=yes", copy])
        #expect(status == 0, "\(output)")
        // "→ Overall exposure level for inbox-watch@i.service: 0.9 SAFE 😀"
        let line = try #require(
            output.split(separator: "\n").first { $0.contains("Overall exposure level for ") }, "\(output)")
        let score = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Double($0) })
        #expect(score <= 2.0, "\(unit): \(line)")
    }

    /// A unit's hardening: its lines from `# Hardening` to the next section.
    static func hardening(_ unit: String) throws -> [Substring] {
        let text = try String(contentsOfFile: repository + "/systemd/" + unit, encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.hasPrefix("# Hardening") }, "\(unit) has a # Hardening part")
        return Array(lines[start...].prefix { !$0.hasPrefix("[") })
    }

    @Test func theWatcherAndTheDrainShareOneHardening() throws {
        for folder in ["", "user/"] {
            let watch = try Self.hardening(folder + "inbox-watch@.service")
            #expect(watch.count > 20)
            #expect(watch == (try Self.hardening(folder + "inbox-drain@.service")), "\(folder)inbox-drain@.service")
        }
    }

    /// The system calls a group of `SystemCallFilter=` names, its subgroups expanded (`systemd-analyze syscall-filter`).
    static func systemCalls(in group: String, cache: inout [String: Set<String>]) throws -> Set<String> {
        if let known = cache[group] { return known }
        let (status, output) = try systemdAnalyze(["syscall-filter", group])
        #expect(status == 0, "\(group): \(output)")
        var calls: Set<String> = []
        for line in output.split(separator: "\n").dropFirst() {
            let name = line.trimmingCharacters(in: .whitespaces)
            if name.isEmpty || name.hasPrefix("#") { continue }
            calls.formUnion(name.hasPrefix("@") ? try systemCalls(in: name, cache: &cache) : [name])
        }
        cache[group] = calls
        return calls
    }

    /// Every system call of the syscall layer and the hook supervisor, and every one that `strace -f` saw a
    /// lasting watcher, a drain and their hooks (`sh`, `sha256sum`, `sleep`) make: moves, a rejected link, a
    /// hard-linked file copied, a sandboxed hook that left a child behind, READY=1 sent.
    static let callsTheWatcherMakes: Set<String> = [
        "access", "arch_prctl", "brk", "clone", "clone3", "close", "close_range", "copy_file_range", "dup2",
        "execve", "exit", "exit_group", "fadvise64", "fchdir", "fchmod", "fcntl", "fgetxattr", "flock",
        "fremovexattr", "fsetxattr", "fstatfs", "fsync", "ftruncate", "futex", "getdents64", "getegid", "geteuid",
        "getgid",
        "getpid", "getppid", "getrandom", "gettid", "getuid", "inotify_add_watch", "inotify_init", "ioctl", "kill",
        "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "linkat", "lseek", "madvise",
        "mkdirat", "mmap", "mprotect", "munmap", "newfstatat", "openat", "pidfd_open", "pipe2", "poll", "prctl",
        "pread64", "prlimit64", "pselect6", "pwrite64", "read", "readlink", "readlinkat", "renameat", "renameat2",
        "rseq", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sched_getaffinity", "seccomp", "sendto",
        "set_robust_list", "set_tid_address", "setpgid", "shutdown", "sigaltstack", "socket", "socketpair",
        "statfs", "statx", "symlinkat", "syncfs", "unlinkat", "unshare", "utimensat", "vfork", "wait4", "waitid",
        "write",
    ]

    /// Every system call `strace -f` saw `inbox lmtp` make (a delivery into a container, a name refused, SIGTERM),
    /// and those of its socket calls it makes elsewhere (socket activation, inet, the replaced socket, a batch's
    /// syncfs). It starts no hook: no Landlock, no seccomp.
    static let callsLMTPMakes: Set<String> = [
        "accept4", "access", "arch_prctl", "bind", "brk", "clone3", "close", "connect", "dup2", "execve", "exit",
        "exit_group", "fchmodat", "fcntl", "fdatasync", "flock", "fstatfs", "fsync", "ftruncate", "futex",
        "getdents64", "geteuid", "getpid", "getrandom", "getsockname", "getsockopt", "gettid", "ioctl", "listen",
        "lseek", "madvise", "mmap", "mprotect", "munmap", "newfstatat", "openat", "pipe2", "poll", "prctl", "pread64",
        "prlimit64", "pwrite64", "read", "readlink", "readlinkat", "renameat2", "rseq", "rt_sigaction",
        "rt_sigprocmask", "rt_sigreturn", "sched_getaffinity", "sendto", "set_robust_list", "set_tid_address",
        "setsockopt", "sigaltstack", "socket", "statfs", "statx", "sync_file_range", "syncfs", "sysinfo", "uname",
        "unlinkat", "write",
    ]

    /// A command line of a unit as systemd runs it: its prefixes (`+`, `-`, …) dropped, split into words at spaces
    /// outside quotes, each `$$` made `$`. A lone `$`, a variable systemd would expand from the unit's own
    /// settings, fails the test: the shell is to read the environment.
    static func commandLine(_ value: String) -> [String] {
        let line = value.drop { "+-@:!".contains($0) }
        #expect(!line.replacingOccurrences(of: "$$", with: "").contains("$"), "systemd expands a variable: \(value)")
        var words: [String] = []
        var word: String?
        var quote: Character?
        for character in line {
            if let open = quote {
                if character == open { quote = nil } else { word?.append(character) }
            } else if character == "'" || character == "\"" {
                quote = character
                word = word ?? ""
            } else if character == " " {
                if let done = word { words.append(done) }
                word = nil
            } else {
                word = (word ?? "") + String(character)
            }
        }
        if let done = word { words.append(done) }
        return words.map { $0.replacingOccurrences(of: "$$", with: "$") }
    }

    /// `inbox-watch-all.service` serves the folder of the default container `inbox init` makes, whether
    /// `$XDG_DATA_HOME` is set or not: its ExecStartPre and ExecStart, run as systemd runs them, make and watch
    /// `$XDG_DATA_HOME/inbox`, else `$HOME/.local/share/inbox`. The watcher is the process the unit started
    /// (`exec`), so the unit's SIGTERM stops it.
    @Test func theAllContainersUnitServesTheDataHomeOfTheCommandLine() throws {
        let unit = "user/inbox-watch-all.service"
        let make = Self.commandLine(try #require(try Self.values("ExecStartPre", in: unit).first))
        let serve = Self.commandLine(try #require(try Self.values("ExecStart", in: unit).first))
        // Shell command lines, or nothing else is run.
        try #require(make.first == "/bin/sh" && serve.first == "/bin/sh", "\(make) \(serve)")
        let folder = try Scratch()
        let file = try folder.file("arrival.pdf", "%PDF-1.4 an arrival")
        for dataHome in [folder.path + "/data", ""] {
            let environment = ["HOME": folder.path + "/home", "XDG_DATA_HOME": dataHome]
            let root = (dataHome.isEmpty ? folder.path + "/home/.local/share" : dataHome) + "/inbox"
            let (made, output) = try runProgram(
                make[0], Array(make.dropFirst()), environment: environment, mergingStderr: true
            ).statusAndOutput
            #expect(made == 0, "\(output)")
            var isFolder: ObjCBool = false
            #expect(
                FileManager.default.fileExists(atPath: root, isDirectory: &isFolder) && isFolder.boolValue, "\(root)")
            let initialized = try InboxProcess.run([Array("init".utf8)], environment: environment)
            #expect(initialized.lines == [root + "/default"], "\(initialized.stderr)")

            let arguments = serve.dropFirst().map {
                Array($0.replacingOccurrences(of: "/usr/local/bin/inbox", with: InboxProcess.binary).utf8)
            }
            let watcher = try InboxProcess.start(arguments, environment: environment, executable: serve[0])
            let delivered = try InboxProcess.run(["deliver", file].map { Array($0.utf8) }, environment: environment)
            #expect(delivered.status == 0, "\(delivered.stderr)")
            #expect(
                waitUntil { logRecords(root + "/default", event: "arrived").count == 1 }, "the watcher served \(root)")
            let program = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(watcher.pid)/exe")
            #expect(program == URL(fileURLWithPath: InboxProcess.binary).resolvingSymlinksInPath().path)
            #expect(watcher.terminate() == 0)
        }
    }

    /// A call outside the filter fails with EPERM: Landlock's would leave hooks unsandboxed, without a word; an
    /// LMTP service's, a delivery failed.
    @Test func everyServiceAllowsTheCallsItsProgramMakes() throws {
        let (system, user) = try Self.installedUnits()
        var cache: [String: Set<String>] = [:]
        for unit in (system + user).filter({ $0.hasSuffix(".service") }) {
            let filters = try Self.values("SystemCallFilter", in: unit)
            #expect(!filters.isEmpty, "\(unit) filters system calls")
            var allowed: Set<String> = []
            for name in filters.flatMap({ $0.split(separator: " ").map(String.init) }) {
                #expect(!name.hasPrefix("~"), "\(unit): an allow list only")
                allowed.formUnion(name.hasPrefix("@") ? try Self.systemCalls(in: name, cache: &cache) : [name])
            }
            let calls = unit.hasSuffix("inbox-lmtp.service") ? Self.callsLMTPMakes : Self.callsTheWatcherMakes
            let denied = calls.subtracting(allowed)
            #expect(denied.isEmpty, "\(unit) denies \(denied.sorted())")
        }
    }

    /// verify does not check the names in `Wants=` and `Also=` (a missing unit is no error), so they are checked
    /// here, and the watched path against the folder `inbox init` makes.
    @Test func thePathUnitWatchesTheInboxAndBringsItsTimer() throws {
        #expect(try Self.values("PathChanged", in: "inbox-drain@.path") == ["%f/Documents/Inbox"])
        #expect(try Self.values("DirectoryNotEmpty", in: "inbox-drain@.path").isEmpty, "it would loop on kept items")
        #expect(try Self.values("Wants", in: "inbox-drain@.path") == ["inbox-drain@%i.timer"])
        #expect(try Self.values("Also", in: "inbox-drain@.path") == ["inbox-drain@%i.timer"])
        #expect(try Self.values("PartOf", in: "inbox-drain@.timer") == ["inbox-drain@%i.path"])
        let (system, user) = try Self.installedUnits()
        for units in [system, user] {
            #expect(units.contains("inbox-drain@.path") && units.contains("inbox-drain@.timer"))
        }
        let folder = try Scratch()
        let container = try folder.initContainer()
        var isFolder: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/Inbox", isDirectory: &isFolder))
        #expect(isFolder.boolValue)
    }

    /// What the drain runs (`inbox-drain@.service`'s ExecStart, with `INBOX_CONTAINER` as the unit sets it)
    /// handles what waits and exits 0; while a lasting watcher holds the container it exits 75, which the unit
    /// counts as success.
    @Test func theDrainHandlesWhatWaitsAndStandsAsideForALastingWatcher() throws {
        let commands = try ["inbox-drain@.service", "user/inbox-drain@.service"].map { unit in
            #expect(try Self.values("SuccessExitStatus", in: unit) == ["75"], "\(unit)")
            #expect(try Self.values("Environment", in: unit) == ["INBOX_CONTAINER=%f"], "\(unit)")
            return try Self.values("ExecStart", in: unit)
        }
        #expect(commands[0] == commands[1])
        let command = try #require(commands[0].first).split(separator: " ").map(String.init)
        #expect(command.first == "/usr/local/bin/inbox")
        let arguments = Array(command.dropFirst())
        #expect(arguments.contains("--once"))

        let folder = try Scratch()
        let container = try folder.initContainer()
        let files = try (0..<3).map { try folder.file("waiting\($0).pdf", "%PDF-1.4 waiting \($0)") }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        let drain = try InboxProcess.run(
            arguments.map { Array($0.utf8) }, environment: ["INBOX_CONTAINER": container])
        #expect(drain.status == 0, "\(drain.stderr)")
        #expect(logRecords(container, event: "arrived").count == 3)

        let watcher = try WatchProcess(container)
        let busy = try InboxProcess.run(arguments.map { Array($0.utf8) }, environment: ["INBOX_CONTAINER": container])
        #expect(busy.status == 75, "\(busy.stderr)")
        #expect(try watcher.stop().status == 0)
    }

    /// The LMTP services keep the watcher's sandbox, setting for setting, but for what they write (the containers'
    /// folder), the home folder (the system one needs none) and the system calls (no hook to sandbox).
    @Test func theLMTPServicesKeepTheWatchersSandbox() throws {
        func settings(_ unit: String) throws -> [String: [String]] {
            var found: [String: [String]] = [:]
            for line in try Self.hardening(unit) where !line.hasPrefix("#") {
                guard let equals = line.firstIndex(of: "=") else { continue }
                found[String(line[..<equals]), default: []].append(String(line[line.index(after: equals)...]))
            }
            return found
        }
        let differ: Set<String> = ["ReadWritePaths", "ProtectHome", "SystemCallFilter"]
        for folder in ["", "user/"] {
            let watcher = try settings(folder + "inbox-watch@.service")
            let lmtp = try settings(folder + "inbox-lmtp.service")
            for (key, values) in watcher where !differ.contains(key) {
                #expect(lmtp[key] == values, "\(folder)inbox-lmtp.service: \(key)")
            }
            #expect(lmtp["SystemCallFilter"] == ["@system-service"], "\(folder)inbox-lmtp.service")
        }
        #expect(try Self.values("ProtectHome", in: "inbox-lmtp.service") == ["yes"])
        #expect(try Self.values("StateDirectory", in: "inbox-lmtp.service") == ["inbox"])
        #expect(try Self.values("ReadWritePaths", in: "user/inbox-lmtp.service") == ["-%h/.local/share/inbox"])
    }

    /// DESIGN §14: the system socket in Postfix's private/, Postfix's alone, handed to one service that runs as an
    /// account and serves the folder it writes; the user socket on loopback; both services take the socket from
    /// systemd (no --listen) and never accept a connection each.
    @Test func theLMTPSocketsAreWhereDesignSaysAndHandedToOneService() throws {
        #expect(try Self.values("ListenStream", in: "inbox-lmtp.socket") == ["/var/spool/postfix/private/inbox-lmtp"])
        #expect(try Self.values("SocketUser", in: "inbox-lmtp.socket") == ["postfix"])
        #expect(try Self.values("SocketMode", in: "inbox-lmtp.socket") == ["0600"])
        #expect(try Self.values("ListenStream", in: "user/inbox-lmtp.socket").allSatisfy { $0.hasPrefix("127.0.0.1:") })
        for socket in ["inbox-lmtp.socket", "user/inbox-lmtp.socket"] {
            #expect(try Self.values("Accept", in: socket) == ["no"], "\(socket)")
        }
        let user = try #require(try Self.values("User", in: "inbox-lmtp.service").first)
        #expect(user != "root" && user != "0")
        let system = try Self.values("ExecStart", in: "inbox-lmtp.service")
        #expect(system == ["/usr/local/bin/inbox lmtp --root /var/lib/inbox"])
        #expect(try Self.values("ExecStart", in: "user/inbox-lmtp.service") == ["/usr/local/bin/inbox lmtp"])
        for service in ["inbox-lmtp.service", "user/inbox-lmtp.service"] {
            #expect(try Self.values("Requires", in: service) == ["inbox-lmtp.socket"], "\(service)")
            #expect(try Self.values("Also", in: service) == ["inbox-lmtp.socket"], "\(service)")
        }
    }
}
