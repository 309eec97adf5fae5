import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// `Inbox.deliver`: the hook mail-import code uses to hand a file to the app (ARCHITECTURE.md, "Delivery").
@Suite struct DeliveryTests {
    @Test func deliverDataReturnsTheURLOfASealedFileInTheInbox() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let data = Data(pattern(10_000))

        let url = try scratch.inbox.deliver(data: data, suggestedName: "note.txt")

        #expect(url.path == scratch.inboxPath("note.txt"))
        #expect(url.deletingLastPathComponent().path == scratch.container.path(.inbox))
        #expect(try Data(contentsOf: url) == data)
        let delivered = try status(url.path)
        #expect(delivered.kind == .regular)
        #expect(delivered.mode == 0o444)
        #expect(delivered.size == Int64(data.count))
        #expect(delivered.linkCount == 1)
        #expect(try scratch.inboxEntries() == ["note.txt"])
    }

    @Test func deliverContentsOfCopiesTheFileUnderItsOwnName() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(300_000)
        try makeFile(scratch.outside("report.pdf"), bytes, mode: 0o640)
        let source = try status(scratch.outside("report.pdf"))

        let url = try scratch.inbox.deliver(contentsOf: URL(fileURLWithPath: scratch.outside("report.pdf")))

        #expect(url.path == scratch.inboxPath("report.pdf"))
        #expect(try readFile(url.path) == bytes)
        let delivered = try status(url.path)
        #expect(delivered.mode == 0o444)
        #expect(!delivered.isSameFile(as: source), "a copy, never the importer's own file")
        // The importer's file is left as it was.
        let after = try status(scratch.outside("report.pdf"))
        #expect(after.isSameFile(as: source))
        #expect(after.mode == 0o640)
        #expect(after.linkCount == 1)
        #expect(try readFile(scratch.outside("report.pdf")) == bytes)
    }

    @Test func deliverContentsOfTakesASuggestedName() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.outside("tmp123"), Array("body".utf8))

        let url = try scratch.inbox.deliver(
            contentsOf: URL(fileURLWithPath: scratch.outside("tmp123")), suggestedName: "Invoice March.pdf")

        #expect(url.lastPathComponent == "Invoice March.pdf")
        #expect(try readFile(scratch.inboxPath("Invoice March.pdf")) == Array("body".utf8))
        #expect(try scratch.inboxEntries() == ["Invoice March.pdf"])
    }

    @Test func deliveringAnEmptyFileWorks() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }

        let url = try scratch.inbox.deliver(data: Data(), suggestedName: "empty.txt")

        #expect(try status(url.path).size == 0)
        #expect(try status(url.path).mode == 0o444)
    }

    @Test func aClashGetsTheNextFreeName() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }

        let urls = try (0..<4).map { index in
            try scratch.inbox.deliver(data: Data("copy \(index)".utf8), suggestedName: "report.pdf")
        }

        #expect(urls.map(\.lastPathComponent) == ["report.pdf", "report-1.pdf", "report-2.pdf", "report-3.pdf"])
        for (index, url) in urls.enumerated() {
            #expect(try readFile(url.path) == Array("copy \(index)".utf8), "nothing is overwritten")
        }
        #expect(try scratch.inboxEntries() == ["report-1.pdf", "report-2.pdf", "report-3.pdf", "report.pdf"])
    }

    @Test func aBatchReturnsEachItem() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.outside("a.txt"), Array("aaa".utf8))

        let items = try scratch.inbox.deliver([
            .file(path: Array(scratch.outside("a.txt").utf8), name: nil),
            .data(Data("bb".utf8), name: try name("b.txt")),
            .data(Data("c".utf8), name: try name("a.txt")),
        ])

        #expect(items.map(\.name.string) == ["a.txt", "b.txt", "a-1.txt"])
        #expect(items.map(\.size) == [3, 2, 1])
        #expect(try items.map { try $0.contents() } == [Data("aaa".utf8), Data("bb".utf8), Data("c".utf8)])
        #expect(try scratch.inbox.items().map(\.name.string) == ["a-1.txt", "a.txt", "b.txt"])
    }

    // MARK: sanitised names

    @Test func aPathIsNeverFollowedOutOfTheInbox() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }

        let url = try scratch.inbox.deliver(data: Data("x".utf8), suggestedName: "../etc/passwd")

        let delivered = url.lastPathComponent
        #expect(!delivered.contains("/"))
        #expect(!delivered.hasPrefix("."))
        #expect(delivered.contains("passwd"))
        #expect(url.deletingLastPathComponent().path == scratch.container.path(.inbox))
        #expect(try scratch.inboxEntries() == [delivered])
        #expect(!exists(scratch.container.path(.documents) + "/etc"))
        #expect(!exists(scratch.outside("c/Documents/etc")))
    }

    @Test(arguments: [
        (".hidden", "hidden"),
        ("...dots.txt", "dots.txt"),
        ("", "attachment"),
        (".", "attachment"),
        ("..", "attachment"),
        ("a/b.pdf", "a_b.pdf"),
        ("nul\u{0}.txt", "nul_.txt"),
        ("résumé.pdf", "résumé.pdf"),
    ])
    func suggestedNamesAreSanitised(_ suggested: String, _ expected: String) throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }

        let url = try scratch.inbox.deliver(data: Data("x".utf8), suggestedName: suggested)

        #expect(url.lastPathComponent == expected)
        #expect(try scratch.inboxEntries() == [expected])
        #expect(Inbox.sanitizedName(Array(suggested.utf8)).string == expected)
    }

    @Test func aLongNameIsCutTo255BytesKeepingItsExtension() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let long = String(repeating: "n", count: 296) + ".pdf"
        #expect(long.utf8.count == 300)

        let first = try scratch.inbox.deliver(data: Data("1".utf8), suggestedName: long)
        let second = try scratch.inbox.deliver(data: Data("2".utf8), suggestedName: long)

        for url in [first, second] {
            #expect(url.lastPathComponent.utf8.count <= 255)
            #expect(url.lastPathComponent.hasSuffix(".pdf"))
            #expect(url.lastPathComponent.hasPrefix("nnnn"))
        }
        #expect(first.lastPathComponent.utf8.count == 255)
        #expect(first != second)
        #expect(try readFile(second.path) == Array("2".utf8))
    }

    @Test func aLongMultibyteNameStaysValidUTF8() {
        let long = String(repeating: "日", count: 100) + ".txt"  // 304 bytes
        let sanitized = Inbox.sanitizedName(Array(long.utf8))
        #expect(sanitized.bytes.count <= 255)
        #expect(sanitized.isValidUTF8)
        #expect(sanitized.string.hasSuffix(".txt"))
    }

    // MARK: staging

    @Test func noStagingFileIsLeftAfterSuccess() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.outside("big.bin"), pattern(2 * 1024 * 1024))

        _ = try scratch.inbox.deliver(data: Data("a".utf8), suggestedName: "a.txt")
        _ = try scratch.inbox.deliver(contentsOf: URL(fileURLWithPath: scratch.outside("big.bin")))

        #expect(try scratch.inboxEntries() == ["a.txt", "big.bin"])
    }

    @Test func aMissingSourceIsNoSuchItemAndLeavesNothing() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }

        let error = expectError(.noSuchItem) {
            try scratch.inbox.deliver(contentsOf: URL(fileURLWithPath: scratch.outside("missing.pdf")))
        }

        #expect(error?.exitStatus == 66)
        #expect(error?.message.contains("missing.pdf") == true)
        #expect(try scratch.inboxEntries() == [])
    }

    @Test func aSourceThatIsNoRegularFileIsRefusedAndLeavesNothing() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(atPath: scratch.outside("folder"), withIntermediateDirectories: false)
        #expect(mkfifo(scratch.outside("fifo"), 0o644) == 0)

        expectError(.noSuchItem) {
            try scratch.inbox.deliver(contentsOf: URL(fileURLWithPath: scratch.outside("folder")))
        }
        expectError(.noSuchItem) {
            try scratch.inbox.deliver(contentsOf: URL(fileURLWithPath: scratch.outside("fifo")))
        }

        #expect(try scratch.inboxEntries() == [])
    }

    @Test func aFailureInABatchLeavesNoStagingFile() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }

        expectError(.noSuchItem) {
            try scratch.inbox.deliver([
                .data(Data("ok".utf8), name: try name("ok.txt")),
                .file(path: Array(scratch.outside("missing").utf8), name: nil),
            ])
        }

        #expect(try scratch.inboxEntries().allSatisfy { !$0.hasPrefix(".") })
    }

    @Test func stagingNamesAreNotItems() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.inboxPath(".inbox-staging.1.2"), [1, 2, 3])
        _ = try scratch.inbox.deliver(data: Data("a".utf8), suggestedName: "a.txt")

        #expect(try scratch.inbox.items().map(\.name.string) == ["a.txt"])
        #expect(try scratch.container.list(.inbox).map(\.name.string) == ["a.txt"])
        expectError(.noSuchItem) { try scratch.inbox.item(named: name("missing.txt")) }
    }

    // MARK: no partial file is ever visible

    @Test func aReaderNeverSeesAPartialFile() async throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let size = 1024 * 1024
        let bytes = pattern(size)
        try makeFile(scratch.outside("blob.bin"), bytes)
        let source = URL(fileURLWithPath: scratch.outside("blob.bin"))
        let inbox = scratch.inbox
        let inboxPath = scratch.container.path(.inbox)
        let deliverers = 4
        let rounds = 20
        let done = Guarded(0)
        let failures = Guarded<[String]>([])
        let observations = Guarded(0)
        let partial = Guarded<[String]>([])

        await onThreads(deliverers + 1) { index in
            if index == deliverers {
                // The poller: every name it can see must be a whole file.
                guard let folder = try? FileDescriptor(inboxPath, [.directory]) else {
                    failures.update { $0.append("cannot open the Inbox") }
                    return
                }
                while done.value < deliverers {
                    guard let names = try? folder.entries() else { continue }
                    for name in names where !name.isHidden {
                        guard let seen = try? fileStatus(in: folder.rawValue, name) else { continue }
                        observations.update { $0 += 1 }
                        if seen.size != Int64(size) {
                            partial.update { if $0.count < 10 { $0.append("\(name): \(seen.size) bytes") } }
                        }
                    }
                }
                return
            }
            for round in 0..<rounds {
                do {
                    if (index + round) % 2 == 0 {
                        _ = try inbox.deliver(contentsOf: source, suggestedName: "blob.bin")
                    } else {
                        _ = try inbox.deliver(data: Data(bytes), suggestedName: "blob.bin")
                    }
                } catch {
                    failures.update { $0.append("\(error)") }
                }
            }
            done.update { $0 += 1 }
        }

        #expect(failures.value == [])
        #expect(partial.value == [])
        #expect(observations.value > 0, "the poller saw delivered files")
        let names = try scratch.inboxEntries()
        #expect(names.count == deliverers * rounds)
        #expect(!names.contains { $0.hasPrefix(".") })
        #expect(Set(names).count == names.count)
        for name in names {
            #expect(try readFile(scratch.inboxPath(name)) == bytes, "\(name)")
        }
    }
}
