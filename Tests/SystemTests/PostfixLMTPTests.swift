import Foundation
import Glibc
import TestSupport
import Testing

/// Postfix delivering inbox's copy over LMTP, in the booted tree, as README.md, "Mail import", sets it up: the BCC
/// map's `USER+inbox` routed by `transport_maps` to the package's socket unit (`private/inbox-lmtp`), served by
/// `inbox lmtp --root /var/lib/inbox` as the account `inbox`; each recipient's reply is `import -`'s outcome
/// (ARCHITECTURE.md, "LMTP").
extension BootedTreeTests {
    @Suite struct PostfixLMTPTests {
        static let service = "inbox-lmtp.service"

        /// A test user whose inbox copy goes over LMTP, with its container (`/var/lib/inbox/NAME`, the account
        /// `inbox`'s) made unless `container` is false.
        static func user(_ name: String, container: Bool = true) throws -> (MailUser, String) {
            let user = try MailUser(name)
            let tree = user.tree
            try tree.mustRun(["systemctl", "start", "inbox-lmtp.socket"])
            let path = "/var/lib/inbox/" + name
            try tree.mustRun(["rm", "-rf", path])
            if container { try tree.mustRun(["inbox", "--container", path, "init"], as: "inbox") }
            return (user, path)
        }

        /// Replaces the service's command line (a drop-in), or puts the shipped one back (nil), and restarts it: the
        /// socket stays, so Postfix notices nothing.
        static func serve(_ arguments: String?, in tree: BootedTree) throws {
            let folder = "/etc/systemd/system/\(service).d"
            try tree.mustRun(["rm", "-rf", folder])
            if let arguments {
                try tree.mustRun(["mkdir", "-p", folder])
                try tree.mustRun(
                    ["sh", "-c", "cat > \(folder)/test.conf"],
                    input: "[Service]\nExecStart=\nExecStart=/usr/bin/inbox lmtp \(arguments)\n")
            }
            try tree.mustRun(["systemctl", "daemon-reload"])
            try tree.mustRun(["systemctl", "restart", service])
        }

        @Test func theAttachmentsLandOnceAndTheMailboxKeepsTheMessage() throws {
            let (user, container) = try Self.user("inbox-lmtp-mail")
            let (id, text, digest) = Postfix.messageWithOneAttachment("lmtp", seed: 1)

            try Postfix.send(text, to: user.address)

            let delivery = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            let outcome = try #require(delivery.outcomes[user.inboxAddress]?.first)
            #expect(outcome.hasPrefix("sent") && outcome.contains("250 2.0.0"), "\(outcome)")
            #expect(delivery.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(try MailFixtures.contents(user.tree.path(container)) == [digest])
            #expect(try user.mailboxMessages().count == 1)
            let imported = logRecords(user.tree.path(container), event: "imported")
            #expect(imported.map { $0["source"] as? String } == ["lmtp"], "\(imported)")
        }

        /// Under `--root`, a recipient with no container there is refused at RCPT (550 5.1.1): Postfix bounces inbox's
        /// copy at once, and the mailbox copy is delivered as ever.
        @Test func aRecipientWithoutAContainerIsRefusedAndTheMailboxCopyIsUntouched() throws {
            let (user, container) = try Self.user("inbox-lmtp-none", container: false)
            let (id, text, _) = Postfix.messageWithOneAttachment("none", seed: 2)

            try Postfix.send(text, to: user.address)

            let delivery = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            let outcome = try #require(delivery.outcomes[user.inboxAddress]?.first)
            #expect(outcome.hasPrefix("bounced") && outcome.contains("550 5.1.1"), "\(outcome)")
            #expect(delivery.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(try user.mailboxMessages().count == 1)
            #expect(!FileManager.default.fileExists(atPath: user.tree.path(container)), "nothing made for it")
        }

        /// The same message sent twice is two deliveries to Postfix and one to the Inbox: the second is answered 250
        /// as a duplicate.
        @Test func aMessageSentTwiceDeliversItsAttachmentOnce() throws {
            let (user, container) = try Self.user("inbox-lmtp-twice")
            let (id, text, digest) = Postfix.messageWithOneAttachment("twice", seed: 3)

            try Postfix.send(text, to: user.address)
            _ = try Postfix.awaitDelivery(of: id, to: [user.inboxAddress])
            try Postfix.send(text, to: user.address)
            let second = try Postfix.awaitDelivery(of: id, count: 2, to: [user.inboxAddress])

            #expect(second.outcomes[user.inboxAddress]?.first?.hasPrefix("sent") == true, "\(second.outcomes)")
            #expect(try MailFixtures.contents(user.tree.path(container)) == [digest])
            let imported = logRecords(user.tree.path(container), event: "imported")
            #expect(imported.map { $0["duplicate"] as? Bool ?? false } == [false, true], "\(imported)")
        }

        /// Over `--max-bytes`: 552 5.3.4 naming the limit, so Postfix bounces inbox's copy, with a `rejected` record;
        /// the mailbox copy is delivered.
        @Test func aMessageOverTheLimitIsBouncedNamingIt() throws {
            let (user, container) = try Self.user("inbox-lmtp-big")
            try Self.serve("--root /var/lib/inbox --max-bytes 1K", in: user.tree)
            defer { _ = try? Self.serve(nil, in: user.tree) }
            let (id, text, _) = Postfix.messageWithOneAttachment("big", seed: 4, size: 4096)

            try Postfix.send(text, to: user.address)

            let delivery = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            let outcome = try #require(delivery.outcomes[user.inboxAddress]?.first)
            #expect(outcome.hasPrefix("bounced") && outcome.contains("552 5.3.4"), "\(outcome)")
            #expect(outcome.contains("--max-bytes"), "\(outcome)")
            #expect(delivery.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(delivery.outcomes)")
            #expect(try MailFixtures.contents(user.tree.path(container)).isEmpty)
            #expect(logRecords(user.tree.path(container), event: "rejected").count == 1)
        }

        /// With `--container` and no container there yet, `inbox lmtp` cannot serve (73): Postfix keeps inbox's copy
        /// (deferred) while the mailbox has its own, and delivers it once after `inbox init` and `postqueue -f`.
        @Test func withNoContainerYetPostfixKeepsTheCopyUntilThereIsOne() throws {
            let (user, _) = try Self.user("inbox-lmtp-solo", container: false)
            let tree = user.tree
            let container = "/var/lib/inbox/solo"
            try tree.mustRun(["rm", "-rf", container])
            let folder = "/etc/systemd/system/\(Self.service).d"
            try tree.mustRun(["mkdir", "-p", folder])
            try tree.mustRun(
                ["sh", "-c", "cat > \(folder)/test.conf"],
                input: "[Service]\nExecStart=\nExecStart=/usr/bin/inbox lmtp --container \(container)\n")
            try tree.mustRun(["systemctl", "daemon-reload"])
            try tree.mustRun(["systemctl", "stop", Self.service])
            defer { _ = try? Self.serve(nil, in: tree) }
            let (id, text, digest) = Postfix.messageWithOneAttachment("solo", seed: 5)

            try Postfix.send(text, to: user.address)

            let first = try Postfix.awaitDelivery(of: id, to: [user.address, user.inboxAddress])
            #expect(first.outcomes[user.inboxAddress]?.first?.hasPrefix("deferred") == true, "\(first.outcomes)")
            #expect(first.outcomes[user.address]?.first?.hasPrefix("sent") == true, "\(first.outcomes)")
            try tree.mustRun(["inbox", "--container", container, "init"], as: "inbox")
            try tree.mustRun(["systemctl", "reset-failed", Self.service, "inbox-lmtp.socket"])
            try tree.mustRun(["systemctl", "start", "inbox-lmtp.socket"])
            try Postfix.flushQueue()
            let second = try Postfix.awaitDelivery(of: id, to: [user.inboxAddress], attempts: 2)
            #expect(second.outcomes[user.inboxAddress]?.last?.hasPrefix("sent") == true, "\(second.outcomes)")
            #expect(try MailFixtures.contents(tree.path(container)) == [digest])
            #expect(try user.mailboxMessages().count == 1)
        }

        /// `kill -9` of `inbox lmtp` while Postfix delivers 200 messages: systemd starts it again on the same socket,
        /// Postfix retries what it was not answered (`postqueue -f`), and each attachment is in the Inbox once.
        @Test func killedWhileDelivering200MessagesEachAttachmentLandsOnce() throws {
            let (user, container) = try Self.user("inbox-lmtp-crash")
            let tree = user.tree
            let messages = (0..<200).map { Postfix.messageWithOneAttachment("crash", seed: 1000 + $0) }

            // All 200 queued first (deferred while the socket is closed), then handed over at once: the kill comes
            // in the middle of the deliveries, not after them.
            try tree.mustRun(["systemctl", "stop", "inbox-lmtp.socket", Self.service])
            for message in messages { try Postfix.send(message.text, to: user.address) }
            let queued = tree.waitUntil(timeout: 120) {
                ((try? tree.run(["postqueue", "-j"]).lines.count) ?? 0) >= messages.count
            }
            try #require(queued, "Postfix did not queue the 200 messages for inbox")
            try tree.mustRun(["systemctl", "start", "inbox-lmtp.socket"])
            try tree.mustRun(["postqueue", "-f"])
            let inbox = tree.path(container + "/Documents/Inbox")
            let started = tree.waitUntil(timeout: 120) {
                ((try? FileManager.default.contentsOfDirectory(atPath: inbox)) ?? []).filter { !$0.hasPrefix(".") }
                    .count >= 20
            }
            try #require(started, "Postfix did not start delivering over LMTP")
            let killed = try tree.property("MainPID", of: Self.service)
            try tree.mustRun(["sh", "-c", "kill -9 \"$1\"", "kill", killed])
            let deliveredBefore = try FileManager.default.contentsOfDirectory(atPath: inbox).filter {
                !$0.hasPrefix(".")
            }.count
            // What is left reaches the Inbox only if systemd brings the service back on its socket.
            #expect(deliveredBefore < messages.count, "the kill came after every message was delivered")

            // Done once Postfix's queue is empty: each message answered 250 (or bounced, which the contents show).
            let done = tree.waitUntil(timeout: 300) {
                _ = try? tree.run(["postqueue", "-f"])
                let queue = (try? tree.run(["postqueue", "-j"]).stdoutText) ?? "?"
                if !queue.isEmpty { usleep(500_000) }
                return queue.isEmpty
            }
            #expect(done, "Postfix still holds messages for inbox")
            #expect(try MailFixtures.contents(tree.path(container)) == messages.map(\.sha256).sorted())
        }
    }
}
