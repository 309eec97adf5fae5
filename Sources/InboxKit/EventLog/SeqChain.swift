/// Which seqs count (ARCHITECTURE.md, "The event log"). Read from the start of a file, a record's seq is valid when it
/// is at most `EventLog.maxSeq` and above the valid seq before it by at most `maxGap`; before a file's first record
/// comes the seq of the rotated file before it (0 for the oldest). Any other seq is crafted or damaged: readers skip
/// its record and it never sets the counter.
struct SeqChain {
    /// How far a seq may jump past the one before it. Appends count on by one; only `EventLog.continueSeq` skips
    /// ahead, past records that a truncation or an older copy of the log took away, never billions of them. A crafted
    /// log would need 2^21 records, each this far past the last, to reach `EventLog.maxSeq`.
    static let maxGap: UInt64 = 1 << 32

    /// The last valid seq: the one the next must follow.
    private(set) var last: UInt64

    init(after last: UInt64) {
        self.last = last
    }

    /// Whether `seq` is valid here; a valid one becomes the last.
    mutating func accept(_ seq: UInt64) -> Bool {
        guard seq > last, seq - last <= Self.maxGap, seq <= EventLog.maxSeq else { return false }
        last = seq
        return true
    }
}
