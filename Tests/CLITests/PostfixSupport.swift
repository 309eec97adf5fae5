import Foundation
import Glibc
import Testing

/// Debian's Postfix on this machine, set up once for the tests: local delivery only, with inbox as a recipient of
/// its own beside each test user's mailbox, as README.md, "Mail import", shows it: `recipient_bcc_maps` copies
/// `USER@localhost` to `USER+inbox@localhost`, whose `~/.forward+inbox` pipes it to `inbox import -`. Postfix's
/// local(8) runs that pipe as the user, so each test has an ordinary user of its own (made when missing), and no
/// test sees another's mail, a message an earlier run left queued included.
enum Postfix {
    /// Postfix's own log (its `postlog` service), where a test reads what became of its message.
    static let log = "/var/log/inbox-test-postfix.log"
    /// The binaries any user may run (`SharedBinaries`).
    static var inbox: String { SharedBinaries.inbox }
    /// The users the tests receive mail as, one a test, each with inbox as a recipient of its own.
    static let users = [
        "inbox-mta-mail", "inbox-mta-plain", "inbox-mta-later", "inbox-mta-twice", "inbox-mta-index", "inbox-mta-big",
    ]
    /// A user whose mail procmail delivers, with no recipient for inbox.
    static let procmailUser = "inbox-mta-procmail"

    /// Whether the tests can run here: as root (to make users and configure Postfix), with Postfix installed.
    static var canRun: Bool {
        let tools = [
            "/usr/sbin/postfix", "/usr/sbin/sendmail", "/usr/bin/procmail", "/usr/bin/setpriv", "/usr/sbin/useradd",
        ]
        return getuid() == 0 && tools.allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Postfix configured and running, the users made and the binaries copied: done once, for every test.
    static let ready = Result { try setUp() }

    /// The settings the tests need and nothing more (`postconf -e`): local delivery on loopback, nothing relayed,
    /// each test user's mail copied to `USER+inbox`, and a log of its own.
    static var settings: [String] {
        let copies = users.map { "\($0)@localhost=\($0)+inbox@localhost" }.joined(separator: ", ")
        return [
            "inet_interfaces = loopback-only", "myorigin = localhost", "mydestination = localhost", "relayhost =",
            "default_transport = error", "recipient_delimiter = +", "recipient_bcc_maps = inline:{ \(copies) }",
            "maillog_file = \(log)",
        ]
    }

    private static func setUp() throws {
        for user in users + [procmailUser] where try run("/usr/bin/id", ["-u", user]).status != 0 {
            try mustRun("/usr/sbin/useradd", ["--create-home", "--shell", "/bin/sh", user])
        }
        _ = try SharedBinaries.ready()
        let restart = try mustRun("/usr/sbin/postconf", ["-h", "inet_interfaces"]).stdoutText != "loopback-only\n"
        try mustRun("/usr/sbin/postconf", ["-e"] + settings)
        // Postfix 3.4 and later write maillog_file through the postlog service; Debian's master.cf has it.
        if try mustRun("/usr/sbin/postconf", ["-M", "postlog/unix-dgram"]).stdout.isEmpty {
            try mustRun("/usr/sbin/postconf", ["-Me", "postlog/unix-dgram=postlog unix-dgram n - n - 1 postlogd"])
        }
        let running = try run("/usr/sbin/postfix", ["status"]).status == 0
        // A new inet_interfaces needs a restart; anything else a reload.
        if running && restart { try mustRun("/usr/sbin/postfix", ["stop"]) }
        try mustRun("/usr/sbin/postfix", [running && !restart ? "reload" : "start"])
        try dropQueuedMail()
    }

    /// Deletes from Postfix's queue every message to a test user (or its `+inbox`) that an earlier run left there.
    private static func dropQueuedMail() throws {
        let queue = try mustRun("/usr/sbin/postqueue", ["-j"])
        let everyone = users + [procmailUser]
        for line in queue.lines {
            guard let entry = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let id = entry["queue_id"] as? String, let recipients = entry["recipients"] as? [[String: Any]]
            else { continue }
            let names = recipients.compactMap {
                ($0["address"] as? String)?.split(whereSeparator: { "@+".contains($0) }).first
            }
            if names.contains(where: { everyone.contains(String($0)) }) {
                try mustRun("/usr/sbin/postsuper", ["-d", id])
            }
        }
    }

    /// Sends `message` from `sender@localhost` to `recipient` with Postfix's sendmail.
    static func send(_ message: String, to recipient: String) throws {
        try mustRun("/usr/sbin/sendmail", ["-f", "sender@localhost", recipient], input: message)
    }

    /// Asks Postfix to try every deferred message again now.
    static func flushQueue() throws {
        try mustRun("/usr/sbin/postqueue", ["-f"])
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
        let done = try waitUntil(timeout: 60, interval: 0.05) {
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
        let removed = try waitUntil(timeout: 60, interval: 0.05) {
            try logLines().contains { $0.hasSuffix(" \(queueID): removed") }
        }
        try #require(removed, "Postfix did not finish with \(queueID) in time")
        return try logLines().contains { $0.contains(" \(queueID): sender ") && $0.contains("notification") }
    }

    private static func logLines() throws -> [String] {
        guard let data = FileManager.default.contents(atPath: log) else { return [] }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Runs `program ARGS…` to the end.
    @discardableResult
    static func run(_ program: String, _ arguments: [String], input: String = "") throws -> InboxProcess.Result {
        try InboxProcess.run(arguments.map { Array($0.utf8) }, input: Array(input.utf8), executable: program)
    }

    /// Runs `program ARGS…` to the end and throws, with what it printed, unless it exits 0.
    @discardableResult
    static func mustRun(_ program: String, _ arguments: [String], input: String = "") throws -> InboxProcess.Result {
        let result = try run(program, arguments, input: input)
        guard result.status == 0 else {
            throw SetupFailure(
                "\(program) \(arguments.joined(separator: " ")) exited \(result.status): \(result.stderr)")
        }
        return result
    }

    struct SetupFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}

/// A test user that receives mail through Postfix, with a mailbox (`/var/mail/USER`) and a container in its home.
struct MailUser {
    let name: String
    let uid: uid_t
    let gid: gid_t
    let home: String
    var address: String { name + "@localhost" }
    /// The recipient Postfix's BCC map adds, whose `~/.forward+inbox` pipes to inbox.
    var inboxAddress: String { name + "+inbox@localhost" }
    var mailbox: String { "/var/mail/" + name }
    var container: String { home + "/mail-app" }

    /// User `name` of `Postfix.users` (or `Postfix.procmailUser`), fresh for a test: no container, an empty
    /// mailbox (the user's and group mail's, as `useradd` makes it).
    init(_ name: String) throws {
        try Postfix.ready.get()
        precondition((Postfix.users + [Postfix.procmailUser]).contains(name), "\(name) is not a Postfix test user")
        guard let entry = getpwnam(name) else { throw Postfix.SetupFailure("no user \(name)") }
        self.name = name
        uid = entry.pointee.pw_uid
        gid = entry.pointee.pw_gid
        home = String(cString: entry.pointee.pw_dir)
        if FileManager.default.fileExists(atPath: container) { try FileManager.default.removeItem(atPath: container) }
        try Data().write(to: URL(fileURLWithPath: mailbox))
        guard let mail = getgrnam("mail"), chown(mailbox, uid, mail.pointee.gr_gid) == 0, chmod(mailbox, 0o660) == 0
        else { throw Postfix.SetupFailure("cannot hand \(mailbox) to \(name): errno \(errno)") }
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
        let path = home + "/" + name
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        guard chown(path, uid, gid) == 0, chmod(path, 0o644) == 0 else {
            throw Postfix.SetupFailure("cannot hand \(path) to \(self.name): errno \(errno)")
        }
    }

    /// Makes the user's container: `inbox init`, run as the user.
    func initContainer() throws {
        let result = try Postfix.run(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(gid)", "--init-groups", Postfix.inbox, "--container", container, "init"])
        try #require(result.status == 0, "inbox init as \(name) failed: \(result.stderr)")
    }

    /// How many messages the user's mailbox holds, as Python's `mailbox` module reads it, and its text.
    func mailboxMessages() throws -> (count: Int, text: String) {
        guard let data = FileManager.default.contents(atPath: mailbox) else { return (0, "") }
        let script = #filePath.replacingOccurrences(
            of: "CLITests/PostfixSupport.swift", with: "Oracle/mailbox_messages.py")
        let digests = try Postfix.mustRun("/usr/bin/python3", [script, "mbox", mailbox])
        return (digests.lines.count, String(decoding: data, as: UTF8.self))
    }
}
