import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// The watcher's pipeline (`watch --once --on-arrival move`) with each system call failing in turn: a file,
/// a file written in place, a hard-linked file (made private first) and a folder. After the faulty run and a
/// second, clean one: each item is in Documents exactly once with exactly one `arrived` and one `moved`
/// record, every `moved` record names a file that is there, and the other hard link is untouched.
@Suite struct WatcherFaultTests {
    struct World {
        let scratch: Scratch
        let files: [String: [UInt8]]
        let link: String
    }

    static let folderFile = "inside.txt"

    static func setup() throws -> World {
        let scratch = try Scratch.withInbox()
        let files = [
            "a.txt": pattern(3_000, seed: 1), "b.pdf": pattern(9_000, seed: 2), "c.bin": pattern(5_000, seed: 3),
        ]
        _ = try scratch.inbox.deliver(data: Data(files["a.txt"]!), suggestedName: "a.txt")
        try makeFile(scratch.inboxPath("b.pdf"), files["b.pdf"]!)
        let link = scratch.outside("c.bin")
        try makeFile(link, files["c.bin"]!)
        #expect(Glibc.link(link, scratch.inboxPath("c.bin")) == 0)
        try FileManager.default.createDirectory(atPath: scratch.inboxPath("d"), withIntermediateDirectories: false)
        try makeFile(scratch.inboxPath("d/" + folderFile), Array("in a folder".utf8))
        return World(scratch: scratch, files: files, link: link)
    }

    static func watchOnce(_ inbox: Inbox) throws {
        var options = WatchOptions()
        options.once = true
        options.onArrival = .move
        options.cleanInterval = nil
        try runRetryingBusy(inbox, options)
    }

    /// Runs a watcher of `inbox` to its end. A child another test spawns holds a copy of the watcher lock's
    /// descriptor until it execs: busy for a moment, which says nothing of the fault, so busy is tried again.
    static func runRetryingBusy(_ inbox: Inbox, _ options: WatchOptions) throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let outcome = Result { () throws(ContainerError) in
                try Watcher(inbox: inbox, options: options).runBlocking()
            }
            guard case .failure(let error) = outcome, error.code == .busy, ContinuousClock.now < deadline else {
                return try outcome.get()
            }
            usleep(10_000)
        }
    }

    @Test(.long) func everyCallOfTheWatcherPipeline() throws {
        try FaultSweep(
            setup: Self.setup,
            operation: { world in try Self.watchOnce(world.scratch.inbox) },
            check: { world, outcome, plan in
                expectClearError(outcome, plan)
                expectRetriedInterrupt(outcome, plan)
                try Self.expectNothingLostNothingTwice(world, plan, when: "after the fault")
                try Self.watchOnce(world.scratch.inbox)
                try Self.expectNothingLostNothingTwice(world, plan, when: "after a clean run")
                try Self.expectAllMoved(world, plan)
            },
            teardown: { $0.scratch.remove() }
        ).run("watcher pipeline")
    }

    /// Each item once, in the Inbox or in Documents; every `moved` record names a file in Documents; no item
    /// arrived twice; the other hard link untouched.
    static func expectNothingLostNothingTwice(_ world: World, _ plan: SyscallFaultPlan, when: String) throws {
        let scratch = world.scratch
        let inbox = try scratch.inboxEntries().filter { !$0.hasPrefix(".") }
        let documents = try scratch.documentsEntries()
        for (name, bytes) in world.files {
            let copies =
                try inbox.filter { try isFile(scratch.inboxPath($0)) && readFile(scratch.inboxPath($0)) == bytes }
                + documents.filter {
                    try isFile(scratch.documentsPath($0)) && readFile(scratch.documentsPath($0)) == bytes
                }
            #expect(copies.count == 1, "\(plan.summary): \(when): '\(name)' is there \(copies.count) times")
        }
        let folders = (inbox.map(scratch.inboxPath) + documents.map(scratch.documentsPath)).filter {
            exists($0 + "/" + folderFile)
        }
        #expect(folders.count == 1, "\(plan.summary): \(when): the folder is there \(folders.count) times")
        let log = try scratch.inbox.log.records()
        for to in log.filter({ $0.event == "moved" }).compactMap({ $0.fields["to"] }) {
            #expect(
                exists(scratch.container.root + "/" + to), "\(plan.summary): \(when): moved to '\(to)', not there")
        }
        let arrived = log.filter { $0.event == "arrived" }.compactMap { $0.fields["path"] }
        #expect(Set(arrived).count == arrived.count, "\(plan.summary): \(when): arrived twice: \(arrived.sorted())")
        #expect(try readFile(world.link) == world.files["c.bin"], "\(plan.summary): \(when): the other link changed")
        #expect(try status(world.link).mode & 0o777 == 0o644, "\(plan.summary): \(when): the other link's mode")
    }

    /// After the clean run everything is in Documents, each with one `moved` record.
    static func expectAllMoved(_ world: World, _ plan: SyscallFaultPlan) throws {
        let scratch = world.scratch
        // Only a hidden name of the other hard link may stay (the private copy's swap could not look at what it
        // exchanged, so it left it rather than unlink it blind); it is swept with abandoned staging files.
        let other = try status(world.link)
        let left = try scratch.inboxEntries().filter {
            !($0.hasPrefix(".inbox-staging.") && (try? status(scratch.inboxPath($0)))?.isSameFile(as: other) == true)
        }
        #expect(left.isEmpty, "\(plan.summary): left in the Inbox: \(left)")
        let moved = try scratch.inbox.log.records(kinds: [.moved]).compactMap { $0.fields["to"] }.sorted()
        let documents = try scratch.documentsEntries().map { "Documents/" + $0 }.sorted()
        #expect(moved == documents, "\(plan.summary): moved records \(moved), Documents \(documents)")
        #expect(documents.count == 4, "\(plan.summary): \(documents)")
    }

    private static func isFile(_ path: String) throws -> Bool {
        try status(path).kind == .regular
    }
}
