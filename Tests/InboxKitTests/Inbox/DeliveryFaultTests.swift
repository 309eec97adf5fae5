import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// `Inbox.deliver` with each of its system calls failing in turn (issue 8): a file is in the Inbox exactly once
/// with its `delivered` record, or not at all, and a failure is a clear error.
@Suite struct DeliveryFaultTests {
    /// What one run delivers: names and contents.
    struct World {
        let scratch: Scratch
        let files: [(name: String, bytes: [UInt8])]
    }

    static func world(_ count: Int) throws -> World {
        let scratch = try Scratch.withInbox()
        let files: [(name: String, bytes: [UInt8])] = (0..<count).map { index in
            ("file\(index).bin", pattern(5_000 + index, seed: UInt64(index + 1)))
        }
        for file in files { try makeFile(scratch.outside(file.name), file.bytes) }
        return World(scratch: scratch, files: files)
    }

    static func sweep(_ count: Int, _ operation: @escaping (World) throws -> Void) -> FaultSweep<World> {
        FaultSweep(
            setup: { try world(count) }, operation: operation, check: checkDelivered,
            teardown: { $0.scratch.remove() })
    }

    @Test func deliverOneFile() throws {
        try Self.sweep(1) { world in
            _ = try world.scratch.inbox.deliver(contentsOf: URL(fileURLWithPath: world.scratch.outside("file0.bin")))
        }.run("deliver(contentsOf:)")
    }

    @Test func deliverData() throws {
        try Self.sweep(1) { world in
            _ = try world.scratch.inbox.deliver(data: Data(world.files[0].bytes), suggestedName: "file0.bin")
        }.run("deliver(data:)")
    }

    @Test func deliverABatchOfThree() throws {
        try Self.sweep(3) { world in
            let names = try world.files.map { try name($0.name) }
            _ = try world.scratch.inbox.deliver([
                .file(path: Array(world.scratch.outside("file0.bin").utf8), name: nil),
                .data(Data(world.files[1].bytes), name: names[1]),
                .file(path: Array(world.scratch.outside("file2.bin").utf8), name: nil),
            ])
        }.run("deliver([three])")
    }
}

/// Every file in the Inbox is one of those delivered, once, with exactly one `delivered` record; every record
/// names a file there; no staging file is left unless removing it was the call that failed.
private func checkDelivered(
    _ world: DeliveryFaultTests.World, _ outcome: Result<Void, any Error>, _ plan: SyscallFaultPlan
) throws {
    expectClearError(outcome, plan)
    expectRetriedInterrupt(outcome, plan)
    let entries = try world.scratch.inboxEntries()
    let items = entries.filter { !$0.hasPrefix(".") }
    if plan.injected?.name != "unlinkat" {
        #expect(items == entries, "\(plan.summary): staging left: \(entries)")
    }
    let delivered = try records(world.scratch).filter { $0.event == "delivered" }
    let logged = delivered.compactMap { $0.fields["path"] }.map { String($0.split(separator: "/").last ?? "") }
    #expect(logged.sorted() == items, "\(plan.summary): records \(logged) for items \(items)")
    var seen: Set<String> = []
    for item in items {
        let bytes = try readFile(world.scratch.inboxPath(item))
        let source = world.files.first { $0.bytes == bytes }
        #expect(source != nil, "\(plan.summary): '\(item)' holds none of the files delivered")
        if let source { #expect(seen.insert(source.name).inserted, "\(plan.summary): '\(source.name)' twice") }
    }
    if case .success = outcome {
        #expect(items.count == world.files.count, "\(plan.summary): succeeded but the Inbox holds \(items)")
    }
}
