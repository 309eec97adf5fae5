import Glibc

/// An error number reported by a system call.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: CInt

    public init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// The calling thread's `errno`, read right after a failed call.
    static var current: Errno { Errno(rawValue: errno) }

    public var description: String { String(cString: strerror(rawValue)) }

    public static let notPermitted = Errno(rawValue: EPERM)
    public static let noSuchFile = Errno(rawValue: ENOENT)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let ioError = Errno(rawValue: EIO)
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    public static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let fileExists = Errno(rawValue: EEXIST)
    public static let crossDevice = Errno(rawValue: EXDEV)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let isDirectory = Errno(rawValue: EISDIR)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let noSpace = Errno(rawValue: ENOSPC)
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)
    public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    public static let notImplemented = Errno(rawValue: ENOSYS)
    public static let quotaExceeded = Errno(rawValue: EDQUOT)
    public static let notEmpty = Errno(rawValue: ENOTEMPTY)
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
