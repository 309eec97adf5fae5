import Foundation
import Glibc
import TestSupport
import Testing

/// Debian's Postfix in the booted tree (never this machine's), set up once for the tests: local delivery only, with
/// inbox as a recipient of its own beside each test user's mailbox, as README.md, "Mail import", shows it:
/// `recipient_bcc_maps` copies `USER@localhost` to `USER+inbox@localhost`, whose `~/.forward+inbox` pipes it to the
/// installed `inbox import -`. Postfix's local(8) runs that pipe as the user, so each test has an ordinary user of
/// its own, made in the tree, and no test sees another's mail.
enum Postfix {
    /// Postfix's own log in the tree (its `postlog` service), where a test reads what became of its message.
    static let log = "/var/log/inbox-test-postfix.log"
    /// The package's `inbox`, as the tree has it installed.
    static let inbox = "/usr/bin/inbox"
    /// The users the tests receive mail as, one a test, each with inbox as a recipient of its own.
    static let users =
        [
            "inbox-mta-mail", "inbox-mta-plain", "inbox-mta-later", "inbox-mta-twice", "inbox-mta-index",
            "inbox-mta-big",
        ] + lmtpUsers
    /// The users whose inbox copy Postfix delivers over LMTP (`transport_maps`), to the package's socket unit.
    static let lmtpUsers = [
        "inbox-lmtp-mail", "inbox-lmtp-none", "inbox-lmtp-twice", "inbox-lmtp-big", "inbox-lmtp-crash",
        "inbox-lmtp-solo",
    ]
    /// A user whose mail procmail delivers, with no recipient for inbox.
    static let procmailUser = "inbox-mta-procmail"

    /// The tree with Postfix configured and running and the users made: done once, for every test.
    static let ready = Result { try setUp(try BootedTree.shared.get()) }

    /// The settings the tests need and nothing more (`postconf -e`): local delivery on loopback, nothing relayed,
    /// each test user's mail copied to `USER+inbox`, and a log of its own.
    static var settings: [String] {
        let copies = users.map { "\($0)@localhost=\($0)+inbox@localhost" }.joined(separator: ", ")
        // README.md, "Mail import": inbox's copy to the socket inbox-lmtp.socket makes in Postfix's private/.
        let lmtp = lmtpUsers.map { "\($0)+inbox@localhost=lmtp:unix:private/inbox-lmtp" }.joined(separator: ", ")
        return [
            "inet_interfaces = loopback-only", "myorigin = localhost", "mydestination = localhost", "relayhost =",
            "default_transport = error", "recipient_delimiter = +", "recipient_bcc_maps = inline:{ \(copies) }",
            "maillog_file = \(log)",
            "transport_maps = inline:{ \(lmtp) }",
        ]
    }

    /// The tree is unpacked afresh for each run and thrown away after it: nothing to restore, no mail left queued.
    private static func setUp(_ tree: BootedTree) throws -> BootedTree {
        for user in users + [procmailUser] {
            try tree.mustRun(["useradd", "--create-home", "--shell", "/bin/sh", user])
        }
        try tree.mustRun(["postconf", "-e"] + settings)
        // Postfix 3.4 and later write maillog_file through the postlog service; Debian's master.cf has it.
        if try tree.mustRun(["postconf", "-M", "postlog/unix-dgram"]).stdout.isEmpty {
            try tree.mustRun(["postconf", "-Me", "postlog/unix-dgram=postlog unix-dgram n - n - 1 postlogd"])
        }
        // A new inet_interfaces needs a restart, not a reload.
        try tree.mustRun(["systemctl", "restart", "postfix"])
        try tree.mustRun(["postfix", "status"])
        return tree
    }

    /// A message with one attachment of its own (`seed` makes its bytes), under a Message-ID of this run.
    static func messageWithOneAttachment(_ tag: String, seed: Int, size: Int = 2048) -> (
        id: String, text: String, sha256: String
    ) {
        let id = "\(tag)-\(UUID().uuidString)@inbox-test"
        let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: ($0 &+ seed) &* 2_654_435_761 >> 13) })
        let text = """
            From: Alice <alice@example.org>
            To: bob@example.org
            Subject: over LMTP \(seed)
            Date: Fri, 04 Dec 2026 09:00:00 +0000
            Message-ID: <\(id)>
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="b"

            --b
            Content-Type: text/plain

            One file attached.
            --b
            Content-Type: application/octet-stream
            Content-Disposition: attachment; filename="file-\(seed).bin"
            Content-Transfer-Encoding: base64

            \(bytes.base64EncodedString(options: [.lineLength76Characters, .endLineWithLineFeed]))
            --b--

            """
        return (id, text, MailFixtures.sha256(bytes))
    }

    /// Sends `message` from `sender@localhost` to `recipient` with the tree's Postfix sendmail.
    static func send(_ message: String, to recipient: String) throws {
        try ready.get().mustRun(["sendmail", "-f", "sender@localhost", recipient], input: message)
    }

    /// Asks Postfix to try every deferred message again now.
    static func flushQueue() throws {
        try ready.get().mustRun(["postqueue", "-f"])
    }

    /// The queue ids of the messages whose `Message-ID` is `messageID`, in the order Postfix took them.
    static func queueIDs(messageID: String) throws -> [String] {
        try logLines().compactMap { line in
            guard let end = line.range(of: ": message-id=<\(messageID)>")?.lowerBound else { return nil }
            return line[..<end].split(separator: " ").last.map(String.init)
        }
    }

    /// What became of each delivery of message `queueID` to `recipient`, in order: the text from `status=` on
    /// (`sent (delivered to command: …)`, `deferred (…)`, `bounced (…)`).
    static func outcomes(_ queueID: String, to recipient: String) throws -> [String] {
        try logLines().compactMap { line in
            guard line.contains(" \(queueID): to=<\(recipient)>,"), let status = line.range(of: "status=") else {
                return nil
            }
            return String(line[status.upperBound...])
        }
    }

    /// Waits until Postfix has taken `count` messages of `messageID` and tried each of `recipients` `attempts`
    /// times for the last of them; returns that message's queue id and each recipient's outcomes.
    static func awaitDelivery(
        of messageID: String, count: Int = 1, to recipients: [String], attempts: Int = 1
    ) throws -> (queueID: String, outcomes: [String: [String]]) {
        var queueID = ""
        var outcomes: [String: [String]] = [:]
        let done = try ready.get().waitUntil(timeout: 60) {
            let ids = try queueIDs(messageID: messageID)
            guard ids.count >= count else { return false }
            queueID = ids[count - 1]
            outcomes = try Dictionary(uniqueKeysWithValues: recipients.map { ($0, try self.outcomes(queueID, to: $0)) })
            return outcomes.values.allSatisfy { $0.count >= attempts }
        }
        try #require(done, "Postfix did not deliver \(messageID) to \(recipients) in time: \(outcomes)")
        return (queueID, outcomes)
    }

    /// Whether Postfix sent the sender of message `queueID` a notice, once it is done with the message (the
    /// notice is logged before the message's `removed`).
    static func notifiedSender(_ queueID: String) throws -> Bool {
        let removed = try ready.get().waitUntil(timeout: 60) {
            try logLines().contains { $0.hasSuffix(" \(queueID): removed") }
        }
        try #require(removed, "Postfix did not finish with \(queueID) in time")
        return try logLines().contains { $0.contains(" \(queueID): sender ") && $0.contains("notification") }
    }

    private static func logLines() throws -> [String] {
        guard let data = FileManager.default.contents(atPath: try ready.get().path(log)) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}

/// A test user in the tree that receives mail through its Postfix, with a mailbox (`/var/mail/USER`) and a container
/// in its home. Paths are the tree's; the tests reach its files from here through `tree.path`.
struct MailUser {
    let tree: BootedTree
    let name: String
    /// The user's ids in the tree (its `/etc/passwd`, not this machine's).
    let uid: uid_t
    let gid: gid_t
    let home: String
    var address: String { name + "@localhost" }
    /// The recipient Postfix's BCC map adds, whose `~/.forward+inbox` pipes to inbox.
    var inboxAddress: String { name + "+inbox@localhost" }
    var mailbox: String { "/var/mail/" + name }
    var container: String { home + "/mail-app" }
    /// The host's path of the container.
    var containerHere: String { tree.path(container) }

    /// User `name` of `Postfix.users` (or `Postfix.procmailUser`), fresh for a test: no container, an empty
    /// mailbox (the user's and group mail's, as `useradd` makes it).
    init(_ name: String) throws {
        tree = try Postfix.ready.get()
        precondition((Postfix.users + [Postfix.procmailUser]).contains(name), "\(name) is not a Postfix test user")
        self.name = name
        uid = try Self.number(tree.mustRun(["id", "-u", name]))
        gid = try Self.number(tree.mustRun(["id", "-g", name]))
        let entry = try Self.fields(tree.mustRun(["getent", "passwd", name]))
        home = try String(#require(entry.count == 7 ? entry[5] : nil, "getent passwd \(name): \(entry)"))
        let group = try Self.fields(tree.mustRun(["getent", "group", "mail"]))
        let mail = try Self.number(#require(group.count == 4 ? group[2] : nil, "getent group mail: \(group)"))
        if FileManager.default.fileExists(atPath: containerHere) {
            try FileManager.default.removeItem(atPath: containerHere)
        }
        let mailbox = tree.path(self.mailbox)
        try Data().write(to: URL(fileURLWithPath: mailbox))
        try #require(
            chown(mailbox, uid, mail) == 0 && chmod(mailbox, 0o660) == 0, "cannot hand \(mailbox) to \(name): \(errno)")
    }

    /// The fields of a line of `getent`, empty ones included.
    private static func fields(_ result: InboxProcess.Result) -> [Substring] {
        result.stdoutText.trimmingCharacters(in: .newlines).split(separator: ":", omittingEmptySubsequences: false)
    }

    private static func number(_ result: InboxProcess.Result) throws -> UInt32 {
        try number(result.stdoutText.trimmingCharacters(in: .newlines)[...])
    }

    private static func number(_ text: Substring) throws -> UInt32 {
        try #require(UInt32(text), "not a number: \(text)")
    }

    /// `inbox --container ~/mail-app import ARGS… -`, the command an MTA pipes the user's mail to.
    func importCommand(_ arguments: [String] = []) -> String {
        ([Postfix.inbox, "--container", container, "import"] + arguments + ["-"]).joined(separator: " ")
    }

    /// Writes `~/.forward+inbox` as README.md, "Mail import", shows it: inbox's copy piped to `importCommand`.
    func forwardToInbox(_ importArguments: [String] = []) throws {
        try write(".forward+inbox", "\"|\(importCommand(importArguments))\"\n")
    }

    /// Writes `contents` to `~/NAME`, owned by the user.
    func write(_ name: String, _ contents: String) throws {
        let path = tree.path(home + "/" + name)
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        try #require(
            chown(path, uid, gid) == 0 && chmod(path, 0o644) == 0, "cannot hand \(path) to \(self.name): \(errno)")
    }

    /// Makes the user's container: the installed `inbox init`, run as the user in the tree.
    func initContainer() throws {
        let result = try tree.run([Postfix.inbox, "--container", container, "init"], as: name)
        try #require(result.status == 0, "inbox init as \(name) failed: \(result.stderr)")
    }

    /// How many messages the user's mailbox holds, as Python's `mailbox` module reads it, and its text.
    func mailboxMessages() throws -> (count: Int, text: String) {
        let mailbox = tree.path(self.mailbox)
        guard let data = FileManager.default.contents(atPath: mailbox) else { return (0, "") }
        let script = TestPaths.oracle("mailbox_messages.py")
        let digests = try InboxProcess.run(
            [Array(script.utf8), Array("mbox".utf8), Array(mailbox.utf8)], executable: "/usr/bin/python3")
        try #require(digests.status == 0, "the mailbox oracle failed: \(digests.stderr)")
        return (digests.lines.count, String(decoding: data, as: UTF8.self))
    }
}
