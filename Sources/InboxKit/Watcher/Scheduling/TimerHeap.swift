/// Instants with a value each, the soonest first (a binary heap).
struct TimerHeap<Value> {
    private var entries: [(due: ContinuousClock.Instant, value: Value)] = []

    /// The soonest instant, if any.
    var soonest: ContinuousClock.Instant? { entries.first?.due }

    mutating func push(_ due: ContinuousClock.Instant, _ value: Value) {
        entries.append((due, value))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].due < entries[parent].due else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Takes the soonest entry if it is due by `now`.
    mutating func popDue(by now: ContinuousClock.Instant) -> (ContinuousClock.Instant, Value)? {
        guard let first = entries.first, first.due <= now else { return nil }
        let last = entries.removeLast()
        if !entries.isEmpty {
            entries[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var soonest = parent
                if left < entries.count && entries[left].due < entries[soonest].due { soonest = left }
                if right < entries.count && entries[right].due < entries[soonest].due { soonest = right }
                guard soonest != parent else { break }
                entries.swapAt(parent, soonest)
                parent = soonest
            }
        }
        return (first.due, first.value)
    }
}
