import AppContainer

/// Inbox names to look at again later, each after a delay that doubles with every attempt up to a limit: files
/// still being written, and items whose handling failed (ARCHITECTURE.md, "No silent failure"). No hot loop,
/// and no item forgotten.
struct RetrySchedule<Payload> {
    struct Entry {
        var payload: Payload
        var attempts: Int
        var due: ContinuousClock.Instant
    }

    private(set) var entries: [FileName: Entry] = [:]
    /// The first delay and the longest.
    let first: Duration
    let limit: Duration
    /// The earliest due time, or nil when nothing waits.
    private(set) var nextDue: ContinuousClock.Instant?

    init(first: Duration, limit: Duration) {
        self.first = first
        self.limit = limit
    }

    var isEmpty: Bool { entries.isEmpty }

    /// Schedules `name` once more: its delay is twice the last one, at most `limit`.
    mutating func schedule(_ name: FileName, _ payload: Payload, now: ContinuousClock.Instant = .now) {
        let attempts = (entries[name]?.attempts ?? 0) + 1
        var delay = first
        for _ in 1..<min(attempts, 32) where delay < limit { delay *= 2 }
        let due = now + min(delay, limit)
        entries[name] = Entry(payload: payload, attempts: attempts, due: due)
        nextDue = min(nextDue ?? due, due)
    }

    mutating func remove(_ name: FileName) {
        // Every name of a batch is removed from each schedule, which is nearly always empty: no hashing then.
        guard !entries.isEmpty else { return }
        entries[name] = nil
    }

    /// The entries due by `now`, which stay scheduled (with their attempts) until removed or scheduled again.
    mutating func due(now: ContinuousClock.Instant = .now) -> [(name: FileName, entry: Entry)] {
        guard let next = nextDue, next <= now else { return [] }
        var due: [(name: FileName, entry: Entry)] = []
        var later: ContinuousClock.Instant?
        for (name, var entry) in entries {
            if entry.due <= now {
                due.append((name, entry))
                // Not due again until it is scheduled again, or the longest delay has passed.
                entry.due = now + limit
                entries[name] = entry
            }
            later = min(later ?? entry.due, entry.due)
        }
        nextDue = later
        return due
    }
}
