// STUB: replaced by the real event log (helper). Same API.
import AppContainer
import Synchronization

public enum EventKind: String, Sendable, CaseIterable {
    case delivered, arrived, rejected, handled, moved, deleted, overflow, rescan, recovered
    case watchStarted = "watch-started"
    case watchStopped = "watch-stopped"
    case setup, error
}

public enum EventValue: Sendable, Equatable {
    case string(String)
    case path([UInt8])
    case int(Int64)
    case bool(Bool)
}

public struct Event: Sendable {
    public var kind: EventKind
    public var fields: [(key: String, value: EventValue)]
    public init(_ kind: EventKind, _ fields: KeyValuePairs<String, EventValue> = [:]) {
        self.kind = kind
        self.fields = fields.map { ($0.key, $0.value) }
    }
}

public final class EventLog: Sendable {
    public let directory: String
    public init(directory: String) throws(ContainerError) { self.directory = directory }
    public convenience init(container: Container) throws(ContainerError) {
        try self.init(directory: container.stateDirectory)
    }
    @discardableResult
    public func append(_ events: [Event], durable: Bool = false) throws(ContainerError) -> [UInt64] { [] }
    @discardableResult
    public func append(_ event: Event, durable: Bool = false) throws(ContainerError) -> UInt64 { 0 }
}

public struct EventRecord: Sendable {
    public let seq: UInt64
    public let time: String
    public let event: String
    public let line: String
    public let fields: [String: String]
}

extension EventLog {
    public func records(since: UInt64 = 0, kinds: Set<String> = []) throws(ContainerError) -> [EventRecord] { [] }
    public func follow(
        since: UInt64 = 0, kinds: Set<String> = [], shouldStop: () -> Bool = { false },
        _ body: (EventRecord) -> Bool
    ) throws(ContainerError) {}
}
