import Glibc

/// An error number reported by a system call.
package struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    /// The C `errno` value.
    package let rawValue: CInt

    /// The error of a C `errno` value.
    package init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// The calling thread's `errno`, read right after a failed call.
    static var current: Errno { Errno(rawValue: errno) }

    /// The system's text for the error (`strerror`), such as "No such file or directory".
    package var description: String { String(cString: strerror(rawValue)) }

    /// `EPERM`
    package static let notPermitted = Errno(rawValue: EPERM)
    /// `ENOENT`
    package static let noSuchFile = Errno(rawValue: ENOENT)
    /// `EINTR`
    package static let interrupted = Errno(rawValue: EINTR)
    /// `EIO`
    package static let ioError = Errno(rawValue: EIO)
    /// `EBADF`
    package static let badFileDescriptor = Errno(rawValue: EBADF)
    /// `EWOULDBLOCK`, the same as `EAGAIN` on Linux.
    package static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    /// `EACCES`
    package static let permissionDenied = Errno(rawValue: EACCES)
    /// `EEXIST`
    package static let fileExists = Errno(rawValue: EEXIST)
    /// `EXDEV`: a rename across filesystems.
    package static let crossDevice = Errno(rawValue: EXDEV)
    /// `ENOTDIR`
    package static let notDirectory = Errno(rawValue: ENOTDIR)
    /// `EISDIR`
    package static let isDirectory = Errno(rawValue: EISDIR)
    /// `EINVAL`
    package static let invalidArgument = Errno(rawValue: EINVAL)
    /// `ENOSPC`
    package static let noSpace = Errno(rawValue: ENOSPC)
    /// `EROFS`
    package static let readOnlyFileSystem = Errno(rawValue: EROFS)
    /// `ELOOP`: what `O_NOFOLLOW` fails with on a symbolic link.
    package static let tooManySymbolicLinks = Errno(rawValue: ELOOP)
    /// `ENAMETOOLONG`
    package static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    /// `EOPNOTSUPP`
    package static let notSupported = Errno(rawValue: EOPNOTSUPP)
    /// `ENOSYS`: the kernel lacks the call.
    package static let notImplemented = Errno(rawValue: ENOSYS)
    /// `EDQUOT`
    package static let quotaExceeded = Errno(rawValue: EDQUOT)
    /// `ENOTEMPTY`
    package static let notEmpty = Errno(rawValue: ENOTEMPTY)
    /// `ENODATA`: no such extended attribute.
    package static let noData = Errno(rawValue: ENODATA)
    /// `ESTALE`: a name no longer holds the file decided on (`checkedRename` through a private name).
    package static let staleFile = Errno(rawValue: ESTALE)
    /// `ETIMEDOUT`
    package static let timedOut = Errno(rawValue: ETIMEDOUT)
    /// `ENOLCK`: no lock to be had, as a network filesystem whose lock service is missing answers.
    package static let noLocks = Errno(rawValue: ENOLCK)
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
