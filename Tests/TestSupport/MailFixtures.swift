import Foundation

/// The mail fixtures the test targets share (the import tests, SystemTests' Postfix tests): a sample message,
/// numbered messages and an mbox of them, what the oracles find in a message, and what a container holds and
/// logged (ARCHITECTURE.md, "Mail import").
public enum MailFixtures {
    /// A multipart message with two attachments and a forwarded message holding a third.
    public static let message = """
        From: Alice <alice@example.org>
        To: bob@example.org
        Subject: the report
        Message-ID: <report-1@example.org>
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="outer"

        --outer
        Content-Type: text/plain

        See attached.
        --outer
        Content-Type: application/pdf; name="report.pdf"
        Content-Disposition: attachment; filename="report.pdf"
        Content-Transfer-Encoding: base64

        JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCiUlRU9GCg==
        --outer
        Content-Type: text/csv; name="../../figures.csv"
        Content-Disposition: attachment; filename="../../figures.csv"

        a,b
        1,2
        --outer
        Content-Type: message/rfc822

        From: Carol <carol@example.org>
        Subject: forwarded
        MIME-Version: 1.0
        Content-Type: multipart/mixed; boundary="inner"

        --inner
        Content-Type: text/plain

        inner body
        --inner
        Content-Type: application/octet-stream
        Content-Disposition: attachment; filename="inner.bin"
        Content-Transfer-Encoding: base64

        AAECAwQFBgc=
        --inner--
        --outer--

        """

    /// What the oracle (Python's `email` package with the same rules) finds in a message: name, size, SHA-256.
    public static func oracle(_ path: String) throws -> [[String: Any]] {
        let python = try runProgram("/usr/bin/python3", [TestPaths.oracle("mail_attachments.py"), path])
        let object = try JSONSerialization.jsonObject(with: Data(python.stdout)) as? [String: Any]
        return object?["attachments"] as? [[String: Any]] ?? []
    }

    /// `Oracle/message_key.py KIND PATH…` (each message's key) or `Oracle/mailbox_messages.py KIND PATH…` (each
    /// message's bytes): a line a message, and whether the script succeeded.
    public static func oracleLines(_ script: String, _ kind: String, _ paths: [String]) throws
        -> (succeeded: Bool, lines: [String])
    {
        let python = try runProgram("/usr/bin/python3", [TestPaths.oracle(script + ".py"), kind] + paths)
        return (python.status == 0, python.stdoutText.split(separator: "\n").map(String.init))
    }

    /// The SHA-256 of each file in the Inbox and Documents, but the Inbox folder itself.
    public static func contents(_ container: String) throws -> [String] {
        var sums: [String] = []
        for folder in [container + "/Documents/Inbox", container + "/Documents"] {
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) where name != "Inbox" {
                if name.hasPrefix(".") { continue }
                let data = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
                sums.append(sha256(data))
            }
        }
        return sums.sorted()
    }

    /// The SHA-256 of `data` in hex, as Python's `hashlib` computes it.
    public static func sha256(_ data: Data) -> String {
        let python = try? runProgram(
            "/usr/bin/python3",
            ["-c", "import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"],
            input: Array(data))
        return (python?.stdoutText ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Message `number` (`Message-ID: <mNUMBER@example.org>`), with `count` attachments `mNUMBER-PART.bin`.
    public static func numbered(_ number: Int, attachments count: Int) -> String {
        let parts = (0..<count).map { part in
            """
            --b
            Content-Type: application/octet-stream; name="m\(number)-\(part).bin"
            Content-Disposition: attachment; filename="m\(number)-\(part).bin"

            content \(number).\(part)

            """
        }
        return """
            From: Alice <alice@example.org>
            Subject: message \(number)
            Message-ID: <m\(number)@example.org>
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="b"

            --b
            Content-Type: text/plain

            body

            """ + parts.joined() + "--b--\n"
    }

    /// An mbox of three `numbered` messages: one, two and three attachments.
    public static let numberedMbox = (1...3).map {
        "From alice@example.org Mon Jan  1 00:00:00 2024\n" + numbered($0, attachments: $0) + "\n"
    }
    .joined()
}

/// The records of a container's event log, read straight from its files (rotated ones first).
public func logRecords(_ container: String, event: String? = nil) -> [[String: Any]] {
    let folder = container + "/Library/Application Support/inbox"
    let names =
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
        .filter { $0.hasPrefix("events.") && $0.hasSuffix(".jsonl") && $0 != "events.jsonl" }.sorted() + [
            "events.jsonl"
        ]
    var records: [[String: Any]] = []
    for name in names {
        guard let data = FileManager.default.contents(atPath: folder + "/" + name) else { continue }
        for line in data.split(separator: 0x0A) {
            guard let record = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else { continue }
            if event == nil || record["event"] as? String == event { records.append(record) }
        }
    }
    return records
}
