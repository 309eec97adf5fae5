import FoundationEssentials

/// The service's preferences, an XML property list at `Library/Preferences/inbox.plist`. Missing keys
/// take their defaults; one-time setup writes the defaults so a person can see and edit them.
public struct Preferences: Sendable, Equatable {
    /// Inbox items not moved out are deleted after this many seconds (30 days).
    public var inboxMaxAge: Int64 = 30 * 24 * 3600
    /// Past this many bytes in the Inbox, the oldest items are deleted first (1 GiB).
    public var inboxMaxBytes: Int64 = 1 << 30
    /// Entries of tmp older than this many seconds are deleted (3 days).
    public var tmpMaxAge: Int64 = 3 * 24 * 3600
    /// Library/Caches is trimmed, least recently used first, down to this many bytes (512 MiB).
    public var cachesMaxBytes: Int64 = 512 << 20
    /// The event log (`events.jsonl`) is rotated once past this many bytes (16 MiB); at least 64 KiB.
    public var logMaxBytes: Int64 = 16 << 20
    /// How many rotated logs are kept, the newest (20); at least 1, so that the next log goes on from the last seq.
    public var logKeepRotated: Int64 = 20
    /// The container is declared single-host (`inbox init --single-host`): no other host, and no other path on this
    /// one, writes to it. Required before anything writes to a container on a filesystem whose locks may keep to one
    /// path (ARCHITECTURE.md, "Network and FUSE filesystems").
    package var singleHost = false

    /// The defaults.
    public init() {}

    static let relativePath = "Library/Preferences/inbox.plist"

    /// The absolute path of `inbox.plist` in `container`.
    public static func path(_ container: Container) -> String { container.root + "/" + relativePath }

    /// Each key, its field, the values it takes and what it counts, for the line that refuses another value.
    private static var keys: [(String, WritableKeyPath<Preferences, Int64>, ClosedRange<Int64>, String)] {
        let any = 0...Int64.max
        return [
            ("inboxMaxAge", \.inboxMaxAge, any, "seconds"), ("inboxMaxBytes", \.inboxMaxBytes, any, "bytes"),
            ("tmpMaxAge", \.tmpMaxAge, any, "seconds"), ("cachesMaxBytes", \.cachesMaxBytes, any, "bytes"),
            ("logMaxBytes", \.logMaxBytes, (64 << 10)...Int64.max, "bytes"),
            ("logKeepRotated", \.logKeepRotated, 1...1_000_000, "files"),
        ]
    }

    /// The container's preferences; defaults for a missing file or key. A file that is not a property
    /// list of numbers fails with exit status 65.
    public static func load(_ container: Container) throws(ContainerError) -> Preferences {
        var preferences = Preferences()
        // Read without following a symbolic link, like every other file of the container.
        let data: Data
        do {
            let exact = container.rootBytes + Array("/\(relativePath)".utf8)
            data = Data(try FileDescriptor(exact, [.noFollow, .nonBlocking]).readToEnd())
        } catch .noSuchFile {
            return preferences
        } catch {
            throw error.failure("read the preferences", path(container))
        }
        // Any property list whose top level is a dictionary; each of its values a whole number or not (nil).
        guard let plist = try? PropertyListDecoder().decode([String: PlistValue].self, from: data) else {
            throw ContainerError(.badData, "'\(path(container))' is not a property list: fix or delete it")
        }
        for (key, keyPath, range, unit) in keys {
            guard let value = plist[key] else { continue }
            guard let number = value.number, range.contains(number) else {
                let bounds =
                    range.upperBound == .max
                    ? "at least \(range.lowerBound)" : "\(range.lowerBound) to \(range.upperBound)"
                throw ContainerError(
                    .badData, "'\(key)' in '\(path(container))' must be a whole number of \(unit), \(bounds): fix it")
            }
            preferences[keyPath: keyPath] = number
        }
        if let value = plist[singleHostKey] {
            guard let flag = value.flag else {
                throw ContainerError(
                    .badData, "'\(singleHostKey)' in '\(path(container))' must be true or false: fix it")
            }
            preferences.singleHost = flag
        }
        return preferences
    }

    /// Writes the file with every key, keeping values already there; atomically and durably (`Container.write`).
    public static func writeDefaults(_ container: Container) throws(ContainerError) {
        try write(try load(container), to: container)
    }

    /// Declares the container single-host (`singleHost`), keeping every other value.
    package static func declareSingleHost(_ container: Container) throws(ContainerError) {
        var preferences = try load(container)
        guard !preferences.singleHost else { return }
        preferences.singleHost = true
        try write(preferences, to: container)
    }

    private static let singleHostKey = "singleHost"

    /// Writes `preferences` with every key; atomically and durably (`Container.write`).
    private static func write(_ current: Preferences, to container: Container) throws(ContainerError) {
        var plist: [String: PlistValue] = [singleHostKey: PlistValue(flag: current.singleHost)]
        for (key, keyPath, _, _) in keys { plist[key] = PlistValue(number: current[keyPath: keyPath]) }
        let data: Data
        do {
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .xml
            data = try encoder.encode(plist)
        } catch {
            throw ContainerError(.failure, "cannot encode the preferences: \(error)")
        }
        try container.write(Array(data), to: container.components(of: .preferences) + [fileName])
    }

    private static let fileName = FileName("inbox.plist").unsafelyUnwrapped
}

/// A value of the preferences' property list: its whole number or its truth value, each nil for any other value
/// (text, a real, a date…).
private struct PlistValue: Codable {
    var number: Int64?
    var flag: Bool?

    init(number: Int64) { self.number = number }

    init(flag: Bool) { self.flag = flag }

    init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer()
        flag = try? value.decode(Bool.self)
        number = flag == nil ? try? value.decode(Int64.self) : nil
    }

    func encode(to encoder: any Encoder) throws {
        var value = encoder.singleValueContainer()
        if let flag { try value.encode(flag) } else { try value.encode(number ?? 0) }
    }
}
