import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// `EventLog.append`, and rotation, with each system call failing in turn: the log reads back with seqs strictly
/// increasing, no torn or repeated record; a failed append throws and leaves none of its records; the next append
/// works.
@Suite struct EventLogFaultTests {
    struct World {
        let folder: String
        let log: EventLog
    }

    /// A log with `existing` records, a size past which the append under test rotates it, and `fresh`: whether the
    /// appending instance is new (so it opens the files and reads the tail first).
    static func sweep(existing: Int, fresh: Bool, keepRotated: Int = 100) -> FaultSweep<World> {
        FaultSweep(
            setup: {
                let folder = FileManager.default.temporaryDirectory.path + "/eventlog-faults-\(UUID().uuidString)"
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                var log = try EventLog(directory: folder, maxBytes: 500, keepRotated: keepRotated)
                for index in 0..<existing { try log.append(Event(.arrived, ["n": .int(Int64(index))])) }
                if fresh { log = try EventLog(directory: folder, maxBytes: 500, keepRotated: keepRotated) }
                return World(folder: folder, log: log)
            },
            operation: { world in
                try world.log.append((0..<3).map { Event(.moved, ["n": .int(Int64(100 + $0))]) })
            },
            check: { world, outcome, plan in
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                let records = try EventLog(directory: world.folder).records()
                let seqs = records.map(\.seq)
                #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "\(plan.summary): seqs \(seqs)")
                let moved = records.filter { $0.event == "moved" }.compactMap { $0.fields["n"] }
                let expected = (try? outcome.get()) != nil ? ["100", "101", "102"] : []
                #expect(moved == expected, "\(plan.summary): records \(moved) after \(outcome)")
                let next = try world.log.append(Event(.rescan))
                #expect(next > (seqs.last ?? 0), "\(plan.summary): next seq \(next) after \(seqs)")
                let again = try EventLog(directory: world.folder).records().map(\.seq)
                #expect(again == seqs + [next], "\(plan.summary): after the next append \(again)")
            },
            teardown: { try? FileManager.default.removeItem(atPath: $0.folder) })
    }

    @Test func appendToAnOpenLog() throws {
        try Self.sweep(existing: 2, fresh: false).run("append (open log)")
    }

    @Test func appendByANewInstance() throws {
        try Self.sweep(existing: 2, fresh: true).run("append (new instance)")
    }

    @Test func appendThatRotates() throws {
        try Self.sweep(existing: 6, fresh: false, keepRotated: 1).run("append with rotation")
    }
}
