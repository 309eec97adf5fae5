import Glibc

/// The one error of this package: what went wrong, for a person, with the exit status of ARCHITECTURE.md, "The command
/// line".
public struct ContainerError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure, each with its exit status (sysexits.h).
    public enum Code: Int32, Sendable {
        case failure = 1
        case usage = 64
        case badData = 65
        case noSuchItem = 66
        case cannotCreate = 73
        case ioError = 74
        case busy = 75
        case refused = 77
    }

    public let code: Code
    /// One line a person can act on.
    public let message: String
    /// The system error underneath, if any.
    public let cause: Errno?

    public init(_ code: Code, _ message: String, cause: Errno? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { message }

    public var exitStatus: Int32 { code.rawValue }

    /// Turns a failed call on `path` into an error whose code follows the errno.
    /// - Parameter doing: what was being done, as in "cannot <doing> '<path>'".
    public init(_ cause: Errno, doing: String, path: String) {
        let code: Code
        switch cause {
        case .noSuchFile, .notDirectory: code = .noSuchItem
        case .readOnlyFileSystem: code = .cannotCreate
        case .noSpace, .quotaExceeded, .ioError: code = .ioError
        case .tooManySymbolicLinks: code = .refused
        case .permissionDenied, .notPermitted: code = .refused
        case .wouldBlock: code = .busy
        default: code = .failure
        }
        let hint: String
        switch cause {
        case .tooManySymbolicLinks: hint = " (a symbolic link is never followed)"
        case .noSpace, .quotaExceeded: hint = " (free some space and try again)"
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
