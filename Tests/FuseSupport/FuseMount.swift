import Foundation

/// A real FUSE filesystem for tests (ARCHITECTURE.md, "Network and FUSE filesystems"): Debian's `bindfs` (or
/// `rclone`) mounts a backing folder at a mount point. What a test writes through the mount point is this host's own
/// writing; what it writes straight into the backing folder stands for another host's, and raises no inotify event
/// on the mount. Unmounted when released.
public final class FuseMount: @unchecked Sendable {
    /// The folder that holds both `backing` and `mountPoint`, removed at the end.
    public let root: String
    /// Where the "other host" writes.
    public let backing: String
    /// The mounted filesystem, where inbox works.
    public let mountPoint: String
    /// The program that serves the mount.
    public let program: Program
    private var mounted = false

    /// The FUSE filesystems a test can mount.
    public enum Program: Sendable {
        /// bindfs (mountinfo type `fuse`): refuses `renameat2`'s flags (EINVAL); `link` works.
        case bindfs
        /// `rclone mount` of a local folder (mountinfo type `fuse.rclone`), with `--vfs-cache-mode writes`, without
        /// which a file opened for reading and writing cannot be read: refuses `renameat2`'s flags (EINVAL), answers
        /// `link` and `symlink` with EIO, `O_TMPFILE` with EOPNOTSUPP, and a rename onto an empty folder with EEXIST;
        /// its `flock` is this host's alone.
        case rclone
    }

    /// Mounts a fresh backing folder with `program` and its `options` (for bindfs, such as
    /// `attr_timeout=30,entry_timeout=30`, an NFS-like attribute cache). Throws, saying why, when the program or
    /// `/dev/fuse` is missing (`make deps` installs bindfs and rclone).
    public init(program: Program = .bindfs, options: [String] = []) throws {
        self.program = program
        var template = Array("/tmp/inbox-fuse.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw FuseMountError("mkdtemp failed: errno \(errno)") }
        root = String(cString: made)
        backing = root + "/backing"
        mountPoint = root + "/mount"
        try FileManager.default.createDirectory(atPath: backing, withIntermediateDirectories: false)
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
        try mount(options: options)
    }

    /// Mounts the backing folder again with a new device number, as a network filesystem gets at every mount.
    public func remount(options: [String] = []) throws {
        let before = try device()
        try unmount()
        // The kernel gives a new mount the lowest free number, and other tests free numbers meanwhile: spacers hold
        // free numbers until the mount gets one other than the number it had.
        var spacers: [FuseMount] = []
        defer { for spacer in spacers { try? spacer.unmount() } }
        for _ in 0..<64 {
            spacers.append(try FuseMount())
            try mount(options: options)
            if try device() != before { return }
            try unmount()
        }
        throw FuseMountError("\(mountPoint) got device \(before) at each of 64 mounts")
    }

    /// The mount's device number.
    private func device() throws -> dev_t {
        var status = stat()
        guard stat(mountPoint, &status) == 0 else { throw FuseMountError("stat \(mountPoint): errno \(errno)") }
        return status.st_dev
    }

    /// Unmounts, waiting while the mount is busy (a process that just exited may still hold a file on it).
    public func unmount() throws {
        guard mounted else { return }
        let deadline = Date().addingTimeInterval(30)
        while true {
            let (status, output) = try Self.run("/bin/fusermount", ["-u", mountPoint])
            if status == 0 { break }
            guard Date() < deadline else { throw FuseMountError("fusermount -u \(mountPoint): \(output)") }
            usleep(50_000)
        }
        mounted = false
    }

    deinit {
        try? unmount()
        if !mounted { try? FileManager.default.removeItem(atPath: root) }
    }

    private func mount(options: [String]) throws {
        let executable = program == .bindfs ? "/usr/bin/bindfs" : "/usr/bin/rclone"
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw FuseMountError("\(executable) is not installed (make deps installs it)")
        }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { throw FuseMountError("/dev/fuse cannot be opened") }
        let arguments: [String]
        switch program {
        case .bindfs:
            arguments = (options.isEmpty ? [] : ["-o", options.joined(separator: ",")]) + [backing, mountPoint]
        case .rclone:
            // A plain local path is the remote; no configuration file; the cache inside `root`, removed with it.
            arguments =
                ["mount", backing, mountPoint, "--daemon", "--config", "/dev/null", "--cache-dir", root + "/cache"]
                + ["--vfs-cache-mode", "writes"] + options
        }
        let (status, output) = try Self.run(executable, arguments)
        guard status == 0 else { throw FuseMountError("\(executable) \(arguments.joined(separator: " ")): \(output)") }
        // rclone's daemon may still be mounting when its parent exits: the mount table tells.
        let deadline = Date().addingTimeInterval(30)
        while !isMounted() {
            guard Date() < deadline else { throw FuseMountError("\(mountPoint) never appeared in the mount table") }
            usleep(20_000)
        }
        mounted = true
        var mountPointStatus = stat()
        var rootStatus = stat()
        guard stat(mountPoint, &mountPointStatus) == 0, stat(root, &rootStatus) == 0,
            mountPointStatus.st_dev != rootStatus.st_dev
        else { throw FuseMountError("\(executable) returned but \(mountPoint) is not a mount point") }
    }

    /// Whether `/proc/self/mountinfo` has a mount at `mountPoint` (its fifth field).
    private func isMounted() -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return table.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first == mountPoint[...] }
    }

    /// Runs `executable` to its end (posix_spawn, then waitpid), its output gathered in a file: a pipe would stay
    /// open in bindfs's (or rclone's) daemon, never ending.
    private static func run(_ executable: String, _ arguments: [String]) throws -> (Int32, String) {
        var template = Array("/tmp/inbox-fuse-output.XXXXXX".utf8CString)
        let output = mkstemp(&template)
        guard output >= 0 else { throw FuseMountError("mkstemp failed: errno \(errno)") }
        let outputPath = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer {
            close(output)
            unlink(outputPath)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, output, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw FuseMountError("cannot run \(executable): errno \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw FuseMountError("waitpid failed: errno \(errno)") }
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        let exited = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + status & 0x7F
        return (exited, text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// Why a FUSE mount could not be made or let go.
public struct FuseMountError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
