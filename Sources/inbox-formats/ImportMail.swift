import AppContainer
import Glibc
import InboxCommands
import InboxFormats

/// `inbox import`'s work: each source's messages imported, what came of them printed, the first failure mapped to
/// the exit status an MTA acts on (ARCHITECTURE.md, "Mail import").
enum ImportMail {
    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let sources = arguments.positionals
        let importer: MailImporter
        do {
            let container = try Container.open(at: containerPath)
            try container.requireSingleHost()
            // An MTA waits on `-`: no lock is waited for longer than a delivery allows (ARCHITECTURE.md, "Nothing
            // blocks an MTA").
            let lockWait: LockWait = ImportCommand.readsStandardInput(sources) ? .delivery : .unbounded
            importer = try MailImporter(
                inbox: try Inbox(container: container, lockWait: lockWait), limits: try limits(arguments))
        } catch {
            throw ImportCommand.failure(error, words: sources)
        }
        let format = try ResultFormat(arguments)
        var objects = format == .json ? JSONArrayPrinter() : nil
        var tally = ImportTally(sources: sources.count)
        func skipped(_ line: String) {
            tally.clearProgress()
            Output.problem(line)
        }
        func imported(_ message: ImportedMessage) {
            tally.clearProgress()
            if format == .json {
                objects?.print(message.json)
            } else {
                for attachment in message.attachments {
                    Output.name(attachment.item.path, nulTerminated: format == .nulTerminated)
                }
            }
            tally.count(message)
        }
        for source in sources {
            do {
                defer { tally.endSource() }
                try importer.importSource(source, skipped: skipped, progress: { tally.advance($0) }, each: imported)
            } catch {
                // Standard input is what an MTA hands over: whatever failed there is not the message's fault.
                tally.sourceFailed(ImportCommand.failure(error, words: [source]))
            }
        }
        tally.clearProgress()
        objects?.finish()
        try tally.finish()
    }

    /// The limits `--max-bytes` sets, named as the user wrote them in a refusal.
    static func limits(_ arguments: Arguments) throws(ContainerError) -> MailLimits {
        var limits = MailLimits()
        if let text = arguments.string("--max-bytes") {
            guard let bytes = Quantity.bytes(from: text) else {
                throw ContainerError(.usage, "'\(text)' is not a size for --max-bytes (try 512M or 1G)")
            }
            limits.maxBytes = bytes
        }
        return limits
    }
}
