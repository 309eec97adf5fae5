import CLinux
import Foundation
import Glibc

/// Starts `executable ARGS…` (posix_spawn) with standard input from /dev/null and standard output and error into
/// `output`, an open file: a pipe would stay open in a daemon (bindfs, sshfs, sshd), never ending. The child gets
/// nothing else this process holds open, so a daemon never keeps another test's pipe open. Returns its pid.
public func spawn(_ executable: String, _ arguments: [String], output: CInt) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, output, 1)
    posix_spawn_file_actions_adddup2(&actions, output, 2)
    inbox_posix_spawn_file_actions_addclosefrom_np(&actions, 3)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for argument in argv { free(argument) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
    guard spawned == 0 else { throw FuseMountError("cannot run \(executable): errno \(spawned)") }
    return pid
}

/// The exit status of `pid` once it has ended (128 + the signal for one killed), or nil while it runs when `wait`
/// is false.
func exitStatus(of pid: pid_t, wait: Bool = true) throws -> Int32? {
    var status: Int32 = 0
    while true {
        let result = waitpid(pid, &status, wait ? 0 : WNOHANG)
        if result == pid { break }
        if result == 0 { return nil }
        guard errno == EINTR else { throw FuseMountError("waitpid failed: errno \(errno)") }
    }
    return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + status & 0x7F
}

/// A file made with mkstemp from `template` (`/tmp/name.XXXXXX`), open, and its path.
func temporaryFile(_ template: String) throws -> (fd: CInt, path: String) {
    var bytes = Array(template.utf8CString)
    let fd = mkstemp(&bytes)
    guard fd >= 0 else { throw FuseMountError("mkstemp failed: errno \(errno)") }
    return (fd, String(decoding: bytes.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self))
}

/// Runs `executable ARGS…` to its end: its exit status and its output (standard output and error together), trimmed.
func runToEnd(_ executable: String, _ arguments: [String]) throws -> (Int32, String) {
    let (output, outputPath) = try temporaryFile("/tmp/inbox-fuse-output.XXXXXX")
    defer {
        close(output)
        unlink(outputPath)
    }
    let pid = try spawn(executable, arguments, output: output)
    let status = try exitStatus(of: pid) ?? -1
    let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    return (status, text.trimmingCharacters(in: .whitespacesAndNewlines))
}
