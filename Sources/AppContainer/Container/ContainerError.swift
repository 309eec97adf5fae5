import Glibc

/// The one error of this package: what went wrong, for a person, with the exit status of ARCHITECTURE.md, "The command
/// line".
public struct ContainerError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure, each with its exit status (sysexits.h).
    public enum Code: Int32, Sendable {
        /// Any other failure: exit status 1.
        case failure = 1
        /// A wrong command line or argument (an invalid name, an unknown option): 64, `EX_USAGE`.
        case usage = 64
        /// Data that is not what it should be (a broken seal, a preferences file that is not a property list, entries a
        /// restore refuses): 65, `EX_DATAERR`.
        case badData = 65
        /// No such file, folder or Inbox item: 66, `EX_NOINPUT`.
        case noSuchItem = 66
        /// Cannot create (no container at the path, a read-only filesystem): 73, `EX_CANTCREAT`.
        case cannotCreate = 73
        /// Reading or writing failed (disk full, over quota, EIO): 74, `EX_IOERR`.
        case ioError = 74
        /// Someone else holds what is needed (another watcher, a clean under way, a lock): try again later. 75,
        /// `EX_TEMPFAIL`.
        case busy = 75
        /// Refused by a container rule (the sealed bundle, a write into the Inbox, `..`, a symbolic link) or by the
        /// system's permissions: 77, `EX_NOPERM`.
        case refused = 77
    }

    /// What kind of failure, which sets the exit status.
    public let code: Code
    /// One line a person can act on.
    public let message: String
    /// The system error underneath, if any.
    package let cause: Errno?

    /// An error of `code` with `message`, the line a person reads, and the system error underneath, if any.
    package init(_ code: Code, _ message: String, cause: Errno? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    /// The message.
    public var description: String { message }

    /// The exit status of `code`, for the command line to exit with.
    public var exitStatus: Int32 { code.rawValue }

    /// Turns a failed call on `path` into an error whose code follows the errno.
    /// - Parameter doing: what was being done, as in "cannot <doing> '<path>'".
    package init(_ cause: Errno, doing: String, path: String) {
        let code: Code
        switch cause {
        case .noSuchFile, .notDirectory: code = .noSuchItem
        case .readOnlyFileSystem: code = .cannotCreate
        case .noSpace, .quotaExceeded, .ioError: code = .ioError
        case .tooManySymbolicLinks: code = .refused
        case .permissionDenied, .notPermitted: code = .refused
        case .wouldBlock, .noLocks: code = .busy
        case .notSupported where RenameFlagSupport.linkRefusedOn != nil: code = .cannotCreate
        default: code = .failure
        }
        let hint: String
        switch cause {
        case .tooManySymbolicLinks: hint = " (a symbolic link is never followed)"
        case .noSpace, .quotaExceeded: hint = " (free some space and try again)"
        case .noLocks: hint = " (the filesystem gives no lock here: on NFS, is its lock service running?)"
        case .staleFile: hint = " (another file took its name just before: that file stays in the Inbox)"
        case .permissionDenied where geteuid() == 0:
            // Root refused: without CAP_DAC_READ_SEARCH, as the system unit runs (README.md, "Running as a service").
            hint =
                " (root without capabilities, as under the system unit: for a container another account owns,"
                + " give the unit that account with User= and Group= in a drop-in)"
        case .notEmpty where doing == "move":
            hint = " (something was put into the folder made for it in Documents, which stays there: try again)"
        case .notSupported:
            // ARCHITECTURE.md, "Network and FUSE filesystems": no move can be made where both are refused.
            hint =
                RenameFlagSupport.linkRefusedOn.map {
                    " (the filesystem \($0) refuses rename flags and hard links: no container can live there)"
                } ?? ""
        default: hint = ""
        }
        self.init(code, "cannot \(doing) '\(path)': \(cause)\(hint)", cause: cause)
    }
}

extension Errno {
    /// This error as a `ContainerError` about `path`.
    public func failure(_ doing: String, _ path: String) -> ContainerError {
        ContainerError(self, doing: doing, path: path)
    }
}

extension Errno {
    /// This error as a `ContainerError` about the path `bytes`, shown as text (U+FFFD for a byte that is not UTF-8).
    public func failure(_ doing: String, _ bytes: [UInt8]) -> ContainerError {
        failure(doing, String(decoding: bytes, as: UTF8.self))
    }
}
