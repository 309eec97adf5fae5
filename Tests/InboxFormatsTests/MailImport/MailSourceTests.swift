import AppContainer
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// Messages are found in an mbox and a Maildir as Python's `mailbox` module finds them, each keyed as
/// `Tests/Oracle/message_key.py` keys it; what is not a message file is skipped unopened.
@Suite struct MailSourceTests {
    /// The SHA-256 of the bytes each message spans, and each message's key.
    private func messages(_ source: MailSource, skipped: (String) -> Void = { _ in }) throws -> (
        ranges: [String], keys: [String]
    ) {
        var messages: [SourceMessage] = []
        try source.forEachMessage(skipped: skipped) { messages.append($0) }
        var ranges: [String] = []
        for message in messages {
            let bytes = try readRange(message.file.rawValue, message.offset, message.length)
            let digest = try SHA256Digest()
            try digest.begin()
            try bytes.withUnsafeBytes { raw in try digest.update(raw) }
            ranges.append(SHA256Digest.hex(try digest.finish()))
        }
        return (ranges, messages.map { SHA256Digest.hex($0.key) })
    }

    private func source(_ path: String) throws(ContainerError) -> MailSource { try MailSource.named(Array(path.utf8)) }

    private func readRange(_ fd: CInt, _ offset: Int64, _ length: Int64) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Int(length))
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, Int(offset)) }
        #expect(count == Int(length))
        return bytes
    }

    /// `Oracle/mailbox_messages.py` (each message's bytes) or `Oracle/message_key.py` (each message's key).
    private func oracle(_ script: String, _ kind: String, _ path: String) throws -> [String] {
        let oracle = try MailFixtures.oracleLines(script, kind, [path])
        #expect(oracle.succeeded)
        return oracle.lines
    }

    @Test func anMboxIsSplitAsPythonSplitsIt() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let big = String(repeating: "x", count: 300_000)
        let mbox = """
            From alice@example.org Mon Jan  1 00:00:00 2024
            From: alice@example.org
            Subject: one

            first body

            From bob@example.org Mon Jan  1 00:00:01 2024
            Subject: two, no blank line before the next

            body
            From carol@example.org Mon Jan  1 00:00:02 2024
            Subject: three, a long line

            \(big)
            >From quoted stays

            From dave@example.org Mon Jan  1 00:00:03 2024
            Subject: four, no newline at the end

            last
            """
        let path = scratch.outside("mail.mbox")
        try makeFile(path, Array(mbox.utf8))
        let box = try source(path)
        guard case .mbox = box else {
            Issue.record("not taken for an mbox")
            return
        }
        let ours = try messages(box)
        #expect(ours.ranges.count == 4)
        #expect(ours.ranges == (try oracle("mailbox_messages", "mbox", path)))
        #expect(ours.keys == (try oracle("message_key", "mbox", path)))
        #expect(ours.keys[2] != ours.ranges[2], "its >From line unquoted in the key")
    }

    @Test func aMaildirIsReadAsPythonReadsItAndLeftAsItWas() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let maildir = scratch.outside("Maildir")
        for folder in ["cur", "new", "tmp"] {
            try FileManager.default.createDirectory(atPath: maildir + "/" + folder, withIntermediateDirectories: true)
        }
        try makeFile(maildir + "/new/1700000000.1.host", Array("Subject: new\n\nnew\n".utf8))
        try makeFile(maildir + "/cur/1700000001.2.host:2,S", Array("Subject: seen\n\nseen\n".utf8))
        try makeFile(maildir + "/tmp/1700000002.3.host", Array("Subject: still being written\n\n".utf8))
        let before = try FileManager.default.subpathsOfDirectory(atPath: maildir).sorted()
        let source = try source(maildir)
        guard case .maildir = source else {
            Issue.record("not taken for a Maildir")
            return
        }
        let ours = try messages(source)
        #expect(ours.ranges.sorted() == (try oracle("mailbox_messages", "maildir", maildir)))
        #expect(ours.keys.sorted() == (try oracle("message_key", "maildir", maildir)))
        #expect(try FileManager.default.subpathsOfDirectory(atPath: maildir).sorted() == before)
    }

    @Test func aFileNotStartingWithFromIsOneMessageAndAMissingSourceIs66() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let path = scratch.outside("one.eml")
        try makeFile(path, Array("Subject: hi\n\nFrom the start of a line\n".utf8))
        let message = try source(path)
        guard case .message = message else {
            Issue.record("not taken for one message")
            return
        }
        #expect(try messages(message).keys == (try oracle("message_key", "message", path)))
        #expect(throws: ContainerError.self) { try source(scratch.outside("missing.eml")) }
        do {
            _ = try source(scratch.outside("missing.eml"))
        } catch {
            #expect(error.code == .noSuchItem)
        }
    }

    /// A Maildir holding two messages beside a FIFO, a socket, a folder, a dangling symbolic link and one to a
    /// good message.
    static func makeMixedMaildir(_ maildir: String) throws -> [String] {
        for folder in ["cur", "new", "tmp"] {
            try FileManager.default.createDirectory(atPath: maildir + "/" + folder, withIntermediateDirectories: true)
        }
        let good = [maildir + "/new/1700000000.1.host", maildir + "/cur/1700000001.2.host:2,S"]
        try makeFile(good[0], Array("Subject: one\n\nfirst\n".utf8))
        try makeFile(good[1], Array("Subject: two\n\nsecond\n".utf8))
        #expect(mkfifo(maildir + "/new/1700000002.3.fifo", 0o644) == 0)
        #expect(mknod(maildir + "/new/1700000003.4.socket", S_IFSOCK | 0o644, 0) == 0)
        try FileManager.default.createDirectory(
            atPath: maildir + "/cur/1700000004.5.folder", withIntermediateDirectories: false)
        #expect(symlink(maildir + "/nowhere", maildir + "/cur/1700000005.6.dangling") == 0)
        #expect(symlink(good[0], maildir + "/cur/1700000006.7.link") == 0)
        return good
    }

    @Test func aMaildirEntryThatIsNotARegularFileIsSkippedUnopened() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let maildir = scratch.outside("Maildir")
        let good = try Self.makeMixedMaildir(maildir)
        guard case .maildir = try source(maildir) else {
            Issue.record("not taken for a Maildir")
            return
        }
        // Opened with O_NONBLOCK or not at all, the FIFO cannot hang the walk: waited on with a deadline.
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<(keys: [String], skipped: [String]), any Error>?>(nil)
        DispatchQueue.global().async {
            var skipped: [String] = []
            let keys = Result { try messages(try source(maildir)) { skipped.append($0) }.keys }
            result.withLock { $0 = keys.map { ($0, skipped) } }
            done.signal()
        }
        try #require(done.wait(timeout: .now() + 30) == .success, "the Maildir walk hangs")
        let (keys, skipped) = try #require(result.withLock { $0 }).get()
        var expected: [String] = []
        for path in good { expected += try oracle("message_key", "message", path) }
        #expect(keys.sorted() == expected.sorted())
        #expect(skipped.count == 5, "\(skipped)")
        for (name, what) in [
            ("new/1700000002.3.fifo", "a FIFO"), ("new/1700000003.4.socket", "a socket"),
            ("cur/1700000004.5.folder", "a folder"), ("cur/1700000005.6.dangling", "a symbolic link"),
            ("cur/1700000006.7.link", "a symbolic link"),
        ] {
            #expect(skipped.contains("skipped '\(maildir)/\(name)': \(what), not a message file"), "\(name)")
        }
    }

    @Test func aFIFOSourceIsReadOnceAndTypedLikeAFile() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let mbox = scratch.outside("three.mbox")
        var text = ""
        for number in 1...3 {
            text += "From sender@example.org Mon Jan  1 00:00:0\(number) 2024\nSubject: \(number)\n\nFrom here\n\n"
        }
        try makeFile(mbox, Array(text.replacingOccurrences(of: "\nFrom here", with: "\n>From here").utf8))
        let fifo = scratch.outside("pipe")
        #expect(mkfifo(fifo, 0o600) == 0)
        let writer = try InboxProcess.start(
            ["-c", "cat \"$0\" > \"$1\"", mbox, fifo].map { Array($0.utf8) }, executable: "/bin/sh")
        let source = try source(fifo)
        #expect(try writer.finish().status == 0)
        guard case .mbox = source else {
            Issue.record("a FIFO holding an mbox not taken for one")
            return
        }
        #expect(source.path == Array(fifo.utf8))
        let keys = try messages(source).keys
        #expect(keys.count == 3)
        #expect(keys == (try oracle("message_key", "mbox", mbox)))
    }

    @Test func aSourcePathThatIsNotUTF8IsUsedByteForByte() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let path = Array(scratch.outside("caf").utf8) + [0xFF] + Array(".eml".utf8)
        try makeFile(path, Array("Subject: bytes\n\nbody\n".utf8))
        let source = try MailSource.named(path)
        guard case .message = source else {
            Issue.record("not taken for one message")
            return
        }
        var found: [SourceMessage] = []
        try source.forEachMessage { found.append($0) }
        #expect(found.map(\.sourcePath) == [path])
        #expect(MailSource.shown(path).hasSuffix("caf\\xff.eml"))
    }
}
