import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// An LMTP session over a real socket pair, delivering into a real container (DESIGN §14): the replies after the
/// data are the import's outcomes, the idle timeout and SIGTERM's stop close it with their 421s, and under `--root`
/// each recipient's name is looked up at RCPT.
@Suite struct LMTPSessionTests {
    static let message =
        "From: a@example.org\r\nSubject: s\r\nMessage-ID: <lmtp-1@example.org>\r\nMIME-Version: 1.0\r\n"
        + "Content-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nContent-Type: text/plain\r\n\r\nhello\r\n--B\r\n"
        + "Content-Type: application/pdf; name=r.pdf\r\nContent-Disposition: attachment; filename=r.pdf\r\n"
        + "Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQKJcOkw7zDtsOfCg==\r\n--B--\r\n"

    /// A session served on a thread of its own; the test holds the client's end (TestSupport's `LMTPClient`).
    final class Served {
        let client: LMTPClient
        let stop: (read: CInt, write: CInt)
        private let ended = DispatchSemaphore(value: 0)

        /// `sendBuffer`: the server's `SO_SNDBUF`, when the test wants its replies to fill it.
        init(_ settings: LMTPSession.Settings, sendBuffer: CInt? = nil) throws {
            let (server, client) = try system_socketpair()
            if let sendBuffer { try system_setSocketOption(server, SO_SNDBUF, sendBuffer) }
            stop = try system_pipe()
            self.client = LMTPClient(owning: client)
            let session = LMTPSession(settings: settings)
            let stopRead = stop.read
            let ended = ended
            try startDetachedThread {
                session.serve(server, stop: stopRead)
                close(server)
                ended.signal()
            }
        }

        deinit {
            close(stop.read)
            close(stop.write)
        }

        func send(_ text: String) { client.send(text) }

        func replies(_ count: Int) -> [String] { client.replies(count, timeout: 20) }

        /// Whether the session ended within 20 seconds.
        func hasEnded() -> Bool { ended.wait(timeout: .now() + 20) == .success }
    }

    static func settings(_ recipients: LMTPRecipients, limits: MailLimits = MailLimits()) -> LMTPSession.Settings {
        LMTPSession.Settings(
            host: "test", limits: LMTPProtocol.Limits(messageBytes: 1 << 30), recipients: recipients,
            delivery: LMTPDelivery(limits: limits))
    }

    @Test func aMessageIsImportedOnceAndItsRetryIsADuplicate() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let served = try Served(Self.settings(.container(Array(scratch.container.rootBytes))))
        #expect(served.replies(1) == ["220 test LMTP inbox ready"])
        for attempt in ["imported: 1 attachment delivered", "duplicate: imported before"] {
            served.send("LHLO m\r\nMAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\n")
            #expect(served.replies(4).suffix(3).map { String($0.prefix(3)) } == ["250", "250", "354"])
            served.send(Self.message + ".\r\n")
            #expect(served.replies(1) == ["250 2.0.0 <me@x> \(attempt)"])
        }
        served.send("QUIT\r\n")
        #expect(served.replies(1).first?.hasPrefix("221 ") == true)
        #expect(served.hasEnded())
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.container.path(.inbox)) == ["r.pdf"])
        let imported = try scratch.inbox.log.records(kinds: [.imported])
        #expect(imported.map { $0.fields["source"] } == ["lmtp", "lmtp"])
        #expect(imported.map { $0.fields["duplicate"] } == ["false", "true"])
    }

    /// A session keeps its container open from one message to the next (its Inbox folder too), only while the
    /// container is the same files: after its Inbox is replaced, the next message goes into the new one.
    @Test func aSessionDeliversIntoTheInboxThatIsThereNowAfterItWasReplaced() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let served = try Served(Self.settings(.container(Array(scratch.container.rootBytes))))
        _ = served.replies(1)
        let inbox = scratch.container.path(.inbox)
        let second = Self.message.replacingOccurrences(of: "lmtp-1@", with: "lmtp-2@").replacingOccurrences(
            of: "r.pdf", with: "s.pdf")
        for (number, message) in [Self.message, second].enumerated() {
            served.send("LHLO m\r\nMAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\n" + message + ".\r\n")
            #expect(served.replies(5).last == "250 2.0.0 <me@x> imported: 1 attachment delivered", "\(number)")
            if number == 0 {
                try FileManager.default.moveItem(atPath: inbox, toPath: inbox + ".old")
                try FileManager.default.createDirectory(atPath: inbox, withIntermediateDirectories: false)
            }
        }
        served.send("QUIT\r\n")
        #expect(served.hasEnded())
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox + ".old") == ["r.pdf"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox) == ["s.pdf"])
    }

    /// A session writes each message into its last one's file: a shorter message after a longer one is itself
    /// alone (its key the same as from a session of its own, so the second delivery is a duplicate).
    @Test func aShorterMessageAfterALongerOneInOneSessionIsItselfAlone() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let settings = Self.settings(.container(Array(scratch.container.rootBytes)))
        let long = Self.message.replacingOccurrences(of: "hello", with: String(repeating: "long line\r\n", count: 2000))
        let short = Self.message.replacingOccurrences(of: "lmtp-1@", with: "lmtp-2@")
        let expected = [
            [long: "imported: 1 attachment delivered", short: "imported: 1 attachment delivered"],
            [short: "duplicate: imported before"],
        ]
        for (session, messages) in [[long, short], [short]].enumerated() {
            let served = try Served(settings)
            _ = served.replies(1)
            for message in messages {
                served.send("LHLO m\r\nMAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\n" + message + ".\r\n")
                #expect(served.replies(5).last == "250 2.0.0 <me@x> \(expected[session][message]!)", "\(session)")
            }
            served.send("QUIT\r\n")
            #expect(served.hasEnded())
        }
    }

    @Test func notAMessageIs554AndOverMaxBytes552EachWithItsRejectedRecord() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let served = try Served(
            Self.settings(.container(Array(scratch.container.rootBytes)), limits: MailLimits(maxBytes: 4)))
        _ = served.replies(1)
        served.send("LHLO m\r\nMAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\n")
        _ = served.replies(4)
        served.send("no header here\r\n.\r\n")
        #expect(served.replies(1).first?.hasPrefix("554 5.6.0 <me@x> not a message") == true)
        served.send("MAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\n" + Self.message + ".\r\n")
        let replies = served.replies(4)
        #expect(replies.last == "552 5.3.4 <me@x> refused: attachments over --max-bytes 4", "\(replies)")
        #expect(try scratch.inbox.log.records(kinds: [.rejected]).count == 2)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.container.path(.inbox)).isEmpty)
    }

    /// A delivery waits for the import's lock as `import -` does, 5 s at most ("Nothing blocks an MTA"): then 451,
    /// naming who holds it, and the MTA tries again later; nothing is delivered.
    @Test func aLockHeldPastTheDeliveryBoundIs451NamingItsHolder() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let lock = open(scratch.container.path(.applicationSupport) + "/inbox/import.lock", O_RDWR | O_CREAT, 0o600)
        #expect(lock >= 0 && flock(lock, LOCK_EX) == 0)
        defer { close(lock) }
        let served = try Served(Self.settings(.container(Array(scratch.container.rootBytes))))
        _ = served.replies(1)
        served.send("LHLO m\r\nMAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\n" + Self.message + ".\r\n")
        let reply = served.replies(5).last ?? ""
        #expect(reply.hasPrefix("451 4.3.0 <me@x> cannot lock") && reply.contains("within 5 s"), "\(reply)")
        #expect(reply.contains("pid \(getpid())"), "\(reply)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.container.path(.inbox)).isEmpty)
    }

    @Test func aSessionIdleTooLongIsClosedWith421() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        var settings = Self.settings(.container(Array(scratch.container.rootBytes)))
        settings.idle = .milliseconds(50)
        let served = try Served(settings)
        #expect(
            served.replies(2) == ["220 test LMTP inbox ready", "421 4.4.2 test idle too long, closing the session"])
        #expect(served.hasEnded())
    }

    /// Replies more than the socket takes at once (a pipelining peer that reads them later) are sent in parts, each
    /// once the peer has read the one before: none is lost and the session goes on.
    @Test func repliesPastTheSocketBufferWaitForThePeerToRead() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let served = try Served(Self.settings(.container(Array(scratch.container.rootBytes))), sendBuffer: 1)
        #expect(served.replies(1) == ["220 test LMTP inbox ready"])
        let count = 3000
        served.send(String(repeating: "NOOP\r\n", count: count) + "QUIT\r\n")
        let replies = served.replies(count + 1)
        #expect(replies.count == count + 1)
        #expect(replies.dropLast().allSatisfy { $0.hasPrefix("250 ") } && replies.last?.hasPrefix("221 ") == true)
        #expect(served.hasEnded())
    }

    /// SIGTERM's stop: a session waiting for a command gets 421 at once; one inside the data reads it to its end,
    /// answers it, then gets 421.
    @Test func aStopClosesAWaitingSessionAtOnceAndOneInsideTheDataAfterItsAnswer() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let settings = Self.settings(.container(Array(scratch.container.rootBytes)))
        let waiting = try Served(settings)
        let inData = try Served(settings)
        _ = waiting.replies(1)
        _ = inData.replies(1)
        inData.send("LHLO m\r\nMAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\nSubject: half\r\n")
        #expect(inData.replies(4).last?.hasPrefix("354 ") == true)
        for served in [waiting, inData] { _ = write(served.stop.write, "x", 1) }
        #expect(waiting.replies(1) == ["421 4.3.2 test shutting down"])
        #expect(waiting.hasEnded())
        inData.send("\r\nbody\r\n.\r\n")
        #expect(
            inData.replies(2) == [
                "250 2.0.0 <me@x> no attachments: nothing to deliver", "421 4.3.2 test shutting down",
            ])
        #expect(inData.hasEnded())
    }

    /// Under `--root`, a recipient names the container `DIR/NAME` (up to its first `+`): 550 for a name that
    /// cannot be one or names none, 451 when the root cannot be read.
    @Test func aRecipientUnderTheRootIsLookedUpAtRCPT() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let root = Array(scratch.path.utf8)
        try FileManager.default.createDirectory(atPath: scratch.path + "/plain", withIntermediateDirectories: false)
        let recipients = LMTPRecipients.root(root)
        #expect(recipients.lookUp(Array("c+inbox".utf8)) == .accepted(container: root + Array("/c".utf8)))
        #expect(recipients.lookUp(Array("c".utf8)) == .accepted(container: root + Array("/c".utf8)))
        for name in ["nobody", "plain", ".hidden", "", "+x", "a/b", "bad\u{FF}"] {
            let verdict = recipients.lookUp(name == "bad\u{FF}" ? Array("bad".utf8) + [0xFF] : Array(name.utf8))
            guard case .unknown = verdict else {
                Issue.record("\(name): \(verdict)")
                continue
            }
        }
        let missing = LMTPRecipients.root(root + Array("/missing".utf8))
        guard case .failed = missing.lookUp(Array("c".utf8)) else {
            Issue.record("a missing root is a failure to look, 451")
            return
        }
        #expect(try recipients.count() == 1)
    }

    /// Postfix hands a message for several of inbox's recipients over in one transaction: the one data file is
    /// imported into each recipient's container, each reply its own.
    @Test func oneMessageForTwoRecipientsLandsInBothContainers() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let second = try Container.create(at: scratch.path + "/d")
        let served = try Served(Self.settings(.root(Array(scratch.path.utf8))))
        #expect(served.replies(1) == ["220 test LMTP inbox ready"])
        served.send("LHLO m\r\nMAIL FROM:<a@x>\r\nRCPT TO:<c+inbox@x>\r\nRCPT TO:<d+inbox@x>\r\nDATA\r\n")
        #expect(served.replies(5).suffix(4).map { String($0.prefix(3)) } == ["250", "250", "250", "354"])
        served.send(Self.message + ".\r\n")
        #expect(
            served.replies(2) == [
                "250 2.0.0 <c+inbox@x> imported: 1 attachment delivered",
                "250 2.0.0 <d+inbox@x> imported: 1 attachment delivered",
            ])
        for container in [scratch.container, second] {
            let inbox = container.path(.inbox)
            #expect(try FileManager.default.contentsOfDirectory(atPath: inbox) == ["r.pdf"], "\(inbox)")
            #expect(
                FileManager.default.contents(atPath: inbox + "/r.pdf")
                    == Data(base64Encoded: "JVBERi0xLjQKJcOkw7zDtsOfCg=="), "\(inbox)")
        }
    }
}
