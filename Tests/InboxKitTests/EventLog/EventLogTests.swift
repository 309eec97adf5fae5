import AppContainer
import Foundation
import Glibc
import InboxKit
import Synchronization
import TestSupport
import Testing

@Suite struct EventLogTests {
    // MARK: - Encoding

    @Test func roundTripKeepsKindsFieldsAndKeyOrder() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder)
            let note = "say \"hi\" back\\slash\nnew line\ttab\u{01}bell é ✓"
            var seqs: [UInt64] = []
            for kind in EventKind.allCases {
                seqs.append(try log.append(Event(kind, ["path": .path(Array("Documents/Inbox/a b.pdf".utf8))])))
            }
            let moved = try log.append(
                Event(
                    .moved,
                    [
                        "from": .path(Array("Documents/Inbox/a.pdf".utf8)), "to": .string("Documents/a.pdf"),
                        "reason": .string("edit"), "size": .int(-42), "ok": .bool(true), "gone": .bool(false),
                        "note": .string(note), "big": .int(Int64.max),
                    ]), durable: true)
            #expect(seqs == Array(1...UInt64(EventKind.allCases.count)))
            #expect(moved == UInt64(EventKind.allCases.count) + 1)

            let records = try log.records()
            #expect(records.map(\.seq) == Array(1...moved))
            #expect(records.dropLast().map(\.event) == EventKind.allCases.map(\.rawValue))
            #expect(records.dropLast().allSatisfy { $0.fields["path"] == "Documents/Inbox/a b.pdf" })

            let last = try #require(records.last)
            let timePattern = try Regex(#"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z"#)
            #expect(last.time.wholeMatch(of: timePattern) != nil)
            let expectedLine =
                #"{"seq":\#(moved),"time":"\#(last.time)","event":"moved","from":"Documents/Inbox/a.pdf","#
                + #""to":"Documents/a.pdf","reason":"edit","size":-42,"ok":true,"gone":false,"#
                + #""note":"say \"hi\" back\\slash\nnew line\ttab\u0001bell é ✓","big":9223372036854775807}"#
            #expect(last.line == expectedLine)
            #expect(last.fields["note"] == note)
            #expect(last.fields["size"] == "-42")
            #expect(last.fields["big"] == "9223372036854775807")
            #expect(last.fields["ok"] == "true")
            #expect(last.fields["gone"] == "false")
            #expect(last.fields["seq"] == String(moved))
            #expect(last.fields["event"] == "moved")
            #expect(
                last.keysInOrder == [
                    "seq", "time", "event", "from", "to", "reason", "size", "ok", "gone", "note", "big",
                ])

            // The file holds exactly the records' lines, one a line.
            #expect(try lines(in: folder) == records.map(\.line))
        }
    }

    @Test func keysInOrderSkipNestedKeysAndQuotedBraces() throws {
        let line = #"{"seq":1,"time":"t","event":"x","b":{"inner":[1,{"deep":2}]},"s":"a\",\"fake\":{","a":[]}"#
        let record = EventRecord(seq: 1, time: "t", event: "x", line: line, fields: [:])
        #expect(record.keysInOrder == ["seq", "time", "event", "b", "s", "a"])
    }

    @Test func invalidUTF8PathGetsReplacementAndExactBase64() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder)
            let name: [UInt8] = Array("Documents/Inbox/bad".utf8) + [0xFF, 0x0A] + Array("name.txt".utf8)
            try log.append(Event(.arrived, ["path": .path(name), "size": .int(3)]))
            try log.append(Event(.arrived, ["path": .path(Array("Documents/Inbox/fine\nname".utf8))]))
            let shortNames: [[UInt8]] = [[0xFF], [0xFF, 0xFE], [0xFF, 0xFE, 0xFD], [0xC3], [0x61, 0x80, 0x62, 0x63]]
            for short in shortNames { try log.append(Event(.rejected, ["path": .path(short)])) }

            let records = try log.records()
            #expect(records.count == 2 + shortNames.count)
            #expect(try lines(in: folder).count == records.count)  // no raw newline inside a record

            let bad = try #require(records.first)
            #expect(bad.fields["path"] == "Documents/Inbox/bad\u{FFFD}\nname.txt")
            #expect(bad.fields["path_b64"] == Data(name).base64EncodedString())
            #expect(Data(base64Encoded: bad.fields["path_b64"] ?? "").map(Array.init) == name)
            #expect(bad.line.contains(#""path":"Documents/Inbox/bad\#u{FFFD}\nname.txt","path_b64":""#))
            #expect(bad.fields["size"] == "3")

            let fine = records[1]
            #expect(fine.fields["path"] == "Documents/Inbox/fine\nname")
            #expect(fine.fields["path_b64"] == nil)

            for (record, short) in zip(records.dropFirst(2), shortNames) {
                #expect(record.fields["path_b64"] == Data(short).base64EncodedString())
                #expect(record.fields["path"] == String(decoding: short, as: UTF8.self))
            }
        }
    }

    // MARK: - Seq

    @Test func seqIncreasesAcrossInstancesAndReopening() throws {
        try withTemporaryFolder { folder in
            do {
                let first = try EventLog(directory: folder)
                let second = try EventLog(directory: folder)
                #expect(try first.append(Event(.setup)) == 1)
                #expect(try second.append(Event(.setup)) == 2)
                #expect(try first.append([Event(.rescan), Event(.overflow)]) == [3, 4])
                #expect(try second.append(Event(.setup)) == 5)
            }
            let reopened = try EventLog(directory: folder)
            #expect(try reopened.append(Event(.watchStarted)) == 6)
            #expect(try reopened.append([]) == [])
            #expect(try lines(in: folder).map(seq) == Array(1...6))
        }
    }

    @Test func concurrentAppendsFromFourInstancesGetUniqueIncreasingSeqs() throws {
        try withTemporaryFolder { folder in
            let logs = try (0..<4).map { _ in try EventLog(directory: folder) }
            let given = Shared<[UInt64]>([])
            let failures = Shared<[String]>([])
            let finished = runThreads(4) { thread in
                var mine: [UInt64] = []
                do {
                    for index in 0..<1_000 {
                        mine.append(
                            try logs[thread].append(
                                Event(.arrived, ["thread": .int(Int64(thread)), "index": .int(Int64(index))])))
                    }
                } catch {
                    failures.update { $0.append("\(error)") }
                }
                given.update { $0.append(contentsOf: mine) }
            }
            #expect(finished)
            #expect(failures.value.isEmpty)
            #expect(isOneThrough(given.value.sorted(), 4_000))

            let fileLines = try lines(in: folder)
            #expect(fileLines.count == 4_000)
            let objects = fileLines.compactMap(jsonObject)
            #expect(objects.count == 4_000)
            #expect(isOneThrough(fileLines.map(seq), 4_000))  // unique and increasing in file order
        }
    }

    @Test func twoProcessesAppendingWithRotationShareOneSeq() async throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = scratch.path

        // Each exit test runs its body in a child process of its own; both start appending together.
        let barrier = folder + "/barrier"
        try FileManager.default.createDirectory(atPath: barrier, withIntermediateDirectories: true)
        async let first = #expect(processExitsWith: .success) {
            [folder = folder as String, barrier = barrier as String] in
            let log = try EventLog(directory: folder, maxBytes: 8 << 10, keepRotated: 1_000)
            guard arriveAndWait(at: barrier, for: 2) else { exit(2) }
            for _ in 0..<1_000 { try log.append(Event(.arrived, ["pid": .int(Int64(getpid()))])) }
        }
        async let second = #expect(processExitsWith: .success) {
            [folder = folder as String, barrier = barrier as String] in
            let log = try EventLog(directory: folder, maxBytes: 8 << 10, keepRotated: 1_000)
            guard arriveAndWait(at: barrier, for: 2) else { exit(2) }
            for _ in 0..<1_000 { try log.append(Event(.moved, ["pid": .int(Int64(getpid()))])) }
        }
        let exits = await (first, second)
        #expect(exits.0?.exitStatus == .exitCode(0) && exits.1?.exitStatus == .exitCode(0))

        let records = try EventLog(directory: folder).records()
        #expect(isOneThrough(records.map(\.seq), 2_000))
        #expect(Set(records.compactMap { $0.fields["pid"] }).count == 2)
        // The two really appended at the same time: the writer changes along the log.
        let writers = records.map(\.event)
        #expect(zip(writers, writers.dropFirst()).filter { $0 != $1 }.count >= 2)
        #expect(records.filter { $0.event == "moved" }.count == 1_000)
        let rotated = try rotatedFiles(in: folder)
        #expect(rotated.count >= 10)
        for name in rotated {
            let seqs = try lines(in: folder, name: name).map(seq)
            #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 + 1 == $1 })
            #expect(seqs.last.map(rotatedName) == name)
        }
    }

    // MARK: - Repair

    @Test func tornLastLineIsRepairedAndSeqFollowsLastCompleteRecord() throws {
        try withTemporaryFolder { folder in
            let writer = try EventLog(directory: folder)
            try writer.append([Event(.setup), Event(.setup), Event(.setup)])
            try appendRaw(#"{"seq":4,"time":"2026-11-"#, to: folder + "/events.jsonl")

            let other = try EventLog(directory: folder)
            #expect(try other.append(Event(.arrived)) == 4)
            var fileLines = try lines(in: folder)
            #expect(fileLines.map(seq) == [1, 2, 3, 4])
            #expect(fileLines.allSatisfy { jsonObject($0) != nil })

            // The first instance's cache is stale: it notices, repairs a new tear and continues.
            try appendRaw(#"{"seq":5,"ti"#, to: folder + "/events.jsonl")
            #expect(try writer.append(Event(.moved)) == 5)
            fileLines = try lines(in: folder)
            #expect(fileLines.map(seq) == [1, 2, 3, 4, 5])
            #expect(fileLines.allSatisfy { jsonObject($0) != nil })
            #expect(try String(contentsOfFile: folder + "/events.jsonl", encoding: .utf8).hasSuffix("}\n"))
        }
    }

    @Test func tornOnlyLineAfterRotationContinuesFromRotatedName() throws {
        try withTemporaryFolder { folder in
            let writer = try EventLog(directory: folder, maxBytes: 10)
            try writer.append([Event(.setup), Event(.setup)])  // over 10 bytes: rotated at once
            #expect(try rotatedFiles(in: folder) == ["events.00000000000000000002.jsonl"])
            try appendRaw(#"{"seq":3,"time""#, to: folder + "/events.jsonl")

            let reopened = try EventLog(directory: folder, maxBytes: 1 << 20)
            #expect(try reopened.append(Event(.arrived)) == 3)
            #expect(try lines(in: folder).map(seq) == [3])
            #expect(try reopened.records().map(\.seq) == [1, 2, 3])
        }
    }

    @Test func brokenLinesAreSkippedByReadersAndPassedOverByWriters() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder)
            try log.append([Event(.setup), Event(.setup)])
            let broken = [
                "not json", #"{"seq":"3","time":"t","event":"setup"}"#, "[1,2]", #"{"seq":3,"time":"t"}"#,
                #"{"seq":-3,"time":"t","event":"setup"}"#, #"{"seq":true,"time":"t","event":"setup"}"#,
            ]
            try appendRaw(broken.joined(separator: "\n") + "\n", to: folder + "/events.jsonl")
            // Another writer's key order: its seq is still found.
            try appendRaw(#"{"time":"t","event":"rescan","seq":7}"# + "\n", to: folder + "/events.jsonl")
            try appendRaw("}{ garbage\n", to: folder + "/events.jsonl")

            #expect(try log.records().map(\.seq) == [1, 2, 7])
            let other = try EventLog(directory: folder)
            #expect(try other.append(Event(.arrived)) == 8)
            #expect(try log.append(Event(.arrived)) == 9)
            #expect(try log.records().map(\.event) == ["setup", "setup", "rescan", "arrived", "arrived"])
        }
    }

    // MARK: - Rotation

    @Test func rotationKeepsRecordsCompleteAndInOrderWithFilters() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder, maxBytes: 400, keepRotated: 100)
            for index in 1...60 {
                let kind: EventKind = index % 3 == 0 ? .moved : .arrived
                try log.append(Event(kind, ["path": .string("Documents/Inbox/file-\(index).txt")]))
            }
            // A batch is one write, so it lands whole in one file.
            try log.append(
                (61...70).map { Event(.deleted, ["path": .string("Documents/Inbox/file-\($0).txt")]) }, durable: true)

            let rotated = try rotatedFiles(in: folder)
            #expect(rotated.count >= 8)
            for name in rotated {
                let fileLines = try lines(in: folder, name: name)
                let lastSeq = try #require(UInt64(name.dropFirst("events.".count).prefix(20)))
                #expect(fileLines.last.map(seq) == lastSeq)
                #expect(fileLines.count > 0)
            }
            // After a rotation `events.jsonl` is absent until the next append.
            let live = FileManager.default.fileExists(atPath: folder + "/events.jsonl") ? ["events.jsonl"] : []
            let batchFiles = try (rotated + live).filter { name in
                try lines(in: folder, name: name).contains { $0.contains(#""event":"deleted""#) }
            }
            #expect(batchFiles.count == 1)

            #expect(try log.records().map(\.seq) == Array(1...70))
            #expect(try log.records(since: 25).map(\.seq) == Array(26...70))
            #expect(try log.records(since: 70).isEmpty)
            let moved = try log.records(kinds: [.moved])
            #expect(moved.map(\.seq) == Array(stride(from: 3, through: 60, by: 3)))
            let movedOrDeletedAfter30: [UInt64] = Array(stride(from: 33, through: 60, by: 3)) + Array(61...70)
            #expect(try log.records(since: 30, kinds: [.moved, .deleted]).map(\.seq) == movedOrDeletedAfter30)
            #expect(moved.allSatisfy { $0.fields["path"] == "Documents/Inbox/file-\($0.seq).txt" })
        }
    }

    @Test func rotatedFilesAtOrBelowSinceAreNotRead() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder, maxBytes: 200)
            for _ in 1...20 { try log.append(Event(.arrived, ["path": .string("Documents/Inbox/x")])) }
            let oldest = try #require(try rotatedFiles(in: folder).first)
            let oldestLastSeq = try #require(UInt64(oldest.dropFirst("events.".count).prefix(20)))
            // A forged record in the oldest file shows whether that file was read.
            try appendRaw(#"{"seq":999999,"time":"x","event":"forged"}"# + "\n", to: folder + "/" + oldest)

            #expect(try log.records().contains { $0.event == "forged" })
            let since = try log.records(since: oldestLastSeq)
            #expect(!since.contains { $0.event == "forged" })
            #expect(since.map(\.seq) == Array((oldestLastSeq + 1)...20))
        }
    }

    @Test func keepRotatedDeletesTheOldestFiles() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder, maxBytes: 200, keepRotated: 3)
            for _ in 1...50 { try log.append(Event(.arrived, ["path": .string("Documents/Inbox/x")])) }
            let rotated = try rotatedFiles(in: folder)
            #expect(rotated.count == 3)
            let records = try log.records()
            let first = try #require(records.first?.seq)
            #expect(first > 1)
            #expect(records.map(\.seq) == Array(first...50))
            // The kept files are the newest: the live file continues right after the newest one.
            let newest = try #require(rotated.last.flatMap { UInt64($0.dropFirst("events.".count).prefix(20)) })
            #expect(try lines(in: folder).first.map(seq) ?? 51 == newest + 1)
        }
    }

    // MARK: - Follow

    @Test func followSeesAppendsFromAnotherInstanceAcrossRotations() throws {
        try withTemporaryFolder { folder in
            let writerLog = try EventLog(directory: folder, maxBytes: 1_500, keepRotated: 1_000)
            let readerLog = try EventLog(directory: folder, maxBytes: 1_500, keepRotated: 1_000)
            for _ in 1...10 { try writerLog.append(Event(.setup)) }

            let rounds = 10
            let perRound = 20
            let total = 10 + rounds * perRound
            let seen = Shared<[UInt64]>([])
            let writerFailure = Shared<String?>(nil)
            let writerDone = runThreadsInBackground(1) { _ in
                // Each round waits until the follower has seen the previous one, so rotations happen while
                // it follows.
                var expected = 10
                for round in 0..<rounds {
                    guard waitUntil(timeout: 30, interval: 0.001, { seen.value.count >= expected }) else {
                        writerFailure.update { $0 = "the follower saw \(seen.value.count) of \(expected)" }
                        return
                    }
                    do {
                        for index in 0..<perRound {
                            let kind: EventKind = index % 2 == 0 ? .arrived : .moved
                            try writerLog.append(
                                Event(kind, ["round": .int(Int64(round)), "index": .int(Int64(index))]))
                        }
                    } catch {
                        writerFailure.update { $0 = "\(error)" }
                        return
                    }
                    expected += perRound
                }
            }

            let deadline = ContinuousClock.now + .seconds(120)
            try readerLog.follow(shouldStop: { ContinuousClock.now > deadline || writerFailure.value != nil }) {
                record in
                seen.update { $0.append(record.seq) }
                return seen.value.count < total
            }
            #expect(waitUntil(timeout: 30, interval: 0.001, { writerDone.value }))
            #expect(writerFailure.value == nil)
            #expect(seen.value == Array(1...UInt64(total)))
            #expect(try rotatedFiles(in: folder).count >= rounds)

            // Filters apply while following too, and `body` returning false stops it.
            let wanted = try readerLog.records(since: 5, kinds: [.moved]).map(\.seq)
            #expect(wanted.count == rounds * perRound / 2)
            var followed: [UInt64] = []
            let stopAt = ContinuousClock.now + .seconds(30)
            try readerLog.follow(since: 5, kinds: [.moved], shouldStop: { ContinuousClock.now > stopAt }) { record in
                followed.append(record.seq)
                return followed.count < wanted.count
            }
            #expect(followed == wanted)
        }
    }

    @Test func followOnAnEmptyLogStopsWhenAsked() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder)
            var polls = 0
            var delivered = 0
            try log.follow(shouldStop: {
                polls += 1
                return polls > 3
            }) { _ in
                delivered += 1
                return true
            }
            #expect(polls == 4)
            #expect(delivered == 0)
        }
    }

    // MARK: - Errors

    /// A durable append fsyncs once it has let go of the lock, so that an append meanwhile, from this process or
    /// another, never waits for the disk (a watcher's `arrived` records beside its syncer's fsync); the first one to a
    /// file new to the instance fsyncs the folder too.
    @Test func aDurableAppendFsyncsAfterItLetsGoOfTheLock() throws {
        try withTemporaryFolder { folder in
            let log = try EventLog(directory: folder)
            let plan = SyscallFaultPlan()
            try plan.run {
                try log.append(Event(.rescan), durable: true)
                try log.append(Event(.rescan), durable: true)
                try log.append(Event(.rescan))
            }
            let order = plan.calls.filter { ["flock", "write", "fsync"].contains($0) }
            let expected = [
                "flock", "write", "flock", "fsync", "fsync",
                "flock", "write", "flock", "fsync",
                "flock", "write", "flock",
            ]
            #expect(order == expected, "\(plan.calls)")
            #expect(try log.records().map(\.seq) == [1, 2, 3])
        }
    }

    @Test func missingFolderIsNoSuchItem() throws {
        try withTemporaryFolder { folder in
            #expect {
                _ = try EventLog(directory: folder + "/missing")
            } throws: { error in
                (error as? ContainerError)?.code == .noSuchItem
            }
        }
    }
}

// MARK: - Helpers

/// Runs `body` with a new folder under the temporary directory, removed afterwards.
private func withTemporaryFolder(_ body: (String) throws -> Void) throws {
    let scratch = try Scratch()
    defer { scratch.remove() }
    try body(scratch.path)
}

/// The lines of a log file, without newlines.
private func lines(in folder: String, name: String = "events.jsonl") throws -> [String] {
    let text = try String(contentsOfFile: folder + "/" + name, encoding: .utf8)
    return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
}

private func rotatedFiles(in folder: String) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: folder)
        .filter { $0.hasPrefix("events.0") && $0.hasSuffix(".jsonl") }.sorted()
}

/// `events.<seq, 20 digits>.jsonl`
private func rotatedName(_ lastSeq: UInt64) -> String {
    let digits = String(lastSeq)
    return "events." + String(repeating: "0", count: 20 - digits.count) + digits + ".jsonl"
}

private func jsonObject(_ line: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
}

private func seq(_ line: String) -> UInt64 {
    (jsonObject(line)?["seq"] as? NSNumber)?.uint64Value ?? 0
}

/// Whether `seqs` is exactly 1, 2, …, `count` (a short answer, where a failed `==` would print thousands).
private func isOneThrough(_ seqs: [UInt64], _ count: Int) -> Bool {
    seqs.count == count && seqs.enumerated().allSatisfy { UInt64($0.offset + 1) == $0.element }
}

/// Appends raw bytes, as a crashed writer or a corrupt disk would leave them; creates the file if missing.
private func appendRaw(_ text: String, to path: String) throws {
    if !FileManager.default.fileExists(atPath: path) {
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
    }
    let handle = try #require(FileHandle(forWritingAtPath: path))
    defer { try? handle.close() }
    try handle.seekToEnd()
    try handle.write(contentsOf: Data(text.utf8))
}

/// A value shared between threads.
private final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    var value: Value { mutex.withLock { $0 } }
    func update(_ body: (inout Value) -> Void) { mutex.withLock { body(&$0) } }
}

/// Marks this process as arrived in the folder `barrier` and waits until `count` have; false after 30 s.
private func arriveAndWait(at barrier: String, for count: Int) -> Bool {
    guard FileManager.default.createFile(atPath: barrier + "/\(getpid())", contents: nil) else { return false }
    return waitUntil(
        timeout: 30, interval: 0.001,
        { (try? FileManager.default.contentsOfDirectory(atPath: barrier).count) ?? 0 >= count })
}

/// Starts `count` threads running `body(index)`; the result turns true once all have returned.
private func runThreadsInBackground(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> Shared<Bool> {
    let finished = Shared(0)
    let done = Shared(false)
    for index in 0..<count {
        Thread.detachNewThread {
            body(index)
            finished.update { $0 += 1 }
            if finished.value == count { done.update { $0 = true } }
        }
    }
    return done
}

/// Runs `body(index)` on `count` threads at once; whether all returned within two minutes.
private func runThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> Bool {
    let done = runThreadsInBackground(count, body)
    return waitUntil(timeout: 120, interval: 0.001, { done.value })
}
