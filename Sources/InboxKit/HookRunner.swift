// STUB until the hook runner lands (helper branch `hooks`): same API.
import AppContainer

public enum Disposition: String, Sendable { case keep, move, delete }

public struct HookOutcome: Sendable, Equatable {
    public let exitStatus: Int32?
    public let signal: Int32?
    public let timedOut: Bool
    public let disposition: Disposition?
    public let stderrTail: String
    public var succeeded: Bool { exitStatus == 0 && !timedOut }
}

public struct HookRunner: Sendable {
    public init(command: String, timeout: Duration, containerRoot: String) {}
    public func run(itemPath: [UInt8], name: FileName, file: CInt) -> HookOutcome {
        HookOutcome(exitStatus: 0, signal: nil, timedOut: false, disposition: nil, stderrTail: "")
    }
}
