// swift-format-ignore-file: AlwaysUseLowerCamelCase

import CLinux
import Glibc

// One Swift function per system call, for this package only. Each reads errno right after the call and
// throws it as `Errno`; all but `close` retry on EINTR. Each first asks `plannedFault`
// (SyscallFaults.swift) under a stable name, so tests can make any call fail.

/// The current folder, as a sentinel for the `*at` calls.
package let currentDirectory: CInt = AT_FDCWD

/// Calls `body` with `path` as a C string, keeping `body`'s typed error. Inlined, so that the copy is specialized for
/// the wrapper's result even where the wrapper is not for the path's type.
@inline(__always)
func withCPath<R>(_ path: some CStringConvertible, _ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R
{
    try path.pathBytes.withCPath(body)
}

@inline(never)
package func system_openat(
    _ directory: CInt, _ path: some CStringConvertible, _ flags: OpenFlags, mode: mode_t = 0
) throws(Errno) -> CInt {
    try withCPath(path) { path throws(Errno) in
        try valueOrErrno("openat") { openat(directory, path, flags.rawValue | O_CLOEXEC, mode) }
    }
}

/// Never retried: after EINTR Linux has already released the descriptor, as it does for a planned fault.
@inline(never)
package func system_close(_ fd: CInt) throws(Errno) {
    let fault = plannedFault("close")
    if close(fd) == -1 { throw Errno.current }
    if let fault { throw fault }
}

@inline(never)
package func system_read(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
    try valueOrErrno("read") { read(fd, buffer.baseAddress, buffer.count) }
}

@inline(never)
package func system_pread(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno)
    -> Int
{
    try valueOrErrno("pread") { pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
}

@inline(never)
package func system_pwrite(_ fd: CInt, _ bytes: [UInt8], at offset: Int64) throws(Errno) -> Int {
    try valueOrErrno("pwrite") { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) } }
}

@inline(never)
package func system_write(_ fd: CInt, _ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int {
    try valueOrErrno("write") { write(fd, buffer.baseAddress, buffer.count) }
}

@inline(never)
package func system_fsync(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno("fsync") { fsync(fd) }
}

@inline(never)
package func system_fstat(_ fd: CInt) throws(Errno) -> stat {
    var status = stat()
    _ = try valueOrErrno("fstat") { fstat(fd, &status) }
    return status
}

/// `fstatfs`: the type of the filesystem that holds `fd` (its `f_type`, a magic number such as FUSE's).
@inline(never)
package func system_fstatfsType(_ fd: CInt) throws(Errno) -> Int64 {
    var type: Int64 = 0
    _ = try valueOrErrno("fstatfs") { inbox_filesystem_type(fd, &type) }
    return type
}

/// `fstatat(AT_SYMLINK_NOFOLLOW)`: a symbolic link is described, never followed.
@inline(never)
package func system_lstatat(_ directory: CInt, _ path: some CStringConvertible) throws(Errno) -> stat {
    var status = stat()
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno("lstatat") { fstatat(directory, path, &status, AT_SYMLINK_NOFOLLOW) }
    }
    return status
}

@inline(never)
package func system_renameat2(
    _ fromDirectory: CInt, _ from: some CStringConvertible, _ toDirectory: CInt, _ to: some CStringConvertible,
    _ flags: RenameFlags
) throws(Errno) {
    try withCPath(from) { from throws(Errno) in
        try withCPath(to) { to throws(Errno) in
            _ = try valueOrErrno("renameat2") { inbox_renameat2(fromDirectory, from, toDirectory, to, flags.rawValue) }
        }
    }
}

@inline(never)
package func system_unlinkat(_ directory: CInt, _ path: some CStringConvertible, removeDirectory: Bool = false)
    throws(Errno)
{
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno("unlinkat") { unlinkat(directory, path, removeDirectory ? AT_REMOVEDIR : 0) }
    }
}

@inline(never)
package func system_mkdirat(_ directory: CInt, _ path: some CStringConvertible, mode: mode_t) throws(Errno) {
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno("mkdirat") { mkdirat(directory, path, mode) }
    }
}

/// `symlinkat(target, directory, path)`: makes a symbolic link holding `target`, which is not looked at.
@inline(never)
package func system_symlinkat(_ target: [UInt8], _ directory: CInt, _ path: some CStringConvertible) throws(Errno) {
    try withCPath(target) { target throws(Errno) in
        try withCPath(path) { path throws(Errno) in
            _ = try valueOrErrno("symlinkat") { symlinkat(target, directory, path) }
        }
    }
}

/// `readlinkat`: the target a symbolic link holds, exact to the byte.
@inline(never)
package func system_readlinkat(_ directory: CInt, _ path: some CStringConvertible) throws(Errno) -> [UInt8] {
    let capacity = Int(PATH_MAX) + 1
    let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: capacity)
    defer { buffer.deallocate() }
    let count = try withCPath(path) { path throws(Errno) in
        try valueOrErrno("readlinkat") { readlinkat(directory, path, buffer, capacity) }
    }
    guard count < capacity else { throw Errno.nameTooLong }
    return UnsafeBufferPointer(start: buffer, count: count).map { UInt8(bitPattern: $0) }
}

/// `syncfs`: writes out everything cached for the filesystem that holds `fd`, in one call.
@inline(never)
package func system_syncfs(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno("syncfs") { inbox_syncfs(fd) }
}

/// `sync_file_range(SYNC_FILE_RANGE_WRITE)` over the whole file: starts its writeback, waits for nothing, makes
/// nothing durable. An `fsync` later then finds the writing done or under way.
@inline(never)
package func system_startWriteback(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno("sync_file_range") { inbox_start_writeback(fd) }
}

/// `linkat` without flags: a second name for the file (a symbolic link itself, never its target).
@inline(never)
package func system_linkat(
    _ fromDirectory: CInt, _ from: some CStringConvertible, _ toDirectory: CInt, _ to: some CStringConvertible
) throws(Errno) {
    try withCPath(from) { from throws(Errno) in
        try withCPath(to) { to throws(Errno) in
            _ = try valueOrErrno("linkat") { linkat(fromDirectory, from, toDirectory, to, 0) }
        }
    }
}

/// `linkat(fd, "", directory, path, AT_EMPTY_PATH)`: gives a name to an open file, such as an `O_TMPFILE` one.
@inline(never)
package func system_linkOpenFile(_ fd: CInt, _ directory: CInt, _ path: some CStringConvertible) throws(Errno) {
    try withCPath(path) { path throws(Errno) in
        do throws(Errno) {
            _ = try valueOrErrno("linkat") { linkat(fd, "", directory, path, inbox_AT_EMPTY_PATH) }
        } catch .noSuchFile {
            // Before Linux 6.10 only CAP_DAC_READ_SEARCH may link by `AT_EMPTY_PATH` (ENOENT otherwise): an account
            // links the file through its /proc/self/fd name, as open(2) shows for O_TMPFILE.
            _ = try valueOrErrno("linkat") {
                linkat(AT_FDCWD, "/proc/self/fd/\(fd)", directory, path, AT_SYMLINK_FOLLOW)
            }
        }
    }
}

@inline(never)
package func system_fchmod(_ fd: CInt, _ mode: mode_t) throws(Errno) {
    _ = try valueOrErrno("fchmod") { fchmod(fd, mode) }
}

/// `fchmodat` without flags (Linux has no `AT_SYMLINK_NOFOLLOW` for it): for a folder the caller made, which a mode
/// of 0 keeps it from opening.
@inline(never)
package func system_fchmodat(_ directory: CInt, _ path: some CStringConvertible, _ mode: mode_t) throws(Errno) {
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno("fchmodat") { fchmodat(directory, path, mode, 0) }
    }
}

@inline(never)
package func system_ftruncate(_ fd: CInt, _ length: Int64) throws(Errno) {
    _ = try valueOrErrno("ftruncate") { ftruncate(fd, off_t(length)) }
}

@inline(never)
package func system_flock(_ fd: CInt, _ operation: CInt) throws(Errno) {
    _ = try valueOrErrno("flock") { flock(fd, operation) }
}

/// An exclusive `flock` waited for in the kernel's queue, as a blocking one is, for at most `milliseconds`; past
/// them, `ETIMEDOUT` (`inbox_flock_within`).
@inline(never)
package func system_flock(_ fd: CInt, exclusiveWithin milliseconds: Int) throws(Errno) {
    _ = try valueOrErrno("flock") { inbox_flock_within(fd, milliseconds) }
}

@inline(never)
package func system_copy_file_range(from input: CInt, to output: CInt, length: Int) throws(Errno) -> Int {
    try valueOrErrno("copy_file_range") { inbox_copy_file_range(input, output, length) }
}

@inline(never)
package func system_futimens(_ fd: CInt, accessed: timespec, modified: timespec) throws(Errno) {
    let times = [accessed, modified]
    _ = try valueOrErrno("futimens") { futimens(fd, times) }
}

/// `getdents64`: the next entries of the open folder `fd`, as `struct linux_dirent64` records, into `buffer`; 0 at the
/// folder's end. Without glibc's folder stream, whose `fdopendir` costs an `fstat` and `fcntl`s each time.
@inline(never)
package func system_getdents64(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
    try valueOrErrno("getdents64") { inbox_getdents64(fd, buffer.baseAddress, buffer.count) }
}

@inline(never)
package func system_realpath(_ path: some CStringConvertible) throws(Errno) -> [UInt8] {
    if let fault = plannedFault("realpath") { throw fault }
    return try withCPath(path) { path throws(Errno) in
        guard let resolved = realpath(path, nil) else { throw Errno.current }
        defer { free(resolved) }
        return Array(UnsafeBufferPointer(start: resolved, count: strlen(resolved))).map { UInt8(bitPattern: $0) }
    }
}

@inline(never)
package func system_getcwd() throws(Errno) -> [UInt8] {
    if let fault = plannedFault("getcwd") { throw fault }
    guard let path = getcwd(nil, 0) else { throw Errno.current }
    defer { free(path) }
    return Array(UnsafeBufferPointer(start: path, count: strlen(path))).map { UInt8(bitPattern: $0) }
}

@inline(never)
package func system_dup(_ fd: CInt) throws(Errno) -> CInt {
    try valueOrErrno("fcntl_dupfd") { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
}

@inline(never)
package func system_socket(_ domain: CInt, _ type: CInt) throws(Errno) -> CInt {
    try valueOrErrno("socket") { socket(domain, type | CInt(SOCK_CLOEXEC.rawValue), 0) }
}

@inline(never)
package func system_sendto(
    _ fd: CInt, _ bytes: UnsafeRawBufferPointer, _ address: UnsafePointer<sockaddr>, _ length: socklen_t
)
    throws(Errno) -> Int
{
    try valueOrErrno("sendto") { sendto(fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL), address, length) }
}

@inline(never)
package func system_fsetxattr(_ fd: CInt, _ name: String, _ value: [UInt8]) throws(Errno) {
    _ = try valueOrErrno("fsetxattr") {
        value.withUnsafeBytes { inbox_fsetxattr(fd, name, $0.baseAddress, $0.count, 0) }
    }
}

/// The value of an extended attribute, or nil when the file has none of that name.
@inline(never)
package func system_fgetxattr(_ fd: CInt, _ name: String, maxSize: Int = 256) throws(Errno) -> [UInt8]? {
    var value = [UInt8](repeating: 0, count: maxSize)
    do {
        let size = try valueOrErrno("fgetxattr") {
            value.withUnsafeMutableBytes { inbox_fgetxattr(fd, name, $0.baseAddress, $0.count) }
        }
        return Array(value[..<size])
    } catch {
        if error == .noData { return nil }
        throw error
    }
}

/// Removes an extended attribute; ENODATA when the file has none of that name.
@inline(never)
package func system_fremovexattr(_ fd: CInt, _ name: String) throws(Errno) {
    _ = try valueOrErrno("fremovexattr") { inbox_fremovexattr(fd, name) }
}

/// `unshare(CLONE_FS)`: from now on the calling thread alone has its working folder, root and umask.
@inline(never)
package func system_unshare_fs() throws(Errno) {
    _ = try valueOrErrno("unshare") { inbox_unshare_fs() }
}

/// `fchdir`: with the file-system context shared (no `system_unshare_fs`), it moves every thread.
@inline(never)
package func system_fchdir(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno("fchdir") { fchdir(fd) }
}

/// Takes a read lease (`F_SETLEASE F_RDLCK`) on a file open read-only: true when taken, false when someone has
/// it open for writing, nil where leases are unavailable (another owner without CAP_LEASE, or a filesystem
/// without them). While it is held, an open for writing breaks it (and waits until it is released). The
/// kernel signals the break with SIGIO, which the process must ignore.
@inline(never)
package func system_takeReadLease(_ fd: CInt) -> Bool? {
    do {
        _ = try valueOrErrno("fcntl_setlease") { inbox_take_read_lease(fd) }
        return true
    } catch {
        return error == .wouldBlock ? false : nil
    }
}

/// Whether the read lease taken on `fd` still holds (`F_GETLEASE`): false once an open for writing has begun to
/// break it.
@inline(never)
package func system_readLeaseHeld(_ fd: CInt) throws(Errno) -> Bool {
    try valueOrErrno("fcntl_getlease") { inbox_read_lease_held(fd) } == 1
}

/// Drops the lease on `fd` (`F_SETLEASE F_UNLCK`), letting an open for writing that waits for it go on.
@inline(never)
package func system_releaseLease(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno("fcntl_setlease") { inbox_release_lease(fd) }
}

/// `fcntl(F_DUPFD_CLOEXEC, minimum)`: a close-on-exec copy numbered `minimum` or above.
@inline(never)
package func system_dup(_ fd: CInt, atLeast minimum: CInt) throws(Errno) -> CInt {
    try valueOrErrno("fcntl_dupfd") { fcntl(fd, F_DUPFD_CLOEXEC, minimum) }
}

/// `dup2`: `target` made a copy of `fd` (closed first if open).
@inline(never)
package func system_dup2(_ fd: CInt, _ target: CInt) throws(Errno) {
    _ = try valueOrErrno("dup2") { dup2(fd, target) }
}

/// `fcntl(F_GETFL)`: the access mode and status flags of an open file.
@inline(never)
package func system_fcntl_getfl(_ fd: CInt) throws(Errno) -> CInt {
    try valueOrErrno("fcntl_getfl") { fcntl(fd, F_GETFL) }
}

/// `pipe2(O_CLOEXEC)`.
@inline(never)
package func system_pipe() throws(Errno) -> (read: CInt, write: CInt) {
    var fds: [CInt] = [-1, -1]
    _ = try valueOrErrno("pipe") { inbox_pipe2(&fds, O_CLOEXEC) }
    return (fds[0], fds[1])
}

/// Waits up to `timeout` milliseconds (-1: for ever) for the descriptors' events; how many have some.
@inline(never)
package func system_poll(_ fds: inout [pollfd], timeout: CInt) throws(Errno) -> Int {
    let count = nfds_t(fds.count)
    return Int(try valueOrErrno("poll") { poll(&fds, count, timeout) })
}

/// `socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)`.
/// ioctl(TIOCGWINSZ): the size of the terminal `fd` is (ENOTTY when it is none).
@inline(never)
package func system_terminalSize(_ fd: CInt) throws(Errno) -> winsize {
    var size = winsize()
    _ = try valueOrErrno("ioctl") { ioctl(fd, UInt(TIOCGWINSZ), &size) }
    return size
}

@inline(never)
package func system_socketpair() throws(Errno) -> (CInt, CInt) {
    var fds: [CInt] = [-1, -1]
    _ = try valueOrErrno("socketpair") {
        socketpair(AF_UNIX, CInt(SOCK_STREAM.rawValue) | CInt(SOCK_CLOEXEC.rawValue), 0, &fds)
    }
    return (fds[0], fds[1])
}

/// `shutdown`: `SHUT_WR` sends the peer end of file, whoever else holds the descriptor.
@inline(never)
package func system_shutdown(_ fd: CInt, _ how: CInt) throws(Errno) {
    _ = try valueOrErrno("shutdown") { shutdown(fd, how) }
}

/// `inbox_spawn_supervised` (CLinux.h): forks the hook supervisor, which starts `path` with the three streams
/// and keeps `control`; returns the supervisor's pid.
@inline(never)
package func system_spawnSupervised(
    _ path: UnsafePointer<CChar>, _ argv: UnsafePointer<UnsafeMutablePointer<CChar>?>,
    _ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>, stdin: CInt, stdout: CInt, stderr: CInt, control: CInt
) throws(Errno) -> pid_t {
    try valueOrErrno("spawn_supervised") { inbox_spawn_supervised(path, argv, envp, stdin, stdout, stderr, control) }
}

/// `waitpid(pid, &status, 0)`: reaps the child and returns its raw wait status.
@inline(never)
package func system_waitpid(_ pid: pid_t) throws(Errno) -> CInt {
    var status: CInt = 0
    _ = try valueOrErrno("waitpid") { waitpid(pid, &status, 0) }
    return status
}

/// `pthread_create`, with default attributes when `attributes` is nil; it returns its error rather than setting errno.
/// Retried on EINTR like every call of this layer but `close` (POSIX says it never returns it; a test
/// may inject it).
@inline(never)
package func system_pthread_create(
    _ start: @convention(c) (UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer?,
    _ argument: UnsafeMutableRawPointer?,
    attributes: UnsafePointer<pthread_attr_t>? = nil
) throws(Errno) -> pthread_t {
    while true {
        if let fault = plannedFault("pthread_create") {
            if fault == .interrupted { continue }
            throw fault
        }
        var thread = pthread_t()
        let result = pthread_create(&thread, attributes, start, argument)
        if result == 0 { return thread }
        if result == EINTR { continue }
        throw Errno(rawValue: result)
    }
}

/// `pthread_join`, discarding the thread's result; fails only for a thread that cannot be joined.
@inline(never)
package func system_pthread_join(_ thread: pthread_t) throws(Errno) {
    if let fault = plannedFault("pthread_join") { throw fault }
    let result = pthread_join(thread, nil)
    guard result == 0 else { throw Errno(rawValue: result) }
}

/// `prctl(PR_SET_NO_NEW_PRIVS, 1)`, for the calling thread: required before Landlock or seccomp without
/// CAP_SYS_ADMIN, and kept by everything it starts (set-user-ID bits stop working).
@inline(never)
package func system_prctl_set_no_new_privs() throws(Errno) {
    _ = try valueOrErrno("prctl") { inbox_set_no_new_privs() }
}

/// `setrlimit(RLIMIT_NOFILE)`: the soft limit raised to the hard one; hooks started after get the soft one back.
@inline(never)
package func system_raiseOpenFileLimit() throws(Errno) {
    _ = try valueOrErrno("setrlimit") { inbox_raise_open_file_limit() }
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the kernel's Landlock ABI version.
@inline(never)
package func system_landlock_abi_version() throws(Errno) -> CInt {
    try valueOrErrno("landlock_create_ruleset") { inbox_landlock_abi_version() }
}

/// `landlock_create_ruleset` handling the file-system rights `handledAccess` (`LANDLOCK_ACCESS_FS_*`).
@inline(never)
package func system_landlock_create_ruleset(handledAccess: UInt64) throws(Errno) -> CInt {
    try valueOrErrno("landlock_create_ruleset") { inbox_landlock_create_ruleset(handledAccess) }
}

/// `landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH)`: allows `access` beneath the file or folder `parent`.
@inline(never)
package func system_landlock_add_rule(_ ruleset: CInt, beneath parent: CInt, access: UInt64) throws(Errno) {
    _ = try valueOrErrno("landlock_add_rule") { inbox_landlock_add_path_rule(ruleset, parent, access) }
}

/// `landlock_restrict_self`: confines the calling thread only (no TSYNC), and what it starts from now on.
@inline(never)
package func system_landlock_restrict_self(_ ruleset: CInt) throws(Errno) {
    _ = try valueOrErrno("landlock_restrict_self") { inbox_landlock_restrict_self(ruleset) }
}

/// `seccomp(SECCOMP_GET_ACTION_AVAIL, SECCOMP_RET_ERRNO)`: succeeds where seccomp filters work.
@inline(never)
package func system_seccomp_filter_available() throws(Errno) {
    _ = try valueOrErrno("seccomp") { inbox_seccomp_filter_available() }
}

/// `seccomp(SECCOMP_SET_MODE_FILTER)` with the shim's filter, on the calling thread only: chmod, chown,
/// utimes, xattr changes and inode-flag ioctls fail with EPERM from then on.
@inline(never)
package func system_seccomp_deny_metadata_changes() throws(Errno) {
    _ = try valueOrErrno("seccomp") { inbox_seccomp_deny_metadata_changes() }
}

/// `statx` with `AT_SYMLINK_NOFOLLOW` (a link is described, never followed), asking for the basic fields and the
/// birth time; an empty `path` describes `directory` itself (`AT_EMPTY_PATH`). `fresh`: `AT_STATX_FORCE_SYNC`, so
/// that a network or FUSE client asks the server rather than its attribute cache.
@inline(never)
package func system_statx(_ directory: CInt, _ path: some CStringConvertible, fresh: Bool = false) throws(Errno)
    -> inbox_file_status
{
    var status = inbox_file_status()
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno("statx") { inbox_statx(directory, path, fresh ? 1 : 0, &status) }
    }
    return status
}

/// `statx` with `AT_STATX_FORCE_SYNC`, its answer unused: the client of a FUSE or network filesystem fetches the
/// file's attributes afresh and caches them for every process of this host.
@inline(never)
package func system_refreshAttributes(_ directory: CInt, _ path: some CStringConvertible) throws(Errno) {
    _ = try system_statx(directory, path, fresh: true)
}
