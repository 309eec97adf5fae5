import AppContainer
import Foundation
import Glibc
import InboxFormats
import InboxKit
import TestSupport
import Testing

/// Backup and restore with each system call failing in turn (issue 8; cleanup and setup: `CleanupSetupFaultTests`).
@Suite(.long) struct BackupRestoreFaultTests {
    @Test func backup() throws {
        try FaultSweep(
            setup: {
                let scratch = try Scratch.withInbox()
                _ = try scratch.inbox.deliver(data: Data(pattern(4_000)), suggestedName: "a.bin")
                try makeFile(scratch.documentsPath("letter.txt"), Array("dear".utf8))
                return scratch
            },
            operation: { scratch in
                _ = try BackupArchive(path: scratch.outside("backup.tar")).write(from: scratch.container)
            },
            check: { scratch, outcome, plan in
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                let beside = try FileDescriptor(scratch.path, [.directory]).entries().map(\.string).sorted()
                let partial = beside.filter { $0.hasSuffix(".partial") }
                #expect(partial.isEmpty || plan.injected?.name == "unlinkat", "\(plan.summary): left \(partial)")
                guard exists(scratch.outside("backup.tar")) else { return }
                // There at its name: complete, even if a later step (the folder's fsync) failed.
                let restored = try Scratch.withInbox()
                defer { restored.remove() }
                _ = try BackupArchive(path: scratch.outside("backup.tar")).restore(into: restored.container)
                #expect(try readFile(restored.documentsPath("letter.txt")) == Array("dear".utf8), "\(plan.summary)")
                #expect(try readFile(restored.inboxPath("a.bin")) == pattern(4_000), "\(plan.summary)")
            },
            teardown: { $0.remove() }
        ).run("backup")
    }

    /// All or nothing (issue 9): after each fault the container is exactly as it was, and a second restore then
    /// completes, or it is fully restored (a failure after the switch: the sync). Nothing is written outside it.
    @Test func restore() throws {
        let source = try Scratch.withInbox()
        defer { source.remove() }
        try makeFile(source.documentsPath("letter.txt"), Array("dear".utf8))
        try makeFile(source.container.root + "/Library/Preferences/app.plist", Array("<plist/>".utf8))
        // A claim name with no intent: the restore renames it in the staging folder.
        try makeFile(source.inboxPath(".inbox-claim.1.2"), Array("claimed".utf8), mode: 0o444)
        let archive = source.outside("backup.tar")
        _ = try BackupArchive(path: archive).write(from: source.container)
        let reference = try Scratch.withInbox()
        defer { reference.remove() }
        _ = try BackupArchive(path: archive).restore(into: reference.container)
        let restored = try treeListing(reference.container.root)
        try FaultSweep(
            setup: { () throws -> (Scratch, [String], Guarded<[String]>) in
                let scratch = try Scratch.withInbox()
                return (scratch, try treeListing(scratch.container.root), Guarded([]))
            },
            operation: { scratch, _, warnings in
                let report = try BackupArchive(path: archive).restore(into: scratch.container)
                warnings.update { $0 = report.warnings }
            },
            check: { context, outcome, plan in
                let (scratch, before, warnings) = context
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                let beside = try FileDescriptor(scratch.path, [.directory]).entries().map(\.string).sorted()
                #expect(beside == ["c"], "\(plan.summary): written outside the container: \(beside)")
                let after = try treeListing(scratch.container.root)
                if case .success = outcome {
                    if !warnings.value.isEmpty {
                        // The staging folder could not be removed once switched in: the next restore removes it
                        // (waiting for the lock, which a child spawned meanwhile by another test may hold a moment).
                        #expect(plan.injected != nil, "\(plan.summary): a warning with no fault: \(warnings.value)")
                        _ = try RestoreSwitch(container: scratch.container)
                    }
                    #expect(try treeListing(scratch.container.root) == restored, "\(plan.summary): not restored")
                    return
                }
                if after == restored { return }  // failed once switched in: the sync
                #expect(after == before, "\(plan.summary): neither as it was nor restored")
                _ = try BackupArchive(path: archive).restore(into: scratch.container)
                #expect(try treeListing(scratch.container.root) == restored, "\(plan.summary): the retry")
            },
            teardown: { $0.0.remove() }
        ).run("restore")
    }
}
