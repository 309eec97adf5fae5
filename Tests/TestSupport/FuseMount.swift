import Foundation

/// A real FUSE filesystem for tests (ARCHITECTURE.md, "Network and FUSE filesystems"): Debian's `bindfs` (or
/// `rclone`, or `sshfs` over an `SshServer` on loopback) mounts a backing folder at a mount point. What a test writes
/// through the mount point is this host's own writing; what it writes straight into the backing folder stands for
/// another host's (for sshfs and rclone's sftp backend, it is the server's side), and raises no inotify event on the
/// mount. Unmounted when released (then its server, if any, stopped).
public final class FuseMount: @unchecked Sendable {
    /// The folder that holds both `backing` and `mountPoint`, removed at the end.
    public let root: String
    /// Where the "other host" writes.
    public let backing: String
    /// The mounted filesystem, where inbox works.
    public let mountPoint: String
    /// The program that serves the mount.
    public let program: Program
    /// The server an `sshfs` or `rcloneSftp` mount reaches its backing folder through.
    public let server: SshServer?
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
        /// sshfs (mountinfo type `fuse.sshfs`) of `root@127.0.0.1:BACKING` through the mount's own `SshServer`.
        case sshfs
        /// `rclone mount` of the sftp backend (mountinfo type `fuse.rclone`) of the mount's own `SshServer`, with
        /// `--vfs-cache-mode writes`, as `rclone`.
        case rcloneSftp

        /// Its program's path.
        var executable: String {
            switch self {
            case .bindfs: "/usr/bin/bindfs"
            case .rclone, .rcloneSftp: "/usr/bin/rclone"
            case .sshfs: "/usr/bin/sshfs"
            }
        }

        /// Its type in the mount table (`fuse.sshfs`), which inbox names it by.
        public var mountType: String {
            switch self {
            case .bindfs: "fuse"
            case .rclone, .rcloneSftp: "fuse.rclone"
            case .sshfs: "fuse.sshfs"
            }
        }

        /// Whether it reaches its backing folder through an `SshServer`.
        var needsServer: Bool { self == .sshfs || self == .rcloneSftp }
    }

    /// Why `program` cannot be mounted here (its program, `/dev/fuse` or, for a server, root or OpenSSH missing),
    /// in one line; nil when it can. For a test to skip with.
    public static func unavailable(_ program: Program) -> String? {
        if program.needsServer, let reason = SshServer.unavailable { return reason }
        guard FileManager.default.isExecutableFile(atPath: program.executable) else {
            return "\(program.executable) is not installed (make deps installs it)"
        }
        guard access("/dev/fuse", R_OK | W_OK) == 0 else { return "/dev/fuse cannot be opened" }
        return nil
    }

    /// Mounts a fresh backing folder with `program` and its `options` (for bindfs, such as
    /// `attr_timeout=30,entry_timeout=30`, an NFS-like attribute cache). Throws, saying why, when the program or
    /// `/dev/fuse` is missing (`make deps` installs bindfs, rclone and sshfs), or, for `sshfs` and `rcloneSftp`, the
    /// server cannot be started.
    public init(program: Program = .bindfs, options: [String] = []) throws {
        self.program = program
        server = program.needsServer ? try SshServer() : nil
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
            let (status, output) = try runToEnd("/bin/fusermount", ["-u", mountPoint])
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
        let executable = program.executable
        if let unavailable = Self.unavailable(program) { throw FuseMountError(unavailable) }
        let arguments: [String]
        switch (program, server) {
        case (.bindfs, _):
            arguments = (options.isEmpty ? [] : ["-o", options.joined(separator: ",")]) + [backing, mountPoint]
        case (.rclone, _):
            // A plain local path is the remote; no configuration file; the cache inside `root`, removed with it.
            arguments = ["mount", backing, mountPoint] + rcloneOptions(options)
        case (.rcloneSftp, let server?):
            // The remote given whole on the command line (no configuration file); the host's key is not checked.
            let remote = ":sftp,host=127.0.0.1,port=\(server.port),user=root,key_file=\(server.clientKey):\(backing)"
            arguments = ["mount", remote, mountPoint] + rcloneOptions(options)
        case (.sshfs, let server?):
            // No ssh configuration of this host's and no known hosts: the throwaway key alone, never a question.
            let ssh = [
                "IdentityFile=\(server.clientKey)", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null",
                "BatchMode=yes",
            ]
            arguments =
                ["-F", "/dev/null", "-p", String(server.port), "-o", (ssh + options).joined(separator: ",")]
                + ["root@127.0.0.1:" + backing, mountPoint]
        case (.sshfs, nil), (.rcloneSftp, nil):
            throw FuseMountError("\(program) needs its server")
        }
        let (status, output) = try runToEnd(executable, arguments)
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

    /// `rclone mount`'s options after the remote and mount point: a daemon, no configuration file, the cache inside
    /// `root` (removed with it), and `--vfs-cache-mode writes`, without which a file opened for reading and writing
    /// cannot be read.
    private func rcloneOptions(_ options: [String]) -> [String] {
        ["--daemon", "--config", "/dev/null", "--cache-dir", root + "/cache", "--vfs-cache-mode", "writes"] + options
    }

    /// Whether `/proc/self/mountinfo` has a mount at `mountPoint` (its fifth field).
    private func isMounted() -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return table.split(separator: "\n").contains { $0.split(separator: " ").dropFirst(4).first == mountPoint[...] }
    }
}

/// Why a FUSE mount could not be made or let go.
public struct FuseMountError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
