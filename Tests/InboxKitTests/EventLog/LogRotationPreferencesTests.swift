import AppContainer
import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// The log's rotation set by the container's preferences, `logMaxBytes` and `logKeepRotated` (issue 40): every
/// writer of the container's log opens it so, and a value that would break it is refused in one line.
@Suite struct LogRotationPreferencesTests {
    private func setPreferences(_ scratch: Scratch, _ entries: String) throws {
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict>\(entries)</dict></plist>
            """
        try Data(plist.utf8).write(to: URL(fileURLWithPath: Preferences.path(scratch.container)))
    }

    private func rotatedNames(_ scratch: Scratch) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: scratch.container.stateDirectory)
            .filter { $0.hasPrefix("events.") && $0.hasSuffix(".jsonl") && $0 != "events.jsonl" }.sorted()
    }

    @Test func theContainersLogRotatesAtItsPreferencesSizeAndKeepsItsCount() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try setPreferences(
            scratch, "<key>logMaxBytes</key><integer>65536</integer><key>logKeepRotated</key><integer>2</integer>")
        // A writer opened after the preferences were set, as every command opens the log.
        let inbox = try Inbox(container: scratch.container)
        #expect(inbox.log.maxBytes == 65536 && inbox.log.keepRotated == 2)
        let padding = String(repeating: "x", count: 200)
        for batch in 0..<80 {
            try inbox.log.append(
                (0..<10).map { Event(.rescan, ["reason": .string("\(batch)-\($0) \(padding)")]) })
        }
        // About 80 × 10 × 250 bytes: past 64 KiB several times over, of which the newest two are kept.
        #expect(try rotatedNames(scratch).count == 2)
        let records = try EventLog(container: scratch.container).records()
        #expect(records.map(\.seq) == Array(records.first!.seq...records.last!.seq), "no seq missing or going back")
        #expect(records.last?.fields["reason"] == "79-9 \(padding)")
    }

    @Test func valuesThatWouldBreakTheLogAreRefusedInOneLine() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let refused = [
            ("logMaxBytes", "<integer>65535</integer>", "bytes, at least 65536"),
            ("logMaxBytes", "<integer>-1</integer>", "bytes, at least 65536"),
            ("logMaxBytes", "<string>16M</string>", "bytes, at least 65536"),
            ("logMaxBytes", "<real>1e300</real>", "bytes, at least 65536"),
            ("logKeepRotated", "<integer>0</integer>", "files, 1 to 1000000"),
            ("logKeepRotated", "<integer>9223372036854775807</integer>", "files, 1 to 1000000"),
        ]
        for (key, value, expected) in refused {
            try setPreferences(scratch, "<key>\(key)</key>\(value)")
            let error = expectError(.badData) { try Inbox(container: scratch.container) }
            let message = error?.message ?? ""
            #expect(message.contains("'\(key)' in '\(Preferences.path(scratch.container))'"), "\(message)")
            #expect(message.contains("must be a whole number of \(expected)"), "\(message)")
            #expect(!message.contains("\n"))
        }
        // The largest size is taken; a reader does not need the preferences at all.
        try setPreferences(scratch, "<key>logMaxBytes</key><integer>9223372036854775807</integer>")
        #expect(try Inbox(container: scratch.container).log.maxBytes == Int.max)
        try setPreferences(scratch, "<key>logKeepRotated</key><integer>0</integer>")
        #expect(try EventLog(reading: scratch.container).records().count >= 0)
    }

    /// Asked to keep no rotated file, the log keeps one: a writer new to the log reads the seq to go on from in the
    /// newest rotated file's name.
    @Test func aLogAskedToKeepNoRotatedFileStillNeverGoesBack() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let folder = scratch.outside("log")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let first = try EventLog(directory: folder, maxBytes: 10, keepRotated: 0)
        let seqs = try (0..<3).map { _ in try first.append(Event(.rescan)) }
        // Another writer, as another process would be.
        let next = try EventLog(directory: folder, maxBytes: 10, keepRotated: 0).append(Event(.rescan))
        #expect(next == seqs.last! + 1, "\(seqs) then \(next)")
    }
}
