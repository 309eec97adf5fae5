import InboxKit

/// How far the import of one source has come: the bytes of an mbox read of its size, or the entries of a Maildir
/// done of its count (ARCHITECTURE.md, "Mail import").
public struct ImportProgress: Sendable, Equatable {
    /// What `done` and `total` count.
    public enum Unit: Sendable, Equatable {
        /// Bytes of an mbox.
        case bytes
        /// Entries of a Maildir's `new` and `cur`.
        case entries
    }

    /// How many are done.
    public let done: Int64
    /// How many there are in all.
    public let total: Int64
    /// What they count.
    public let unit: Unit

    /// `done` of `total`, counted in `unit`.
    public init(done: Int64, of total: Int64, unit: Unit) {
        self.done = done
        self.total = total
        self.unit = unit
    }

    /// `42% of 1,203 MiB`, `1,200 of 3,000 entries`.
    public var description: String {
        switch unit {
        case .entries:
            return "\(ProgressLine.grouped(Int(done))) of \(ProgressLine.grouped(Int(total))) entries"
        case .bytes:
            let percent = total > 0 ? Int(done * 100 / total) : 100
            let size =
                total >= 1 << 20
                ? "\(ProgressLine.grouped(Int(total >> 20))) MiB" : "\(ProgressLine.grouped(Int(total >> 10))) KiB"
            return "\(percent)% of \(size)"
        }
    }
}
