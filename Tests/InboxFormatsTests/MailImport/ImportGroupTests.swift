import AppContainer
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// Concurrent importers of one container place together (`ImportGroup`, ARCHITECTURE.md, "LMTP"): what came while
/// one batch was placed goes in the next, all at once, each message once; and an LMTP session's kept importer is
/// used only while the container at its path is the one it opened.
@Suite struct ImportGroupTests {
    static func message(_ number: Int, id: String? = nil) -> Data {
        let body = Data("attachment \(number)\n".utf8).base64EncodedString()
        return Data(
            ("From: a@example.org\r\nMessage-ID: <\(id ?? "group-\(number)")@example.org>\r\nMIME-Version: 1.0\r\n"
                + "Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nhi\r\n"
                + "--B\r\nContent-Type: application/octet-stream; name=a\(number).bin\r\n"
                + "Content-Disposition: attachment; filename=a\(number).bin\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                + "\(body)\r\n--B--\r\n").utf8)
    }

    /// Importers of one container in one group, each used by one thread only.
    final class Importers: @unchecked Sendable {
        let all: [MailImporter]
        let group = ImportGroup()

        init(_ count: Int, _ container: Container) throws {
            all = try (0..<count).map { [group] _ in
                try MailImporter(
                    inbox: Inbox(container: container, lockWait: .delivery), limits: MailLimits(), group: group)
            }
        }

        /// Imports `messages[i]` with the importer `first + i`, all at once, each on a thread of its own; the
        /// outcomes in order.
        func importTogether(_ messages: [Data], first: Int = 0) -> [Result<ImportedMessage, any Error>] {
            let results = Mutex<[Int: Result<ImportedMessage, any Error>]>([:])
            let ended = DispatchSemaphore(value: 0)
            for number in messages.indices {
                do {
                    try startDetachedThread {
                        let result = Result {
                            try self.all[first + number].importMessage(messages[number], source: "lmtp")
                        }
                        results.withLock { $0[number] = result }
                        ended.signal()
                    }
                } catch {
                    results.withLock { $0[number] = .failure(error) }
                    ended.signal()
                }
            }
            for _ in messages { ended.wait() }
            return results.withLock { results in messages.indices.map { results[$0]! } }
        }
    }

    /// Eight importers hand their messages in while the first batch's leader waits for `import.lock` (held by
    /// another process): the seven that came meanwhile are placed in one second batch, and every attachment is in
    /// the Inbox once.
    @Test func whatCameWhileABatchWasPlacedGoesInTheNextAllAtOnce() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let importers = try Importers(8, scratch.container)
        let group = importers.group
        let held = try HeldLock(scratch.container.path(.applicationSupport) + "/inbox/import.lock")
        let messages = (0..<8).map { Self.message($0) }
        let results = Mutex<[Result<ImportedMessage, any Error>]>([])
        let done = DispatchSemaphore(value: 0)
        try startDetachedThread {
            let outcomes = importers.importTogether(messages)
            results.withLock { $0 = outcomes }
            done.signal()
        }
        // The first batch's leader waits for the lock; the other seven wait for the next batch.
        #expect(waitUntil(timeout: 30, interval: 0.001) { group.waiting >= 7 })
        held.release()
        #expect(done.wait(timeout: .now() + 60) == .success)
        let outcomes = results.withLock { $0 }
        #expect(outcomes.compactMap { try? $0.get().attachments.count } == Array(repeating: 1, count: 8))
        #expect(group.batches == 2)
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.container.path(.inbox)).sorted()
        #expect(names == (0..<8).map { "a\($0).bin" }.sorted())
        #expect(try scratch.inbox.log.records(kinds: [.imported]).count == 8)
    }

    /// Two importers handed the same message while a batch is placed: never placed in one batch (the second waits
    /// for the one after); one delivers it, the other finds it a duplicate.
    @Test func oneMessageHandedInTwiceAtOnceIsDeliveredOnce() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let importers = try Importers(3, scratch.container)
        let group = importers.group
        let held = try HeldLock(scratch.container.path(.applicationSupport) + "/inbox/import.lock")
        let results = Mutex<[Result<ImportedMessage, any Error>]>([])
        let done = DispatchSemaphore(value: 0)
        try startDetachedThread {
            let first = importers.importTogether([Self.message(1)])
            results.withLock { $0 += first }
            done.signal()
        }
        // The first batch is placing (waiting for the lock) before the twins come.
        #expect(waitUntil(timeout: 30, interval: 0.001) { group.batches >= 1 })
        try startDetachedThread {
            let twins = importers.importTogether([Self.message(2), Self.message(2)], first: 1)
            results.withLock { $0 += twins }
            done.signal()
        }
        #expect(waitUntil(timeout: 30, interval: 0.001) { group.waiting >= 2 })
        held.release()
        for _ in 0..<2 { #expect(done.wait(timeout: .now() + 60) == .success) }
        let statuses = results.withLock { $0 }.compactMap { try? $0.get().status }
        #expect(statuses.count == 3)
        #expect(statuses.filter { $0 == .duplicate }.count == 1)
        #expect(group.batches == 3)
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.container.path(.inbox)).sorted()
        #expect(names == ["a1.bin", "a2.bin"])
    }

    /// An LMTP session keeps its importer from one message to the next, but a container made anew at the same path
    /// (removed and `inbox init` again) is opened afresh: the message lands in the new one's Inbox.
    @Test func aSessionDeliversIntoTheContainerNowAtItsPath() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let path = Array(scratch.container.rootBytes)
        let session = LMTPDelivery(limits: MailLimits()).session()
        for (number, remake) in [(1, false), (2, false), (3, true)] {
            if remake {
                try FileManager.default.removeItem(atPath: scratch.container.root)
                _ = try Container.create(at: scratch.container.root, appName: "Mail")
            }
            let copy = try Self.message(number).withUnsafeBytes { raw in try TemporaryCopy.of(raw) }
            let outcome = session.deliver(copy.rawValue, into: path)
            #expect(outcome == .delivered("imported: 1 attachment delivered"), "\(number)")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: scratch.container.path(.inbox))
        #expect(names == ["a3.bin"])
    }
}
