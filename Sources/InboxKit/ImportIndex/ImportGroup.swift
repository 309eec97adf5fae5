import AppContainer
import Dispatch
import Synchronization

/// The ledgers of one container in one process placing their messages together (ARCHITECTURE.md, "Mail import"):
/// the group commit of concurrent deliveries (`inbox lmtp`'s sessions). Each importer parses and stages its message
/// on its own thread, then its ledger hands it here. The first to come leads: its ledger places, in one `placeOnce`,
/// its own message and every one that came meanwhile (up to `ImportLedger`'s batch limits, keys distinct), so a
/// batch shares one index commit, one fsync of the Inbox folder and one of the log. Then it hands the lead to the
/// first still waiting and returns; the others return with their outcomes. Each importer syncs its staged files
/// before it hands them in, in parallel with the others, so the batch waits on no file's fsync.
package final class ImportGroup: Sendable {
    /// One importer's messages, waiting to be placed.
    private final class Request: @unchecked Sendable {
        // Handed between threads only through `ImportGroup.state` and `answered`.
        let messages: [StagedMessage]
        let writes: StagedWrites
        let attachments: Int
        var outcomes: [ImportPlacement] = []
        /// Set, before `answered` is signalled, when this request is to lead instead.
        var leads = false
        let answered = DispatchSemaphore(value: 0)

        init(_ messages: [StagedMessage], writes: StagedWrites) {
            self.messages = messages
            self.writes = writes
            attachments = messages.reduce(0) { $0 + $1.attachments.count }
        }
    }

    private struct State {
        var waiting: [Request] = []
        var leading = false
        var batches = 0
    }

    private let state = Mutex(State())

    package init() {}

    /// How many requests wait for their batch now, and how many batches were placed so far (for tests).
    var waiting: Int { state.withLock { $0.waiting.count } }
    var batches: Int { state.withLock { $0.batches } }

    /// Places `messages` (distinct keys), staged with `writes`, as `placeOnce` does, together with other ledgers'
    /// messages: `ledger` and `folder` are the caller's, used if it leads. Returns what became of each message, in
    /// order.
    func place(_ messages: [StagedMessage], writes: StagedWrites, by ledger: ImportLedger, folder: CInt)
        -> [ImportPlacement]
    {
        // Each importer syncs its own files, beside the others; one that failed fails the batch it joins.
        writes.syncAhead()
        let request = Request(messages, writes: writes)
        let leads = state.withLock { state in
            state.waiting.append(request)
            defer { state.leading = true }
            return !state.leading
        }
        if !leads {
            request.answered.wait()
            guard request.leads else { return request.outcomes }
        }
        // Leading: no one leads while requests wait, so this request is the first.
        let batch = state.withLock { state in
            state.batches += 1
            return Self.takeBatch(&state.waiting)
        }
        let writes = batch[0].writes
        for other in batch.dropFirst() { writes.take(other.writes) }
        var outcomes = ledger.placeOnce(batch.flatMap(\.messages), writes: writes, folder: folder)[...]
        for member in batch {
            member.outcomes = Array(outcomes.prefix(member.messages.count))
            outcomes = outcomes.dropFirst(member.messages.count)
            if member !== request { member.answered.signal() }
        }
        state.withLock { state in
            guard let next = state.waiting.first else {
                state.leading = false
                return
            }
            next.leads = true
            next.answered.signal()
        }
        return request.outcomes
    }

    /// The requests placed together next, taken from the front of `waiting`: the first, then each after it while
    /// the batch stays within `ImportLedger`'s limits and no key comes twice (`placeOnce` wants them distinct).
    private static func takeBatch(_ waiting: inout [Request]) -> [Request] {
        var keys = Set(waiting[0].messages.map(\.key))
        var messages = waiting[0].messages.count
        var attachments = waiting[0].attachments
        var count = 1
        for request in waiting.dropFirst() {
            messages += request.messages.count
            attachments += request.attachments
            let requestKeys = request.messages.map(\.key)
            guard messages <= ImportLedger.batchMessages, attachments <= ImportLedger.batchAttachments,
                keys.isDisjoint(with: requestKeys)
            else { break }
            keys.formUnion(requestKeys)
            count += 1
        }
        defer { waiting.removeFirst(count) }
        return Array(waiting.prefix(count))
    }
}
