import Foundation
import Glibc
import TestSupport
import Testing

/// Real mail through a real MTA, in the booted tree (never this machine's Postfix): Debian's Postfix delivers each
/// message to the user's mailbox and, to a recipient of inbox's own, through the installed `inbox import -`, which
/// must never cost the user a message: 0 done, 65 the message's own fault (bounced), 75 anything else (kept and tried
/// again) (README.md and ARCHITECTURE.md, "Mail import").
extension BootedTreeTests {
    @Suite struct PostfixDeliveryTests {
        /// `MailFixtures.message` (three attachments, one in a forwarded message) under a Message-ID of this run.
        static func message(_ tag: String) -> (id: String, text: String) {
            let id = "\(tag)-\(UUID().uuidString)@inbox-test"
            // With a `Date:` of its own, as mail has: Postfix adds one at each submission otherwise, and a message sent
            // twice a second apart would be two messages.
            let date = "Date: Fri, 04 Dec 2026 09:00:00 +0000"
            let text = MailFixtures.message.replacingOccurrences(
                of: "Message-ID: <report-1@example.org>", with: "\(date)\nMessage-ID: <\(id)>")
            return (id, text)
        }

        /// The SHA-256 of each attachment of `text`, as the oracle (Python's `email` package) finds them, sorted.
        static func attachmentDigests(_ text: String) throws -> [String] {
            let path = NSTemporaryDirectory() + "inbox-postfix-\(UUID().uuidString).eml"
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            defer { unlink(path) }
            return try MailFixtures.oracle(path).compactMap { $0["sha256"] as? String }.sorted()
        }

        @Test func theMailLandsInTheMailboxAndItsAttachmentsInTheInbox() throws {
            let user = try MailUser("inbox-mta-mail")
            try user.forwardToInbox()
            try user.initContainer()
            let (id, text) = Self.message("lands")
            let expected = try Self.attachmentDigests(text)
            #expect(expected.count == 3)

            try Postfix.send(text, to: user.address)

            let delivery = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            #expect(delivery.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(delivery.outcomes[user.inboxAddress]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(try MailFixtures.contents(user.containerHere) == expected)
            let mailbox = try user.mailboxMessages()
            #expect(mailbox.count == 1, "the mailbox keeps the whole message: \(mailbox.text)")
            #expect(mailbox.text.contains("Message-ID: <\(id)>") && mailbox.text.contains("See attached."))
            #expect(logRecords(user.containerHere, event: "imported").map { $0["attachments"] as? Int } == [3])
        }

        @Test func aMessageWithoutAttachmentsIsDeliveredToTheMailboxAndLeavesNothingInTheInbox() throws {
            let user = try MailUser("inbox-mta-plain")
            try user.forwardToInbox()
            try user.initContainer()
            let id = "plain-\(UUID().uuidString)@inbox-test"
            let text = """
                From: Alice <alice@example.org>
                To: bob@example.org
                Subject: just words
                Message-ID: <\(id)>

                No attachment here.

                """

            try Postfix.send(text, to: user.address)

            let delivery = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            #expect(delivery.outcomes[user.inboxAddress]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(delivery.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(try MailFixtures.contents(user.containerHere).isEmpty)
            let mailbox = try user.mailboxMessages()
            #expect(mailbox.count == 1 && mailbox.text.contains("No attachment here."), "\(mailbox.text)")
        }

        /// With no container yet, inbox's copy is a fault of the installation: Postfix keeps it (75) while the mailbox
        /// has its own, and delivers it once the container is there.
        @Test func withNoContainerYetPostfixKeepsInboxsCopyUntilThereIsOne() throws {
            let user = try MailUser("inbox-mta-later")
            try user.forwardToInbox()
            let (id, text) = Self.message("later")

            try Postfix.send(text, to: user.address)

            let first = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            #expect(first.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(first.outcomes)")
            try #require(
                first.outcomes[user.inboxAddress]?.first?.hasPrefix("deferred") == true,
                "inbox's copy must be kept for a retry, not bounced: \(first.outcomes)")

            try user.initContainer()
            try Postfix.flushQueue()

            let retried = try Postfix.awaitDelivery(of: id, to: [user.inboxAddress], attempts: 2)
            #expect(retried.outcomes[user.inboxAddress]?.last?.hasPrefix("sent") == true, "\(retried.outcomes)")
            #expect(try MailFixtures.contents(user.containerHere) == Self.attachmentDigests(text))
            #expect(logRecords(user.containerHere, event: "imported").map { $0["duplicate"] as? Bool } == [false])
            #expect(try user.mailboxMessages().count == 1, "the retry is inbox's copy alone")
        }

        /// The same message sent twice reaches inbox with other `Received` and `Delivered-To` lines: a duplicate.
        @Test func aMessageSentTwiceDeliversItsAttachmentsOnce() throws {
            let user = try MailUser("inbox-mta-twice")
            try user.forwardToInbox()
            try user.initContainer()
            let (id, text) = Self.message("twice")

            for count in 1...2 {
                try Postfix.send(text, to: user.address)
                let delivery = try Postfix.awaitDelivery(of: id, count: count, to: [user.address, user.inboxAddress])
                #expect(delivery.outcomes[user.inboxAddress]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            }

            #expect(try MailFixtures.contents(user.containerHere) == Self.attachmentDigests(text))
            let imported = logRecords(user.containerHere, event: "imported")
            #expect(imported.map { $0["duplicate"] as? Bool } == [false, true], "\(imported)")
            #expect(Set(imported.compactMap { $0["message_sha256"] as? String }).count == 1)
            #expect(try user.mailboxMessages().count == 2, "the mailbox has each message sent")
        }

        /// The import index is a cache of the event log: garbage in its place neither bounces mail nor lets a message
        /// the log holds be imported twice.
        @Test func aDamagedIndexIsRebuiltAndNothingIsBounced() throws {
            let user = try MailUser("inbox-mta-index")
            try user.forwardToInbox()
            try user.initContainer()
            let (firstID, first) = Self.message("index-first")
            try Postfix.send(first, to: user.address)
            _ = try Postfix.awaitDelivery(of: firstID, to: [user.inboxAddress])
            let index = user.containerHere + "/Library/Application Support/inbox/import.sqlite"
            try #require(FileManager.default.fileExists(atPath: index), "the first import made the index")
            try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: index))

            let (secondID, second) = Self.message("index-second")
            try Postfix.send(second, to: user.address)
            let delivery = try Postfix.awaitDelivery(of: secondID, to: [user.inboxAddress])
            try Postfix.send(first, to: user.address)
            let again = try Postfix.awaitDelivery(of: firstID, count: 2, to: [user.inboxAddress])

            #expect(delivery.outcomes[user.inboxAddress]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(again.outcomes[user.inboxAddress]?.first?.hasPrefix("sent") == true, "\(again.outcomes)")
            let expected = try (Self.attachmentDigests(first) + Self.attachmentDigests(second)).sorted()
            #expect(try MailFixtures.contents(user.containerHere) == expected)
            let imported = logRecords(user.containerHere, event: "imported")
            #expect(imported.map { $0["duplicate"] as? Bool } == [false, false, true], "\(imported)")
            let support = try FileManager.default.contentsOfDirectory(
                atPath: user.containerHere + "/Library/Application Support/inbox")
            #expect(
                support.contains { $0.hasPrefix("import.sqlite.damaged-") },
                "the damaged index is set aside: \(support)")
        }

        /// A message over `--max-bytes` is the message's own fault: bounced, with one line that names the limit, and
        /// the sender is not told (a BCC recipient), while the mailbox has it.
        @Test func aMessageOverTheLimitIsBouncedWithOneLineNamingIt() throws {
            let user = try MailUser("inbox-mta-big")
            try user.forwardToInbox(["--max-bytes", "1K"])
            try user.initContainer()
            let (id, text, _) = Postfix.messageWithOneAttachment("big", seed: 0, size: 4096)

            try Postfix.send(text, to: user.address)

            let delivery = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            let outcome = try #require(delivery.outcomes[user.inboxAddress]?.first)
            #expect(outcome.hasPrefix("bounced"), "\(outcome)")
            let output = try #require(
                outcome.range(of: "Command output: ").map { outcome[$0.upperBound...] }, "\(outcome)")
            #expect(output.contains("over --max-bytes 1K"), "\(output)")
            #expect(output.components(separatedBy: "inbox:").count == 2, "one line, once: \(output)")
            #expect(try Postfix.notifiedSender(delivery.queueID) == false)
            #expect(delivery.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(try user.mailboxMessages().count == 1)
            #expect(try MailFixtures.contents(user.containerHere).isEmpty)
            #expect(logRecords(user.containerHere, event: "rejected").count == 1)
        }

        /// procmail's `c` flag copies the message to inbox inside one delivery: the mailbox keeps it, and a failure of
        /// inbox is only logged (procmail's LOGFILE, with `w`: procmail waits for inbox's exit), never retried.
        @Test func procmailKeepsTheMailAndLogsAFailureOfInbox() throws {
            let user = try MailUser(Postfix.procmailUser)
            let procmailLog = user.home + "/procmail.log"
            let procmailLogHere = user.tree.path(procmailLog)
            if FileManager.default.fileExists(atPath: procmailLogHere) {
                try FileManager.default.removeItem(atPath: procmailLogHere)
            }
            try user.write(".forward", "\"|/usr/bin/procmail\"\n")
            try user.write(".procmailrc", "LOGFILE=\(procmailLog)\n:0 cw\n| \(user.importCommand())\n")
            let (id, text) = Self.message("procmail")

            try Postfix.send(text, to: user.address)

            let delivery = try Postfix.awaitDelivery(of: id, to: [user.address])
            #expect(delivery.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            let mailbox = try user.mailboxMessages()
            #expect(mailbox.count == 1 && mailbox.text.contains("Message-ID: <\(id)>"), "\(mailbox.text)")
            let logged = String(
                decoding: FileManager.default.contents(atPath: procmailLogHere) ?? Data(), as: UTF8.self)
            #expect(
                logged.contains("Program failure (75)"), "no container: inbox exits 75, as procmail logs: \(logged)")
        }
    }
}
