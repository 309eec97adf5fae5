// swift-format-ignore-file: AlwaysUseLowerCamelCase

import CLinux
import Glibc

// One Swift function per system call. Each reads errno right after the call and throws it
// as `Errno`; all but `close` retry on EINTR.

/// The current folder, as a sentinel for the `*at` calls.
public let currentDirectory: CInt = AT_FDCWD

/// Calls `body` with `path` as a C string, keeping `body`'s typed error.
func withCPath<R>(_ path: some CStringConvertible, _ body: (UnsafePointer<CChar>) throws(Errno) -> R) throws(Errno) -> R
{
    try path.withCString { path in Result(catching: { () throws(Errno) in try body(path) }) }.get()
}

@inline(never)
public func system_openat(
    _ directory: CInt, _ path: some CStringConvertible, _ flags: OpenFlags, mode: mode_t = 0
) throws(Errno) -> CInt {
    try withCPath(path) { path throws(Errno) in
        try valueOrErrno { openat(directory, path, flags.rawValue | O_CLOEXEC, mode) }
    }
}

/// Never retried: after EINTR Linux has already released the descriptor.
@inline(never)
public func system_close(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno(retryOnInterrupt: false) { close(fd) }
}

@inline(never)
public func system_read(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
    try valueOrErrno { read(fd, buffer.baseAddress, buffer.count) }
}

@inline(never)
public func system_pread(_ fd: CInt, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(Errno)
    -> Int
{
    try valueOrErrno { pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
}

@inline(never)
public func system_pwrite(_ fd: CInt, _ bytes: [UInt8], at offset: Int64) throws(Errno) -> Int {
    try valueOrErrno { bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) } }
}

@inline(never)
public func system_write(_ fd: CInt, _ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int {
    try valueOrErrno { write(fd, buffer.baseAddress, buffer.count) }
}

@inline(never)
public func system_fsync(_ fd: CInt) throws(Errno) {
    _ = try valueOrErrno { fsync(fd) }
}

@inline(never)
public func system_fstat(_ fd: CInt) throws(Errno) -> stat {
    var status = stat()
    _ = try valueOrErrno { fstat(fd, &status) }
    return status
}

/// `fstatat(AT_SYMLINK_NOFOLLOW)`: a symbolic link is described, never followed.
@inline(never)
public func system_lstatat(_ directory: CInt, _ path: some CStringConvertible) throws(Errno) -> stat {
    var status = stat()
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno { fstatat(directory, path, &status, AT_SYMLINK_NOFOLLOW) }
    }
    return status
}

@inline(never)
public func system_renameat2(
    _ fromDirectory: CInt, _ from: some CStringConvertible, _ toDirectory: CInt, _ to: some CStringConvertible,
    _ flags: RenameFlags
) throws(Errno) {
    try withCPath(from) { from throws(Errno) in
        try withCPath(to) { to throws(Errno) in
            _ = try valueOrErrno { inbox_renameat2(fromDirectory, from, toDirectory, to, flags.rawValue) }
        }
    }
}

@inline(never)
public func system_unlinkat(_ directory: CInt, _ path: some CStringConvertible, removeDirectory: Bool = false)
    throws(Errno)
{
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno { unlinkat(directory, path, removeDirectory ? AT_REMOVEDIR : 0) }
    }
}

@inline(never)
public func system_mkdirat(_ directory: CInt, _ path: some CStringConvertible, mode: mode_t) throws(Errno) {
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno { mkdirat(directory, path, mode) }
    }
}

/// `linkat(fd, "", directory, path, AT_EMPTY_PATH)`: gives a name to an open file, such as an `O_TMPFILE` one.
@inline(never)
public func system_linkOpenFile(_ fd: CInt, _ directory: CInt, _ path: some CStringConvertible) throws(Errno) {
    try withCPath(path) { path throws(Errno) in
        _ = try valueOrErrno { linkat(fd, "", directory, path, inbox_AT_EMPTY_PATH) }
    }
}

@inline(never)
public func system_fchmod(_ fd: CInt, _ mode: mode_t) throws(Errno) {
    _ = try valueOrErrno { fchmod(fd, mode) }
}

@inline(never)
public func system_ftruncate(_ fd: CInt, _ length: Int64) throws(Errno) {
    _ = try valueOrErrno { ftruncate(fd, off_t(length)) }
}

@inline(never)
public func system_flock(_ fd: CInt, _ operation: CInt) throws(Errno) {
    _ = try valueOrErrno { flock(fd, operation) }
}

@inline(never)
public func system_copy_file_range(from input: CInt, to output: CInt, length: Int) throws(Errno) -> Int {
    try valueOrErrno { inbox_copy_file_range(input, output, length) }
}

@inline(never)
public func system_futimens(_ fd: CInt, accessed: timespec, modified: timespec) throws(Errno) {
    let times = [accessed, modified]
    _ = try valueOrErrno { futimens(fd, times) }
}

@inline(never)
public func system_fdopendir(_ fd: CInt) throws(Errno) -> OpaquePointer {
    guard let stream = fdopendir(fd) else { throw Errno.current }
    return stream
}

/// The next entry of a folder stream, or nil at its end.
@inline(never)
public func system_readdir(_ stream: OpaquePointer) throws(Errno) -> UnsafeMutablePointer<dirent>? {
    errno = 0
    if let entry = readdir(stream) { return entry }
    if errno != 0 { throw Errno.current }
    return nil
}

@inline(never)
public func system_closedir(_ stream: OpaquePointer) {
    closedir(stream)
}

@inline(never)
public func system_realpath(_ path: some CStringConvertible) throws(Errno) -> [UInt8] {
    try withCPath(path) { path throws(Errno) in
        guard let resolved = realpath(path, nil) else { throw Errno.current }
        defer { free(resolved) }
        return Array(UnsafeBufferPointer(start: resolved, count: strlen(resolved))).map { UInt8(bitPattern: $0) }
    }
}

@inline(never)
public func system_getcwd() throws(Errno) -> [UInt8] {
    guard let path = getcwd(nil, 0) else { throw Errno.current }
    defer { free(path) }
    return Array(UnsafeBufferPointer(start: path, count: strlen(path))).map { UInt8(bitPattern: $0) }
}

@inline(never)
public func system_dup(_ fd: CInt) throws(Errno) -> CInt {
    try valueOrErrno { fcntl(fd, F_DUPFD_CLOEXEC, 0) }
}

@inline(never)
public func system_socket(_ domain: CInt, _ type: CInt) throws(Errno) -> CInt {
    try valueOrErrno { socket(domain, type | CInt(SOCK_CLOEXEC.rawValue), 0) }
}

@inline(never)
public func system_sendto(
    _ fd: CInt, _ bytes: UnsafeRawBufferPointer, _ address: UnsafePointer<sockaddr>, _ length: socklen_t
)
    throws(Errno) -> Int
{
    try valueOrErrno { sendto(fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL), address, length) }
}

@inline(never)
public func system_fsetxattr(_ fd: CInt, _ name: String, _ value: [UInt8]) throws(Errno) {
    _ = try valueOrErrno { value.withUnsafeBytes { inbox_fsetxattr(fd, name, $0.baseAddress, $0.count, 0) } }
}

/// The value of an extended attribute, or nil when the file has none of that name.
@inline(never)
public func system_fgetxattr(_ fd: CInt, _ name: String, maxSize: Int = 256) throws(Errno) -> [UInt8]? {
    var value = [UInt8](repeating: 0, count: maxSize)
    do {
        let size = try valueOrErrno {
            value.withUnsafeMutableBytes { inbox_fgetxattr(fd, name, $0.baseAddress, $0.count) }
        }
        return Array(value[..<size])
    } catch {
        if error == .noData { return nil }
        throw error
    }
}

/// Whether anyone has the file open for writing, by taking and dropping a read lease (`F_SETLEASE`).
/// Nil when leases are unavailable here (another owner without CAP_LEASE, or a filesystem without them).
@inline(never)
public func system_isOpenForWriting(_ fd: CInt) -> Bool? {
    do {
        _ = try valueOrErrno { inbox_probe_read_lease(fd) }
        return false
    } catch {
        return error == .wouldBlock ? true : nil
    }
}
