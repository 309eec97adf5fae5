import Glibc

/// An error number reported by a system call.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    /// The C `errno` value.
    public let rawValue: CInt

    /// The error of a C `errno` value.
    public init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// The calling thread's `errno`, read right after a failed call.
    static var current: Errno { Errno(rawValue: errno) }

    /// The system's text for the error (`strerror`), such as "No such file or directory".
    public var description: String { String(cString: strerror(rawValue)) }

    /// `EPERM`
    public static let notPermitted = Errno(rawValue: EPERM)
    /// `ENOENT`
    public static let noSuchFile = Errno(rawValue: ENOENT)
    /// `EINTR`
    public static let interrupted = Errno(rawValue: EINTR)
    /// `EIO`
    public static let ioError = Errno(rawValue: EIO)
    /// `EBADF`
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    /// `EWOULDBLOCK`, the same as `EAGAIN` on Linux.
    public static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    /// `EACCES`
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `EEXIST`
    public static let fileExists = Errno(rawValue: EEXIST)
    /// `EXDEV`: a rename across filesystems.
    public static let crossDevice = Errno(rawValue: EXDEV)
    /// `ENOTDIR`
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    /// `EISDIR`
    public static let isDirectory = Errno(rawValue: EISDIR)
    /// `EINVAL`
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ENOSPC`
    public static let noSpace = Errno(rawValue: ENOSPC)
    /// `EROFS`
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)
    /// `ELOOP`: what `O_NOFOLLOW` fails with on a symbolic link.
    public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)
    /// `ENAMETOOLONG`
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    /// `EOPNOTSUPP`
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    /// `ENOSYS`: the kernel lacks the call.
    public static let notImplemented = Errno(rawValue: ENOSYS)
    /// `EDQUOT`
    public static let quotaExceeded = Errno(rawValue: EDQUOT)
    /// `ENOTEMPTY`
    public static let notEmpty = Errno(rawValue: ENOTEMPTY)
    /// `ENODATA`: no such extended attribute.
    public static let noData = Errno(rawValue: ENODATA)
}

/// Runs the system call `name` that returns -1 on failure, reads `errno` at once, and retries on EINTR.
/// A fault planned for the call fails it without making it (an EINTR is retried like a real one).
@inline(never)
func valueOrErrno<I: FixedWidthInteger>(_ name: StaticString, retryOnInterrupt: Bool = true, _ call: () -> I)
    throws(Errno) -> I
{
    while true {
        if let fault = plannedFault(name) {
            if retryOnInterrupt && fault == .interrupted { continue }
            throw fault
        }
        let result = call()
        if result != -1 { return result }
        let error = Errno.current
        if retryOnInterrupt && error == .interrupted { continue }
        throw error
    }
}
