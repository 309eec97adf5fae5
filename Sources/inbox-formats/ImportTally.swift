import AppContainer
import InboxCommands
import InboxFormats

/// What `inbox import` says on stderr: one line a failure, a summary line only when more than one message or source
/// was read (and on a terminal, always then), on a terminal one line for a lone message that delivered nothing, and
/// the exit status of the first failure (ARCHITECTURE.md, "Mail import").
struct ImportTally {
    private let sources: Int
    private var messages = 0
    private var attachments = 0
    private var duplicates = 0
    private var refused = 0
    private var failedSources = 0
    private var firstFailure: ContainerError?
    /// The first failure's line, held while it may turn out to be the only line (one source, one message).
    private var held: String?
    /// Why the one message read so far delivered nothing; nil when it delivered something, or was refused.
    private var deliveredNothing: String?
    /// How far the source being read has come.
    private var position: ImportProgress?
    private let progress = ProgressLine.standardError()

    init(sources: Int) { self.sources = sources }

    /// Whether the run reads more than one message or source: then each failure has its line and a summary ends it.
    private var several: Bool { sources > 1 || messages > 1 }

    /// Counts a message read, and says so when it was refused.
    mutating func count(_ message: ImportedMessage) {
        messages += 1
        flushHeld()
        attachments += message.attachments.count
        deliveredNothing = Self.whyNothing(message)
        switch message.status {
        case .imported: break
        case .duplicate: duplicates += 1
        case .refused:
            refused += 1
            let reason = message.reason ?? "refused"
            fail(ContainerError(.badData, "refused a message of '\(message.source)': \(reason)"))
        }
        drawProgress()
    }

    /// Notes how far the source being read has come, and redraws the progress line.
    mutating func advance(_ position: ImportProgress) {
        self.position = position
        drawProgress()
    }

    /// `inbox: importing… 42% of 1,203 MiB: 2,881 messages, 2,902 attachments`, on a terminal.
    private func drawProgress() {
        progress.draw(
            "importing… \(position.map { $0.description + ": " } ?? "")\(ProgressLine.grouped(messages)) messages, "
                + "\(ProgressLine.grouped(attachments)) attachments")
    }

    /// Notes a source that stopped with `error`.
    mutating func sourceFailed(_ error: ContainerError) {
        failedSources += 1
        fail(error)
    }

    /// Forgets the position of the source that was read.
    mutating func endSource() { position = nil }

    /// Erases the progress line so a result line can follow.
    func clearProgress() { progress.clear() }

    /// Ends the run: throws the first failure (its own line when it is the only one, else the summary, with the
    /// first failure's status); on a terminal a run of several messages or sources ends with the summary.
    func finish() throws(ContainerError) {
        guard let failure = firstFailure else {
            if several && progress.isTerminal { Output.problem(summary) }
            if !several && progress.isTerminal, let deliveredNothing { Output.problem(deliveredNothing) }
            return
        }
        guard several else { throw failure }
        var line = summary
        if failedSources > 0 {
            line += "; \(failedSources) of \(sources) \(sources == 1 ? "source" : "sources") failed"
        }
        throw ContainerError(failure.code, line + " (see above)")
    }

    /// `duplicate of <id@example.org>, imported before with 2 attachments: nothing delivered from '/m.eml'`, `no
    /// attachments in '/m.eml'`; nil for a message that delivered something, or was refused (its failure says so).
    private static func whyNothing(_ message: ImportedMessage) -> String? {
        guard message.attachments.isEmpty else { return nil }
        let source = message.source == "-" ? "standard input" : "'\(message.source)'"
        switch message.status {
        case .duplicate:
            let original = message.duplicateOf
            let name =
                original?.messageID.map { "<\($0)>" } ?? "the message with message_sha256 \(message.messageSHA256)"
            let count = original.map { $0.attachments == 1 ? "1 attachment" : "\($0.attachments) attachments" }
            return "duplicate of \(name), imported before\(count.map { " with " + $0 } ?? ""): nothing delivered from "
                + source
        case .imported where message.found == 0:
            return "no attachments in \(source)"
        case .imported:
            return "nothing new in \(source): its \(message.found == 1 ? "attachment was" : "attachments were")"
                + " delivered before"
        case .refused:
            return nil
        }
    }

    /// `imported 2,881 messages: 2,902 attachments, 12 duplicates, 1 refused`.
    private var summary: String {
        let count = { (number: Int, one: String, many: String) in
            "\(ProgressLine.grouped(number)) \(number == 1 ? one : many)"
        }
        return "imported \(count(messages, "message", "messages")): "
            + [
                count(attachments, "attachment", "attachments"), count(duplicates, "duplicate", "duplicates"),
                "\(ProgressLine.grouped(refused)) refused",
            ].joined(separator: ", ")
    }

    private mutating func fail(_ error: ContainerError) {
        guard firstFailure != nil || several else {
            firstFailure = error
            held = error.message
            return
        }
        firstFailure = firstFailure ?? error
        progress.clear()
        Output.problem(error.message)
    }

    /// Prints the held line once the run turns out to read several messages or sources.
    private mutating func flushHeld() {
        guard several, let line = held else { return }
        held = nil
        progress.clear()
        Output.problem(line)
    }
}
