import Dispatch
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

/// `inbox import` killed at a system call (ARCHITECTURE.md, "Mail import", "The log never lies"): the next import
/// of any message, or a watcher's start, gives every attachment the crash left in the Inbox its `delivered` record,
/// and importing the mbox again delivers exactly the missing.
@Suite struct ImportCrashTests {
    static let messages = 64

    /// The attachments of message `index`: one, or two for every third message.
    static func attachments(_ index: Int) -> [String] {
        (0..<(index % 3 == 0 ? 2 : 1)).map { "file-\(index)-\($0).bin" }
    }

    static func message(_ index: Int, subject: String, attachments: [String]) -> String {
        let parts = attachments.map { name in
            """
            --b
            Content-Type: application/octet-stream; name="\(name)"
            Content-Disposition: attachment; filename="\(name)"

            content of \(name)

            """
        }
        return """
            From: Alice <alice@example.org>
            Subject: \(subject)
            Message-ID: <\(subject.replacingOccurrences(of: " ", with: "-"))@example.org>
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="b"

            --b
            Content-Type: text/plain

            body \(index)

            """ + parts.joined() + "--b--\n"
    }

    /// 64 messages, one placement batch.
    static let mbox = (0..<messages).map {
        "From alice@example.org Mon Jan  1 00:00:00 2024\n"
            + message($0, subject: "batch \($0)", attachments: attachments($0))
            + "\n"
    }.joined()

    /// A message of its own, whose import repairs what the crash left.
    static let other = message(999, subject: "other", attachments: ["other.bin"])

    static let expectedNames = Set((0..<messages).flatMap(attachments))

    /// Whether the crashed import left placing records in the index (`python3`'s sqlite3 reads it).
    static func placingRecords(_ container: String) throws -> Int {
        let python = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                """
                import sqlite3, sys, os
                path = sys.argv[1]
                if not os.path.exists(path): print(0); sys.exit()
                print(sqlite3.connect(path).execute('SELECT count(*) FROM parts WHERE delivered = 0').fetchone()[0])
                """,
                container + "/Library/Application Support/inbox/import.sqlite",
            ])
        return Int(python.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    /// The names in the Inbox, hidden staging files left out.
    static func inboxNames(_ container: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").filter {
            !$0.hasPrefix(".")
        }
    }

    /// The log never lies: each file in the Inbox has exactly one `delivered` record, and no such record names a
    /// file the Inbox does not hold.
    static func expectEachFileDeliveredOnce(_ container: String, _ context: String) throws {
        let names = try inboxNames(container)
        let delivered = logRecords(container, event: "delivered").compactMap { $0["path"] as? String }
        let counts = Dictionary(delivered.map { ($0, 1) }, uniquingKeysWith: +)
        #expect(
            counts == Dictionary(uniqueKeysWithValues: names.map { ("Documents/Inbox/" + $0, 1) }),
            "\(context): records \(counts.filter { $0.value != 1 || !names.contains(String($0.key.dropFirst(16))) })")
    }

    /// The calls a whole import of the mbox makes: the first call at which it is no longer killed, less one.
    static func callCount(_ folder: Scratch, _ mbox: String) throws -> Int {
        func killed(at call: Int) throws -> Bool {
            let container = folder.path + "/probe-\(call)"
            defer { try? FileManager.default.removeItem(atPath: container) }
            #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
            let run = try InboxProcess.run(
                "--container", container, "import", mbox, environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            return run.status == CrashSweep.killed
        }
        var high = 256
        while try killed(at: high) { high *= 2 }
        var low = high / 2
        while low + 1 < high {
            let middle = (low + high) / 2
            if try killed(at: middle) { low = middle } else { high = middle }
        }
        return low
    }

    /// Kills the import at `call`, repairs (by importing another message, or starting a watcher), checks the log,
    /// imports the mbox again and checks that each attachment is delivered once, with one record. Returns whether
    /// the crash left placing records, or nil when the import was not killed.
    static func crashRepairAndRetry(
        at call: Int, _ folder: String, _ mbox: String, _ other: String, expected: Set<String> = expectedNames,
        messages: Int = messages
    ) throws -> Bool? {
        let container = folder + "/crash-\(call)"
        defer { try? FileManager.default.removeItem(atPath: container) }
        let made = try InboxProcess.run("--container", container, "init", "--single-host")
        #expect(made.status == 0, "call \(call): \(made.stderr)")
        let crashed = try InboxProcess.run(
            "--container", container, "import", mbox, environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
        guard crashed.status == CrashSweep.killed else {
            #expect(crashed.status == 0, "call \(call): \(crashed.stderr)")
            return nil
        }
        let placing = try placingRecords(container) > 0
        // Half the crashes are repaired by a watcher's start, half by the import of another message.
        if call % 2 == 0 {
            let arguments = ["--container", container, "watch", "--once", "--on-arrival", "keep"]
            let watch = try InboxProcess.run((arguments + CrashPointTests.quickPoll).map { Array($0.utf8) })
            #expect(watch.status == 0, "call \(call): \(watch.stderr)")
            // Its repair comes before its start-up scan: each repaired record before the file's `arrived`.
            let records = logRecords(container)
            for repaired in records where repaired["event"] as? String == "delivered" && repaired["recovered"] != nil {
                let arrived = records.first {
                    $0["event"] as? String == "arrived" && $0["path"] as? String == repaired["path"] as? String
                }
                #expect(
                    ((repaired["seq"] as? Int) ?? .max) < ((arrived?["seq"] as? Int) ?? .max),
                    "call \(call): \(repaired) after its arrival")
            }
        } else {
            let repair = try InboxProcess.run("--container", container, "import", other)
            #expect(repair.status == 0, "call \(call): \(repair.stderr)")
        }
        try expectEachFileDeliveredOnce(container, "call \(call), repaired")
        let again = try InboxProcess.run("--container", container, "import", mbox)
        #expect(again.status == 0, "call \(call): \(again.stderr)")
        try expectEachFileDeliveredOnce(container, "call \(call), imported again")
        let names = Set(try inboxNames(container))
        #expect(names.subtracting(["other.bin"]) == expected, "call \(call): each attachment once")
        for name in names {
            let bytes = FileManager.default.contents(atPath: container + "/Documents/Inbox/" + name)
            #expect(bytes == Data("content of \(name)".utf8), "call \(call): \(name)")
        }
        let imported = logRecords(container, event: "imported").filter { $0["duplicate"] as? Bool == false }
        let keys = imported.compactMap { $0["message_sha256"] as? String }
        #expect(Set(keys).count == keys.count, "call \(call): one imported record a message")
        #expect(keys.count == messages + (call % 2 == 0 ? 0 : 1), "call \(call): every message imported")
        return placing
    }

    /// Runs `crashRepairAndRetry` at each call, a few at once; the outcomes by call.
    static func crashRepairAndRetry(
        at calls: [Int], _ folder: String, _ mbox: String, _ other: String, expected: Set<String> = expectedNames,
        messages: Int = messages
    ) -> [Int: Bool?] {
        let outcomes = Mutex<[Int: Bool?]>([:])
        DispatchQueue.concurrentPerform(iterations: calls.count) { index in
            let outcome: Bool?
            do {
                outcome = try crashRepairAndRetry(
                    at: calls[index], folder, mbox, other, expected: expected, messages: messages)
            } catch {
                Issue.record("call \(calls[index]): \(error)")
                outcome = nil
            }
            outcomes.withLock { $0[calls[index]] = outcome }
        }
        return outcomes.withLock { $0 }
    }

    /// Every call of the first message and of the placement phase (from the placing commit to the `delivered`
    /// commit, where a crash leaves placing records), and every 32nd call in between: each call of the batch would
    /// take many minutes, and those between only stage one more attachment, as the first message's calls did.
    @Test(.long) func anImportKilledAtAnyCallDeliversExactlyTheMissingWhenRunAgain() throws {
        let folder = try Scratch()
        let mbox = try folder.file("mail.mbox", Self.mbox)
        let other = try folder.file("other.eml", Self.other)
        let total = try Self.callCount(folder, mbox)
        // The placement phase is the batch's last: walk back from the end, a few calls at a time, until well
        // before the first call that left placing records.
        var placingCalls: [Int] = []
        var next = total
        while next > 0, placingCalls.isEmpty || next > (placingCalls.min() ?? 0) - 24 {
            let calls = Array(stride(from: next, to: max(0, next - 6), by: -1))
            let outcomes = Self.crashRepairAndRetry(at: calls, folder.path, mbox, other)
            #expect(outcomes.values.allSatisfy { $0 != nil }, "killed at each call \(calls)")
            placingCalls += outcomes.compactMap { $0.value == true ? $0.key : nil }
            next -= calls.count
        }
        #expect(placingCalls.count >= Self.expectedNames.count, "the renames of the batch are among them")
        let earlier = Array(1...min(40, next)) + Array(stride(from: 41, to: next, by: 32))
        let outcomes = Self.crashRepairAndRetry(at: earlier, folder.path, mbox, other)
        #expect(outcomes.values.allSatisfy { $0 == false }, "killed, and before the placement phase")
        print(
            "inbox import of \(Self.messages) messages: \(total) calls, \(placingCalls.count) in the placement "
                + "phase, \(total - next + earlier.count) crash points")
    }

    /// On a bindfs mount, where each attachment goes into the Inbox by `link` and `unlink` (ARCHITECTURE.md, "Network
    /// and FUSE filesystems"): killed at every call of the placement phase of two messages, and those before it,
    /// the repair never takes a staging name still on a file in the Inbox for one never placed.
    @Test(.long) func anImportOnAFuseMountKilledAtAnyCallDeliversEachAttachmentOnce() throws {
        let mount = try FuseMount()
        let folder = try Scratch()
        let mbox = try folder.file(
            "three.mbox",
            (0..<2).map {
                "From alice@example.org Mon Jan  1 00:00:00 2024\n"
                    + Self.message($0, subject: "fuse \($0)", attachments: Self.attachments($0)) + "\n"
            }.joined())
        let other = try folder.file("other.eml", Self.other)
        let expected = Set((0..<2).flatMap(Self.attachments))
        var placing = 0
        var crashes = 0
        for first in stride(from: 1, to: 10_000, by: 4) {
            let calls = Array(first..<(first + 4))
            let outcomes = Self.crashRepairAndRetry(
                at: calls, mount.mountPoint, mbox, other, expected: expected, messages: 2)
            placing += outcomes.values.filter { $0 == true }.count
            crashes += outcomes.values.filter { $0 != nil }.count
            if outcomes.values.contains(where: { $0 == nil }) { break }
        }
        print("inbox import of 2 messages on bindfs: \(crashes) crash points, \(placing) in the placement phase")
        #expect(placing >= expected.count, "the renames are among them")
    }
}
