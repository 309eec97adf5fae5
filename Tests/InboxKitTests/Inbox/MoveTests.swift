import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// Move before edit: an Inbox item goes into Documents before anything changes it (ARCHITECTURE.md, "How an arrival
/// flows").
@Suite struct MoveTests {
    @Test func aMoveIsARenameOfTheSameFile() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(50_000)
        _ = try scratch.inbox.deliver(data: Data(bytes), suggestedName: "report.pdf")
        let before = try status(scratch.inboxPath("report.pdf"))
        #expect(before.mode == 0o444)

        let document = try scratch.inbox.moveToDocuments(name("report.pdf"), reason: "test")

        #expect(document.name == (try name("report.pdf")))
        #expect(document.path == Array(scratch.documentsPath("report.pdf").utf8))
        #expect(document.url.path == scratch.documentsPath("report.pdf"))
        let after = try status(scratch.documentsPath("report.pdf"))
        #expect(after.isSameFile(as: before), "a rename keeps the inode")
        #expect(after.mode & 0o200 != 0, "the owner's write bit is back")
        #expect(after.mode & 0o022 == 0, "no one else gets write access")
        #expect(try readFile(scratch.documentsPath("report.pdf")) == bytes)
        #expect(!exists(scratch.inboxPath("report.pdf")))
        #expect(try scratch.inboxEntries() == [])
        #expect(try scratch.journalEntries() == [], "a rename needs no journal")
    }

    @Test func aClashInDocumentsGetsTheNextName() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.documentsPath("report.pdf"), Array("the user's own".utf8))
        _ = try scratch.inbox.deliver(data: Data("delivered".utf8), suggestedName: "report.pdf")
        let delivered = try status(scratch.inboxPath("report.pdf"))

        let document = try scratch.inbox.moveToDocuments(name("report.pdf"), reason: "test")

        #expect(document.name.string == "report 2.pdf")
        #expect(document.path == Array(scratch.documentsPath("report 2.pdf").utf8))
        #expect(try status(scratch.documentsPath("report 2.pdf")).isSameFile(as: delivered))
        #expect(try readFile(scratch.documentsPath("report 2.pdf")) == Array("delivered".utf8))
        #expect(try readFile(scratch.documentsPath("report.pdf")) == Array("the user's own".utf8))
        #expect(try scratch.documentsEntries() == ["report 2.pdf", "report.pdf"])
        #expect(try scratch.inboxEntries() == [])
    }

    @Test func clashesCountUpInDocuments() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        var moved: [String] = []
        for round in 0..<3 {
            _ = try scratch.inbox.deliver(data: Data("round \(round)".utf8), suggestedName: "notes.txt")
            moved.append(try scratch.inbox.moveToDocuments(name("notes.txt"), reason: "test").name.string)
        }
        #expect(moved == ["notes.txt", "notes 2.txt", "notes 3.txt"])
        #expect(try readFile(scratch.documentsPath("notes 3.txt")) == Array("round 2".utf8))
    }

    @Test func aMissingItemIsNoSuchItem() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }

        let error = expectError(.noSuchItem) { try scratch.inbox.moveToDocuments(name("missing.pdf"), reason: "test") }

        #expect(error?.exitStatus == 66)
        #expect(try scratch.documentsEntries() == [])
    }

    @Test func aStagingNameIsRefused() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.inboxPath(".inbox-staging.1.2"), [1])

        expectError(.refused) { try scratch.inbox.moveToDocuments(name(".inbox-staging.1.2"), reason: "test") }

        #expect(exists(scratch.inboxPath(".inbox-staging.1.2")))
        #expect(try scratch.documentsEntries() == [])
    }

    @Test func aSymlinkIsRefusedAndItsTargetUntouched() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.outside("secret.txt"), Array("secret".utf8), mode: 0o600)
        let target = try status(scratch.outside("secret.txt"))
        #expect(symlink(scratch.outside("secret.txt"), scratch.inboxPath("link.txt")) == 0)

        let error = expectError(.refused) { try scratch.inbox.moveToDocuments(name("link.txt"), reason: "test") }

        #expect(error?.exitStatus == 77)
        #expect(error?.message.contains("symbolic link") == true)
        #expect(try status(scratch.inboxPath("link.txt")).kind == .symbolicLink, "the link is still there")
        let after = try status(scratch.outside("secret.txt"))
        #expect(after.isSameFile(as: target))
        #expect(after.mode == 0o600)
        #expect(after.linkCount == 1)
        #expect(try readFile(scratch.outside("secret.txt")) == Array("secret".utf8))
        #expect(try scratch.documentsEntries() == [])
    }

    @Test func aFIFOIsRefused() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // Opening a FIFO for reading without O_NONBLOCK would hang this test: a refusal must not open it.
        #expect(mkfifo(scratch.inboxPath("pipe"), 0o644) == 0)

        expectError(.refused) { try scratch.inbox.moveToDocuments(name("pipe"), reason: "test") }

        #expect(try status(scratch.inboxPath("pipe")).kind == .fifo)
        #expect(try scratch.documentsEntries() == [])
    }

    /// A folder moves whole, as the watcher moves it: one rename, a clash name on a clash, one `moved` record.
    @Test func aFolderMovesWhole() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        for folder in [scratch.inboxPath("scans"), scratch.documentsPath("scans")] {
            try FileManager.default.createDirectory(atPath: folder + "/deep", withIntermediateDirectories: true)
            try Data("page".utf8).write(to: URL(fileURLWithPath: folder + "/deep/page.txt"))
        }
        let inode = try status(scratch.inboxPath("scans")).inode

        let document = try scratch.inbox.moveToDocuments(name("scans"), reason: "test")

        #expect(try document.name == name("scans 2"), "the clash name, as a file gets")
        #expect(try status(scratch.documentsPath("scans 2")).inode == inode, "renamed, not copied")
        #expect(try String(contentsOfFile: scratch.documentsPath("scans 2/deep/page.txt"), encoding: .utf8) == "page")
        #expect(!FileManager.default.fileExists(atPath: scratch.inboxPath("scans")))
        let moved = try scratch.inbox.log.records(kinds: [.moved])
        #expect(moved.map { $0.fields["to"] } == ["Documents/scans 2"])
    }

    @Test func aFileWithAHardLinkOutsideIsCopiedNeverRenamed() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(3 * 1024 * 1024 + 5)
        try makeFile(scratch.outside("shared.pdf"), bytes, mode: 0o640)
        #expect(link(scratch.outside("shared.pdf"), scratch.inboxPath("shared.pdf")) == 0)
        let outside = try status(scratch.outside("shared.pdf"))
        #expect(outside.linkCount == 2)

        let document = try scratch.inbox.moveToDocuments(name("shared.pdf"), reason: "test")

        #expect(document.name.string == "shared.pdf")
        let copy = try status(scratch.documentsPath("shared.pdf"))
        #expect(!copy.isSameFile(as: outside), "a private copy, not the shared inode")
        #expect(copy.linkCount == 1)
        #expect(copy.mode & 0o200 != 0)
        #expect(copy.modified == outside.modified, "the copy keeps the modification date")
        #expect(try readFile(scratch.documentsPath("shared.pdf")) == bytes)
        // The file outside is exactly as it was, and no longer linked into the container.
        let after = try status(scratch.outside("shared.pdf"))
        #expect(after.isSameFile(as: outside))
        #expect(after.mode == 0o640)
        #expect(after.linkCount == 1)
        #expect(try readFile(scratch.outside("shared.pdf")) == bytes)
        #expect(try scratch.inboxEntries() == [], "no item and no claim left")
        #expect(try scratch.journalEntries() == [], "the intent is gone once the move is done")
    }

    /// A folder item whose files include one with a hard link outside is copied, never renamed whole: Documents
    /// would then hold the outside file itself, and an edit there would rewrite it (issue 48).
    @Test(arguments: [false, true])
    func aFolderHoldingAFileWithAHardLinkOutsideIsCopied(byTheWatcher: Bool) throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.outside("shared.txt"), Array("outside".utf8), mode: 0o644)
        try FileManager.default.createDirectory(
            atPath: scratch.inboxPath("scans/deep"), withIntermediateDirectories: true)
        #expect(link(scratch.outside("shared.txt"), scratch.inboxPath("scans/deep/shared.txt")) == 0)
        try makeFile(scratch.inboxPath("scans/page.txt"), Array("page".utf8), mode: 0o640)
        #expect(symlink("page.txt", scratch.inboxPath("scans/link")) == 0)
        #expect(chmod(scratch.inboxPath("scans/deep"), 0o750) == 0)
        let outside = try status(scratch.outside("shared.txt"))
        let folder = try status(scratch.inboxPath("scans"))

        if byTheWatcher {
            var options = WatchOptions()
            options.once = true
            options.onArrival = .move
            options.cleanInterval = nil
            try Watcher(inbox: scratch.inbox, options: options).runBlocking()
        } else {
            _ = try scratch.inbox.moveToDocuments(name("scans"), reason: "test")
        }

        let copied = try status(scratch.documentsPath("scans/deep/shared.txt"))
        #expect(!copied.isSameFile(as: outside), "a copy, not the file outside")
        #expect(copied.linkCount == 1 && copied.mode & 0o200 != 0)
        #expect(!(try status(scratch.documentsPath("scans")).isSameFile(as: folder)), "copied, not renamed")
        #expect(try status(scratch.documentsPath("scans/page.txt")).mode == 0o640 | S_IWUSR)
        #expect(try status(scratch.documentsPath("scans/deep")).mode == 0o750)
        #expect(try readFile(scratch.documentsPath("scans/page.txt")) == Array("page".utf8))
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: scratch.documentsPath("scans/link")) == "page.txt"
        )
        #expect(
            FileManager.default.createFile(
                atPath: scratch.documentsPath("scans/deep/shared.txt"), contents: Data("edited".utf8)))
        #expect(try readFile(scratch.outside("shared.txt")) == Array("outside".utf8), "an edit leaves it as it was")
        #expect(try status(scratch.outside("shared.txt")).linkCount == 1)
        #expect(try scratch.inboxEntries() == [], "no item and no claim left")
        #expect(try scratch.documentsEntries() == ["scans"])
        #expect(try scratch.journalEntries() == [], "the intent is gone once the move is done")
        #expect(try scratch.inbox.log.records(kinds: [.moved]).map { $0.fields["to"] } == ["Documents/scans"])
    }

    @Test func aCopyingMoveAlsoTakesTheNextNameOnAClash() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.documentsPath("shared.pdf"), Array("mine".utf8))
        try makeFile(scratch.outside("shared.pdf"), Array("theirs".utf8))
        #expect(link(scratch.outside("shared.pdf"), scratch.inboxPath("shared.pdf")) == 0)

        let document = try scratch.inbox.moveToDocuments(name("shared.pdf"), reason: "test")

        #expect(document.name.string == "shared 2.pdf")
        #expect(try readFile(scratch.documentsPath("shared.pdf")) == Array("mine".utf8))
        #expect(try readFile(scratch.documentsPath("shared 2.pdf")) == Array("theirs".utf8))
        #expect(try scratch.inboxEntries() == [])
    }

    @Test func prepareForEditingMovesTheItemFirst() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("draft".utf8), suggestedName: "draft.txt")
        let item = try scratch.inbox.item(named: name("draft.txt"))
        #expect(item.status.mode == 0o444)

        let document = try item.prepareForEditing()

        #expect(document.path == Array(scratch.documentsPath("draft.txt").utf8))
        let moved = try status(scratch.documentsPath("draft.txt"))
        #expect(moved.isSameFile(as: item.status))
        #expect(moved.mode & 0o200 != 0)
        #expect(!exists(scratch.inboxPath("draft.txt")))
        expectError(.noSuchItem) { try item.prepareForEditing() }
    }

    @Test func anItemMovesThroughItsOwnMethod() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("x".utf8), suggestedName: "x.txt")

        let document = try scratch.inbox.item(named: name("x.txt")).moveToDocuments()

        #expect(document.name.string == "x.txt")
        #expect(try scratch.documentsEntries() == ["x.txt"])
        #expect(try scratch.inboxEntries() == [])
    }

    @Test func aNameThatIsNotUTF8MovesExactly() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let odd: [UInt8] = [0x61, 0xFF, 0xFE, 0x0A, 0x62]
        let folder = try FileDescriptor(scratch.container.path(.inbox), [.directory])
        _ = try FileDescriptor(at: folder.rawValue, odd, [.writeOnly, .create, .exclusive], mode: 0o444)

        let document = try scratch.inbox.moveToDocuments(try #require(FileName(bytes: odd)), reason: "test")

        #expect(document.name.bytes == odd)
        #expect(document.path == Array((scratch.container.path(.documents) + "/").utf8) + odd)
        let documents = try FileDescriptor(scratch.container.path(.documents), [.directory])
        #expect(try fileStatus(in: documents.rawValue, odd).kind == .regular)
        #expect(try documents.entries().map(\.bytes).contains(odd))
        #expect(try folder.entries().isEmpty)
    }

    // MARK: races

    /// 16 movers, each with its own `Inbox` as separate processes would have, move one item at once.
    private func race(_ scratch: Scratch, _ item: FileName) async -> (moved: [String], errors: [ContainerError]) {
        let container = scratch.container
        let moved = Guarded<[String]>([])
        let errors = Guarded<[ContainerError]>([])
        await onThreads(16) { _ in
            do {
                let inbox = try Inbox(container: container)
                let document = try inbox.moveToDocuments(item, reason: "race")
                moved.update { $0.append(document.name.string) }
            } catch let error as ContainerError {
                errors.update { $0.append(error) }
            } catch {
                errors.update { $0.append(ContainerError(.failure, "\(error)")) }
            }
        }
        return (moved.value, errors.value)
    }

    @Test func sixteenMoversRenamingOneItemAreServedOnce() async throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(100_000)
        _ = try scratch.inbox.deliver(data: Data(bytes), suggestedName: "report.pdf")

        let (moved, errors) = await race(scratch, try name("report.pdf"))

        #expect(moved == ["report.pdf"])
        #expect(errors.count == 15)
        #expect(errors.allSatisfy { $0.code == .noSuchItem }, "\(errors.map(\.message))")
        #expect(try scratch.documentsEntries() == ["report.pdf"], "in Documents exactly once")
        #expect(try readFile(scratch.documentsPath("report.pdf")) == bytes)
        #expect(try scratch.inboxEntries() == [])
    }

    @Test func sixteenMoversCopyingOneHardLinkedItemAreServedOnce() async throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let bytes = pattern(1024 * 1024)
        try makeFile(scratch.outside("shared.pdf"), bytes, mode: 0o644)
        #expect(link(scratch.outside("shared.pdf"), scratch.inboxPath("shared.pdf")) == 0)
        let outside = try status(scratch.outside("shared.pdf"))

        let (moved, errors) = await race(scratch, try name("shared.pdf"))

        #expect(moved == ["shared.pdf"])
        #expect(errors.count == 15)
        #expect(errors.allSatisfy { $0.code == .noSuchItem }, "\(errors.map(\.message))")
        #expect(try scratch.documentsEntries() == ["shared.pdf"], "in Documents exactly once")
        #expect(try readFile(scratch.documentsPath("shared.pdf")) == bytes)
        #expect(!(try status(scratch.documentsPath("shared.pdf"))).isSameFile(as: outside))
        #expect(try scratch.inboxEntries() == [], "no item and no claim left")
        #expect(try scratch.journalEntries() == [])
        let after = try status(scratch.outside("shared.pdf"))
        #expect(after.isSameFile(as: outside))
        #expect(after.linkCount == 1)
        #expect(after.mode == 0o644)
        #expect(try readFile(scratch.outside("shared.pdf")) == bytes)
    }
}
