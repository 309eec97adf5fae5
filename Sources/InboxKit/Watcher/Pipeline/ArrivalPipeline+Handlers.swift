import AppContainer

/// Asking the handlers, once (ARCHITECTURE.md, "Each answer once"): the `arrived` records are durable before a
/// handler is asked, and its answer (`handled`, with the item's identity and disposition) before it is acted on.
/// After a crash the log says which items were asked and not answered: those are kept, logged `handled` with
/// `interrupted`, and never asked again (see `ArrivalPipeline+Recovery.swift`).
extension ArrivalPipeline {
    /// The handler that decides on arrivals, as the log names it: `library`, `exec`, or nil for the default.
    var handlerName: String? {
        handler != nil ? "library" : hooks != nil ? "exec" : nil
    }

    /// Logs the batch's arrivals durably, asks the handler about each, and logs its answers durably, a slice
    /// at a time: a crash keeps at most one slice unanswered. Each slice's answers share a commit with the
    /// next slice's arrivals. An item counts as arrived from its first commit on, so that nothing asks about
    /// it again, answered or not.
    func ask(_ handler: String, _ batch: [Prepared], arrivals: [Arrival], records: inout EncodedEvents)
        throws(ContainerError)
    {
        // An `--exec` command runs in processes, `jobs` at once: two rounds of them a slice. A library handler
        // runs in this process, a crash its own, so the batch is one slice.
        let size = hooks == nil ? batch.count : 2 * max(1, options.jobs)
        var start = 0
        while start < batch.count {
            let end = min(batch.count, start + size)
            let slice = Array(batch[start..<end])
            for prepared in slice {
                appendArrived(prepared, asking: handler, to: &records)
            }
            try commit(records, durable: true)
            records = EncodedEvents(reservingCapacity: 2 * slice.count)
            for prepared in slice {
                arrived.insert(prepared.identity)
                scanPresent?.insert(prepared.identity)
            }
            appendAnswers(slice, arrivals: Array(arrivals[start..<end]), to: &records)
            start = end
        }
        // Not written, the answers are not acted on: the items stay, and the next start logs them interrupted.
        try commit(records, durable: true)
    }

    /// Asks the handler about each item and appends its `handled` record, with identity and disposition, and an
    /// `error` record after it for a hook whose answer was not a disposition.
    private func appendAnswers(_ batch: [Prepared], arrivals: [Arrival], to records: inout EncodedEvents) {
        let answers = answer(batch, arrivals: arrivals)
        // A handler's word never deletes a whole folder.
        for prepared in batch where prepared.isFolder && prepared.disposition == .delete {
            prepared.disposition = .keep
        }
        for (prepared, answer) in zip(batch, answers) {
            var event = answer.handled
            event.fields.append(("id", .string(prepared.identity.text)))
            event.fields.append(("disposition", .string(prepared.disposition.rawValue)))
            records.append(event)
            if let unknown = answer.unknown {
                logError(during: "hook", prepared.name, unknown, folder: loggedInbox, to: &records)
            }
        }
    }

    /// Sets each arrival's disposition from its handler; returns the `handled` record of each, but for its
    /// identity and disposition, and what is wrong with a hook's answer that is not a disposition.
    private func answer(_ batch: [Prepared], arrivals: [Arrival]) -> [(handled: Event, unknown: ContainerError?)] {
        if let handler = handler {
            return zip(batch, arrivals).map { prepared, arrival in
                prepared.disposition = handler.handle(arrival)
                let handled = Event(
                    .handled, ["path": .path(inbox.loggedPath(.inbox, prepared.name)), "handler": .string("library")])
                return (handled, nil)
            }
        }
        guard let hooks else { return [] }
        let fallback = options.onArrival
        let outcomes = HookPool.run(
            hooks, on: batch.map { ($0.name, $0.file.rawValue) }, inboxPath: container.pathBytes(.inbox),
            jobs: options.jobs)
        return zip(batch, outcomes).map { prepared, outcome in
            // A failing or hanging handler leaves the item where it is; so does an answer that is none of the three
            // (nothing printed leaves it to --on-arrival).
            guard outcome.succeeded, let unknown = outcome.unknownAnswer else {
                prepared.disposition = outcome.succeeded ? outcome.disposition ?? fallback : .keep
                return (handledEvent(prepared, outcome), nil)
            }
            prepared.disposition = .keep
            let answer = String(decoding: TerminalText.escaped(unknown), as: UTF8.self)
            let message =
                "the hook answered '\(answer)' for '\(inbox.itemPath(prepared.name))', not keep, move or delete:"
                + " the item stays in the Inbox"
            return (handledEvent(prepared, outcome), ContainerError(.badData, message))
        }
    }

    private func handledEvent(_ prepared: Prepared, _ outcome: HookOutcome) -> Event {
        var event = Event(
            .handled, ["path": .path(inbox.loggedPath(.inbox, prepared.name)), "handler": .string("exec")])
        if let status = outcome.exitStatus { event.fields.append(("status", .int(Int64(status)))) }
        if let signal = outcome.signal { event.fields.append(("signal", .int(Int64(signal)))) }
        if outcome.timedOut { event.fields.append(("timed_out", .bool(true))) }
        if !outcome.stderrTail.isEmpty { event.fields.append(("stderr", .string(outcome.stderrTail))) }
        return event
    }
}
