import Foundation
import InboxFormats
import InboxKit
import Testing

// The README's Swift examples, line for line (`readmeExamplesAreTheseLines` checks it), each run on a throwaway
// container: the documentation cannot rot (ARCHITECTURE.md, "The command line").

/// README, "The library: a hook for mail-import code", the first example.
func deliveryExample(containerPath: String, attachments: [(name: String, bytes: Data)], invoicePath: String) throws {
    let hiName = FileName("hi.txt")!
    // The container, made (or completed) from code as `inbox init` does; `Inbox(containerPath:)` opens one.
    let inbox = try Inbox(container: try Container.create(at: containerPath, appName: "Mail"))

    // A mail importer hands each attachment over (here `attachments: [(name: String, bytes: Data)]`). When
    // deliver returns, the file and the Inbox folder are on disk (fsynced): the importer may delete its copy.
    for attachment in attachments {
        let url = try inbox.deliver(data: attachment.bytes, suggestedName: attachment.name)
        print("delivered", url.path)
    }
    // Or a file on disk, or a batch sharing one folder fsync:
    _ = try inbox.deliver(contentsOf: URL(fileURLWithPath: invoicePath))
    _ = try inbox.deliver([.file(path: Array(invoicePath.utf8), name: nil), .data(Data("hi\n".utf8), name: hiName)])

    // The app reads Inbox items, and moves one out before editing it.
    for item in try inbox.items() {
        print(item.name, item.size, item.modified.rfc3339)
        let data = try item.contents()  // read-only: InboxItem has no write operation
        if data.starts(with: Data("%PDF".utf8)) {
            let document = try item.prepareForEditing()  // now Documents/<name>, writable
            try Data("%PDF-1.4 edited\n".utf8).write(to: document.url)
        }
    }
}

/// README, the watcher example.
struct Sorter: ArrivalHandler {
    func handle(_ arrival: Arrival) -> Disposition {  // arrival.item is read-only
        arrival.type == "pdf" ? .move : .keep
    }
}

func watcherExample(inbox: Inbox, started: @escaping @Sendable (Watcher) -> Void) async throws {
    let watcher = Watcher(inbox: inbox, options: WatchOptions(), handler: Sorter())
    try watcher.stopOnTerminationSignals()  // until run returns; then as before
    Task {
        for await arrival in watcher.arrivals {  // after its disposition is applied
            print(arrival.item.name, arrival.type, arrival.disposition!, arrival.url?.path ?? "deleted")
        }
    }
    started(watcher)
    try await watcher.run()  // until SIGTERM, SIGINT, watcher.stop() or the task's cancellation
}

/// README, "Mail import", the library call.
func importExample(containerPath: String, messageBytes: Data, mailboxPath: String) throws {
    let importer = try MailImporter(inbox: try Inbox(containerPath: containerPath))
    let result = try importer.importMessage(messageBytes, source: "imap:INBOX/4711")  // or fromFile: fd
    for attachment in result.attachments { print(attachment.item.name, attachment.sha256) }
    try importer.importSource(mailboxPath) { message in print(message.status, message.subject ?? "") }
}

@Suite(.serialized) struct ReadmeExampleTests {
    private func scratch() throws -> (container: Container, folder: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-readme-\(UUID().uuidString)")
            .path
        return (try Container.create(at: folder + "/app", appName: "Readme"), folder)
    }

    @Test func readmeExamplesAreTheseLines() throws {
        let here = URL(fileURLWithPath: #filePath)
        let readme = try String(
            contentsOf: here.deletingLastPathComponent().appendingPathComponent("../../README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        // Compared with runs of spaces made one: formatting may align a comment differently.
        func normalized(_ line: some StringProtocol) -> String {
            line.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        }
        let ours = Set(source.split(separator: "\n").map(normalized))
        var blocks = 0
        var inBlock = false
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "```swift" {
                inBlock = true
                blocks += 1
                continue
            }
            if line == "```" {
                inBlock = false
                continue
            }
            let code = normalized(line)
            guard inBlock, !code.isEmpty, !code.hasPrefix("import ") else { continue }
            if !ours.contains(code) { Issue.record("README line not in the compiled examples: \(code)") }
        }
        #expect(blocks == 3)
    }

    @Test func theDeliveryExampleRuns() throws {
        let folder = try scratch().folder
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let invoice = folder + "/invoice.pdf"
        try Data("%PDF-1.4 invoice\n".utf8).write(to: URL(fileURLWithPath: invoice))
        let root = folder + "/made-by-the-example"
        try deliveryExample(
            containerPath: root, attachments: [("notes.txt", Data("notes\n".utf8))], invoicePath: invoice)
        #expect(FileManager.default.fileExists(atPath: root + "/Mail.app"), "the example made the container")
        let inbox = try FileManager.default.contentsOfDirectory(atPath: root + "/Documents/Inbox").sorted()
        #expect(inbox == ["hi.txt", "notes.txt"])
        let edited = try FileManager.default.contentsOfDirectory(atPath: root + "/Documents").sorted()
        #expect(edited == ["Inbox", "invoice-1.pdf", "invoice.pdf"], "both invoices moved out before editing")
    }

    @Test func theWatcherExampleRuns() async throws {
        await SignalTurns.take()
        defer { SignalTurns.give() }
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let (container, folder) = try scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let inbox = try Inbox(container: container)
        _ = try inbox.deliver(data: Data("%PDF-1.4\n%%EOF\n".utf8), suggestedName: "invoice.pdf")
        try await watcherExample(inbox: inbox) { watcher in
            Task {
                let log = try EventLog(container: container)
                let deadline = ContinuousClock.now + .seconds(30)
                while try log.records(kinds: ["moved"]).isEmpty, ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(10))
                }
                watcher.stop()
            }
        }
        #expect(FileManager.default.fileExists(atPath: container.root + "/Documents/invoice.pdf"))
    }

    @Test func theImportExampleRuns() throws {
        let (container, folder) = try scratch()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let message = """
            Subject: hello
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="b"

            --b
            Content-Type: text/plain; name="a.txt"
            Content-Disposition: attachment; filename="a.txt"

            attached
            --b--

            """
        let mailbox = folder + "/mbox"
        try ("From x Mon Jan  1 00:00:00 2024\n" + message.replacingOccurrences(of: "a.txt", with: "b.txt"))
            .write(toFile: mailbox, atomically: false, encoding: .utf8)
        try importExample(containerPath: container.root, messageBytes: Data(message.utf8), mailboxPath: mailbox)
        let inbox = try FileManager.default.contentsOfDirectory(atPath: container.root + "/Documents/Inbox").sorted()
        #expect(inbox == ["a.txt", "b.txt"])
    }
}
