import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// The log's seq never goes back across rotation and set-aside together (ARCHITECTURE.md, "The event log").
@Suite struct EventLogContinuityTests {
    private func withFolder(_ body: (String) throws -> Void) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try body(scratch.path)
    }

    private func craft(_ seq: UInt64, in folder: String) throws {
        let path = folder + "/events.jsonl"
        if !FileManager.default.fileExists(atPath: path) {
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
        }
        let handle = try #require(FileHandle(forWritingAtPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"seq":\#(seq),"time":"2026-12-04T22:00:00.000Z","event":"rescan"}"#.utf8))
        try handle.write(contentsOf: Data("\n".utf8))
    }

    private func rotated(in folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder)
            .filter { $0.hasPrefix("events.0") && $0.hasSuffix(".jsonl") }
    }

    /// Rotated files and a live one holding records past them: a crafted record sets the live one aside, and the
    /// next goes on after its highest valid seq (not after the newest rotated file's).
    @Test(arguments: [EventLog.maxSeq + 2, EventLog.maxSeq, 20 + (1 << 40)] as [UInt64])
    func aSetAsideAfterRotationGoesOnAfterTheHighestValidSeq(crafted: UInt64) throws {
        try withFolder { folder in
            let log = try EventLog(directory: folder, maxBytes: 300, keepRotated: 100)
            for _ in 1...20 { try log.append(Event(.setup)) }
            let live = try String(contentsOfFile: folder + "/events.jsonl", encoding: .utf8)
            #expect(try rotated(in: folder).count >= 2 && !live.isEmpty, "records in rotated files and the live one")
            try craft(crafted, in: folder)
            #expect(try EventLog(directory: folder, maxBytes: 300).append(Event(.arrived)) == 22)
            #expect(try log.append(Event(.arrived)) == 23)
            let records = try log.records()
            #expect(zip(records, records.dropFirst()).allSatisfy { $0.seq < $1.seq }, "\(records.map(\.seq))")
            #expect(records.suffix(3).map(\.seq) == [21, 22, 23])
            #expect(records.suffix(3).map(\.event) == ["error", "arrived", "arrived"])
        }
    }

    /// A crafted first record in the live file a rotation just emptied does not follow the rotated file: set aside.
    @Test func aCraftedFirstRecordAfterARotationDoesNotSetTheCounter() throws {
        try withFolder { folder in
            let log = try EventLog(directory: folder, maxBytes: 10)
            try log.append([Event(.setup), Event(.setup)])  // rotated at once: the live file is gone
            #expect(try rotated(in: folder) == ["events.00000000000000000002.jsonl"])
            try craft(EventLog.maxSeq, in: folder)
            #expect(try EventLog(directory: folder, maxBytes: 1 << 20).append(Event(.arrived)) == 4)
            #expect(try log.records().map(\.seq) == [1, 2, 3, 4])
        }
    }

    /// A follower sees every record, each once and in order, across rotations, a crafted record and the set-aside
    /// it causes.
    @Test func followGoesOnAcrossRotationAndSetAside() throws {
        try withFolder { folder in
            let writer = try EventLog(directory: folder, maxBytes: 300, keepRotated: 100)
            let reader = try EventLog(directory: folder)
            for _ in 1...10 { try writer.append(Event(.setup)) }
            var seen: [UInt64] = []
            var failure: (any Error)?
            let deadline = ContinuousClock.now + .seconds(30)
            try reader.follow(shouldStop: { ContinuousClock.now > deadline || failure != nil }) { record in
                seen.append(record.seq)
                guard seen.count == 10 else { return seen.count < 21 }
                do {
                    try craft(EventLog.maxSeq + 2, in: folder)
                    for _ in 1...10 { try writer.append(Event(.arrived)) }  // the set-aside notice, then 12…21
                } catch {
                    failure = error
                }
                return true
            }
            #expect(failure == nil)
            #expect(seen == Array(1...21))
            #expect(try rotated(in: folder).count >= 3)
        }
    }

    /// A watcher's checkpoint far past anything the log held is crafted: set aside, never followed by the log's seq.
    @Test func aCheckpointFarPastTheLogIsSetAsideNotFollowed() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        for index in 0..<3 { _ = try scratch.inbox.deliver(data: Data("kept \(index)".utf8), suggestedName: "k.txt") }
        try StateFileTests.watchOnce(scratch.inbox)
        let last = try #require(try scratch.inbox.log.records().last?.seq)
        let checkpoint = scratch.container.stateDirectory + "/arrived.checkpoint"
        try Data("seq \(last + (1 << 40))\n".utf8).write(to: URL(fileURLWithPath: checkpoint))
        try StateFileTests.watchOnce(try Inbox(container: scratch.container))
        let written = try String(contentsOfFile: scratch.container.stateDirectory + "/events.jsonl", encoding: .utf8)
        let seqs = written.split(separator: "\n").map { EventEncoding.leadingSeq(Array($0.utf8)) ?? 0 }
        #expect(seqs.allSatisfy { $0 > 0 && $0 < last + 100 }, "\(seqs)")
        let records = try scratch.inbox.log.records()
        #expect(records.filter { $0.event == "arrived" }.count == 3, "nothing arrives again")
        #expect(records.contains { $0.fields["during"] == "read the checkpoint" })
    }

    /// An instance new to the log reads on from the mark the appends leave in `events.lock`, not from the top: a
    /// crafted record past the mark is still caught.
    @Test func aNewInstanceReadsOnFromTheMarkAndStillCatchesACraftedRecord() throws {
        try withFolder { folder in
            let log = try EventLog(directory: folder)
            for _ in 0..<20 { try log.append((0..<100).map { _ in Event(.setup) }) }
            let lock = try FileManager.default.attributesOfItem(atPath: folder + "/events.lock")
            #expect(lock[.size] as? Int == 32, "a mark was left")
            try craft(EventLog.maxSeq, in: folder)
            #expect(try EventLog(directory: folder).append(Event(.arrived)) == 2002)
            #expect(try log.records().suffix(2).map(\.event) == ["error", "arrived"])
        }
    }
}
