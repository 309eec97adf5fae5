import Foundation
import TestSupport
import Testing

/// The log's seq never goes back (ARCHITECTURE.md, "The event log"): a crafted record never sets the counter, a log set aside is followed by
/// one that goes on after the highest valid seq, and `inbox log --follow` follows into it.
@Suite struct LogContinuityTests {
    private func loggedContainer(_ folder: Scratch) throws -> String {
        try LogCommandTests.loggedContainer(folder)
    }

    private func deliver(_ name: String, _ folder: Scratch, _ container: String) throws {
        let result = try InboxProcess.run("--container", container, "deliver", try folder.file(name, name))
        #expect(result.status == 0, "\(result.stderr)")
    }

    private func state(_ container: String) -> String { container + "/Library/Application Support/inbox" }

    private func craft(_ seq: String, into container: String) throws {
        let handle = try #require(FileHandle(forWritingAtPath: state(container) + "/events.jsonl"))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"seq":\#(seq),"time":"2026-12-04T22:00:00.000Z","event":"rescan"}"#.utf8))
        try handle.write(contentsOf: Data("\n".utf8))
    }

    /// Each record's seq and event, as `inbox log --json` prints them.
    private func logged(_ container: String) throws -> [(seq: UInt64, event: String)] {
        let result = try InboxProcess.run("--container", container, "log", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        return try result.lines.map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return ((object["seq"] as? NSNumber)?.uint64Value ?? 0, object["event"] as? String ?? "")
        }
    }

    private func asideFiles(_ container: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: state(container))
            .filter { $0.hasPrefix("events.jsonl.damaged-") }
    }

    /// Past the count, at its very end (2^53−1), far ahead of its predecessor (2^40 on), or back: the record is
    /// crafted, the log is set aside, and the next goes on after 5, never from 1 nor from the crafted seq.
    @Test(arguments: ["9007199254740993", "9007199254740991", "1099511627781", "3", "5"])
    func aCraftedLastRecordIsSetAsideAndSeqGoesOnAfterTheHighestValid(crafted: String) throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        try craft(crafted, into: container)
        try deliver("late.txt", folder, container)
        let records = try logged(container)
        #expect(records.map(\.seq) == [6, 7], "\(records)")
        #expect(records.map(\.event) == ["error", "delivered"])
        #expect(try asideFiles(container).count == 1)
    }

    /// A crafted record between real ones (a hand-edited log) neither sets the counter nor hides what follows it.
    @Test(arguments: ["9007199254740991", "1099511627781", "1"])
    func aCraftedRecordAmongRealOnesIsSkipped(crafted: String) throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let path = state(container) + "/events.jsonl"
        var lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        lines.insert(#"{"seq":\#(crafted),"time":"2026-12-04T22:00:00.000Z","event":"rescan"}"#, at: 3)
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        try deliver("late.txt", folder, container)
        let records = try logged(container)
        #expect(records.map(\.seq) == [1, 2, 3, 4, 5, 6], "\(records)")
        #expect(!records.contains { $0.event == "rescan" })
        #expect(try asideFiles(container).isEmpty)
    }

    /// A running `inbox log --follow --json` prints the records written after a crafted record made the log be set
    /// aside: the new log's, each once, in order.
    @Test func followFollowsIntoTheLogAfterASetAside() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let follower = try InboxProcess.start(
            ["--container", container, "log", "--follow", "--json"].map { Array($0.utf8) })
        defer { _ = follower.terminate() }
        var seen = follower.readStdout { $0.contains(#""seq":5,"#) }
        #expect(seen.contains(#""seq":5,"#), "the follower reads the log: \(seen)")
        try craft("9007199254740993", into: container)
        try deliver("late.txt", folder, container)
        seen += follower.readStdout { $0.contains("late.txt") }
        try deliver("later.txt", folder, container)
        seen += follower.readStdout { $0.contains("later.txt") }
        let seqs = seen.split(separator: "\n").map { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["seq"] as? Int ?? -1
        }
        #expect(seqs == [1, 2, 3, 4, 5, 6, 7, 8], "\(seen)")
        #expect(seen.contains("set aside"))
        #expect(try asideFiles(container).count == 1)
    }
}
