import AppContainer
import InboxKit

/// How much of a message the import reads before it refuses it (ARCHITECTURE.md, "Mail import").
public struct MailLimits: Sendable, Equatable {
    /// The deepest nesting of multiparts and forwarded messages (the message's own body is at depth 0).
    public var maxDepth = 64
    /// The most MIME parts (every header block: the body, each subpart, each forwarded message's body).
    public var maxParts = 10_000
    /// The most bytes all of a message's attachments may decode to (`--max-bytes`).
    public var maxBytes: Int64 = 1 << 30
    /// The most bytes of one header block (the message's or a part's).
    public var maxHeaderBlockBytes = 1 << 20
    /// The most bytes of header blocks, all parts together: GMime holds every header in memory.
    public var maxHeaderBytes = 16 << 20
    /// The largest winmail.dat expanded into its files: libytnef holds what it reads (up to twice this while it
    /// reads one attribute). A larger one is delivered as it is, never refused for its size (ARCHITECTURE.md, TNEF).
    public var maxTnefBytes = 16 << 20

    /// The limits of `inbox import` without `--max-bytes`.
    public init() {}

    /// Limits with the depth, parts and bytes given, the others as `init()` has them.
    public init(maxDepth: Int = 64, maxParts: Int = 10_000, maxBytes: Int64 = 1 << 30) {
        self.maxDepth = maxDepth
        self.maxParts = maxParts
        self.maxBytes = maxBytes
    }

    /// `maxBytes` as `--max-bytes` takes it (`1G`, `512M`, `1000`), for the refusal to name the limit.
    var maxBytesText: String {
        for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] where maxBytes >= 1 << shift {
            if maxBytes % (1 << shift) == 0 { return "\(maxBytes >> shift)\(unit)" }
        }
        return "\(maxBytes)"
    }

    /// A size in words: `1 MiB`, `16 MiB`, `1000 bytes`.
    static func size(_ bytes: Int) -> String {
        for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)]
        where bytes >= 1 << shift && bytes % (1 << shift) == 0 {
            return "\(bytes >> shift) \(unit)"
        }
        return "\(bytes) bytes"
    }

    /// A count with thousands separated: `10,000`.
    static func count(_ number: Int) -> String {
        var digits = String(number)
        var index = digits.endIndex
        while digits.distance(from: digits.startIndex, to: index) > 3 {
            index = digits.index(index, offsetBy: -3)
            digits.insert(",", at: index)
        }
        return digits
    }
}

/// Why a message was not read (ARCHITECTURE.md, "Mail import": the first two bounce, the third is retried).
public enum MailError: Error, Sendable, CustomStringConvertible {
    /// No header field before the first blank line, or nothing GMime can read as a message.
    case notAMessage(String)
    /// A limit of `MailLimits` was passed.
    case refused(String)
    /// Reading the message or writing an attachment failed.
    case io(ContainerError)

    /// The reason in words, as a `rejected` record or an error line gives it.
    public var description: String {
        switch self {
        case .notAMessage(let why): "not a message: \(why)"
        case .refused(let why): "refused: \(why)"
        case .io(let error): error.message
        }
    }
}
