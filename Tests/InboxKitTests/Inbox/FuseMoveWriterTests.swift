import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// A file leaves the Inbox on a filesystem without rename flags (bindfs) through a private name, checked before it
/// is linked into Documents (ARCHITECTURE.md, "Moves without rename flags"): a writer on another host (here, the
/// backing folder) that renames a file over the Inbox name at any moment of the move keeps that file, once, and the
/// item decided on is `moved` or an `error`. The writer runs at an exact call, through the fault seam's `before`.
@Suite(.serialized) struct FuseMoveWriterTests {
    /// A container on a fresh bindfs mount, its Inbox holding `item.txt` ("the item").
    struct Setup {
        let mount: FuseMount
        let inbox: Inbox

        /// `mount` outlives the setup in each test (declared before it), so that no open file of the Inbox keeps
        /// it busy when it is unmounted.
        init(_ mount: FuseMount) throws {
            self.mount = mount
            inbox = try Inbox(container: Container.create(at: mount.mountPoint + "/c", appName: "Mail"))
            _ = try inbox.deliver(data: Data("the item".utf8), suggestedName: "item.txt")
        }

        /// `path` on the mount, as the backing folder (the other host) holds it.
        func backing(_ path: String) -> String { mount.backing + path.dropFirst(mount.mountPoint.count) }
        var inboxFolder: String { backing(inbox.container.path(.inbox)) }
        var documents: String { backing(inbox.container.path(.documents)) }

        /// The other host's writer: writes "the writer's" under a dot-name in the Inbox and renames it over
        /// `item.txt`, once, the first time `when` holds.
        func writer(when: @escaping @Sendable (Setup) -> Bool) -> @Sendable () -> Void {
            let done = Guarded(false)
            let setup = self
            return {
                guard !done.value, when(setup) else { return }
                done.update { $0 = true }
                let staged = setup.inboxFolder + "/.writer"
                #expect(FileManager.default.createFile(atPath: staged, contents: Data("the writer's".utf8)))
                #expect(rename(staged, setup.inboxFolder + "/item.txt") == 0)
            }
        }

        /// The names in the Inbox and in Documents (as the backing folder holds them) whose file holds `text`.
        func holding(_ text: String) throws -> [String] {
            var found: [String] = []
            for (folder, shown) in [(inboxFolder, "Inbox/"), (documents, "")] {
                for name in try FileManager.default.contentsOfDirectory(atPath: folder)
                where FileManager.default.contents(atPath: folder + "/" + name) == Data(text.utf8) {
                    found.append(shown + name)
                }
            }
            return found.sorted()
        }

        /// The private names (`.inbox-move.…`) left in the Inbox.
        func privateNames() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: inboxFolder).filter { $0.hasPrefix(".inbox-move.") }
        }

        /// The folder item `d` (`one.txt` in it, of mode `mode`), and a plan whose writer puts `writer.txt` ("w")
        /// into the placeholder the fallback makes for it in Documents, before the `rename` onto it; `writer` says
        /// whether it came.
        func folderItemAndPlaceholderWriter(mode: mode_t) throws
            -> (placeholder: String, writer: Guarded<Bool>, plan: SyscallFaultPlan)
        {
            let item = inbox.container.path(.inbox) + "/d"
            try FileManager.default.createDirectory(atPath: item, withIntermediateDirectories: false)
            try makeFile(item + "/one.txt", Array("one".utf8))
            #expect(chmod(item, mode) == 0)
            let placeholder = documents + "/d"
            let writer = Guarded(false)
            let plan = SyscallFaultPlan(
                before: (
                    "renameat2",
                    {
                        guard !writer.value, exists(placeholder) else { return }
                        writer.update { $0 = true }
                        #expect(
                            FileManager.default.createFile(
                                atPath: placeholder + "/writer.txt", contents: Data("w".utf8)))
                    }
                ))
            return (placeholder, writer, plan)
        }

        func records(_ kind: EventKind) throws -> [EventRecord] { try inbox.log.records(kinds: [kind]) }

        /// A watcher's run (`--once`, moving what arrives) under `plan`, polling quickly.
        func watchOnce(_ plan: SyscallFaultPlan) throws {
            var options = WatchOptions()
            options.once = true
            options.onArrival = .move
            options.cleanInterval = nil
            options.pollInterval = .milliseconds(50)
            options.settle = .milliseconds(50)
            options.singleHost = true
            try plan.run { try Watcher(inbox: inbox, options: options).runBlocking() }
        }
    }

    /// Whether the item was linked into Documents (the moment between `link` and `unlink`).
    static let linked: @Sendable (Setup) -> Bool = { exists($0.documents + "/item.txt") }
    /// Whether the watcher logged the item `arrived` (decided on, not yet moved).
    static let arrived: @Sendable (Setup) -> Bool = { setup in
        let log = setup.backing(setup.inbox.container.stateDirectory + "/events.jsonl")
        return (try? String(contentsOfFile: log, encoding: .utf8))?.contains("\"event\":\"arrived\"") == true
    }

    @Test func aFileRenamedOverTheInboxNameBetweenLinkAndUnlinkStaysByInboxMove() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        let plan = SyscallFaultPlan(before: ("unlinkat", setup.writer(when: Self.linked)))
        let document = try plan.run { try setup.inbox.moveToDocuments(try name("item.txt"), reason: "move") }
        #expect(document.name == (try name("item.txt")))
        #expect(try setup.holding("the writer's") == ["Inbox/item.txt"], "the writer's file, once")
        #expect(try setup.holding("the item") == ["item.txt"])
        #expect(try status(setup.documents + "/item.txt").linkCount == 1)
        #expect(try setup.records(.moved).count == 1)
        #expect(try setup.privateNames().isEmpty)
    }

    /// A deletion's aside is made by a plain rename: a file renamed over the Inbox name while the item is deleted
    /// (here, just before the aside's unlink, where the `link`-and-`unlink` aside unlinked the Inbox name) stays.
    @Test func aFileRenamedOverTheInboxNameWhileTheItemIsDeletedStays() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        let item = try setup.inbox.item(named: try name("item.txt"))
        let plan = SyscallFaultPlan(before: ("unlinkat", setup.writer(when: { _ in true })))
        try plan.run { try item.delete(reason: "test") }
        #expect(try setup.holding("the writer's") == ["Inbox/item.txt"], "the writer's file, once")
        #expect(try setup.holding("the item").isEmpty)
        #expect(try setup.records(.deleted).count == 1)
        let left = try FileManager.default.contentsOfDirectory(atPath: setup.inboxFolder)
        #expect(!left.contains { $0.hasPrefix(".inbox-delete.") }, "\(left)")
    }

    @Test func aFileRenamedOverTheInboxNameJustBeforeInboxMoveIsKeptAndTheItemAnError() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        let plan = SyscallFaultPlan(before: ("renameat2", setup.writer(when: { _ in true })))
        let failure = #expect(throws: ContainerError.self) {
            try plan.run { try setup.inbox.moveToDocuments(try name("item.txt"), reason: "move") }
        }
        #expect(failure?.cause == .staleFile, "\(String(describing: failure))")
        #expect(failure?.message.contains("\n") == false)
        // The item decided on was replaced by the writer's rename: an `error` says so, and nothing reached Documents.
        #expect(try setup.holding("the writer's") == ["Inbox/item.txt"])
        #expect(try setup.holding("the item").isEmpty)
        let errors = try setup.records(.error)
        #expect(errors.count == 1 && errors.first?.fields["path"] == "Documents/Inbox/item.txt", "\(errors)")
        #expect(try setup.records(.moved).isEmpty)
        #expect(try setup.privateNames().isEmpty)
        #expect(try MoveJournal(container: setup.inbox.container).entriesLeft().isEmpty)
    }

    @Test func aFileRenamedOverTheInboxNameBetweenLinkAndUnlinkStaysByTheWatcher() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        try setup.watchOnce(SyscallFaultPlan(before: ("unlinkat", setup.writer(when: Self.linked))))
        // The writer's file arrives itself (and may be moved in the same run): once, wherever it is.
        #expect(try setup.holding("the writer's").count == 1)
        #expect(try setup.holding("the item") == ["item.txt"])
        let moved = try setup.records(.moved).filter { $0.fields["from"] == "Documents/Inbox/item.txt" }
        #expect(moved.contains { $0.fields["to"] == "Documents/item.txt" }, "\(moved)")
        #expect(try setup.privateNames().isEmpty)
    }

    @Test func aFileRenamedOverTheInboxNameJustBeforeTheWatchersMoveIsKeptAndTheItemAnError() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        // `watch --once` ends with the status of its first failure: this one.
        let failure = #expect(throws: ContainerError.self) {
            try setup.watchOnce(SyscallFaultPlan(before: ("renameat2", setup.writer(when: Self.arrived))))
        }
        #expect(failure?.cause == .staleFile, "\(String(describing: failure))")
        #expect(try setup.holding("the writer's").count == 1)
        #expect(try setup.holding("the item").isEmpty, "replaced by the writer's rename")
        let errors = try setup.records(.error).filter { $0.fields["during"] == "move" }
        let log = try setup.inbox.log.records().map(\.line)
        #expect(errors.count == 1 && errors.first?.fields["errno"] == "\(ESTALE)", "\(log)")
        #expect(try setup.privateNames().isEmpty)
    }

    /// A file with a hard link outside is copied (`Mover.copy`), claimed first: a plain `rename` to its claim, never
    /// a `link` and `unlink` of the Inbox name. A writer's rename over the name before the claim, or after it, keeps
    /// the writer's file; the item is an `error` or `moved`, the file outside as it was.
    @Test(arguments: [false, true])
    func aWritersRenameAroundAHardLinkedItemsClaimKeepsTheWritersFile(beforeTheClaim: Bool) throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        #expect(link(setup.inboxFolder + "/item.txt", mount.backing + "/outside.txt") == 0)
        let claimed: @Sendable (Setup) -> Bool = { setup in
            ((try? FileManager.default.contentsOfDirectory(atPath: setup.inboxFolder)) ?? []).contains {
                $0.hasPrefix(".inbox-claim.")
            }
        }
        let plan =
            beforeTheClaim
            ? SyscallFaultPlan(before: ("renameat2", setup.writer(when: { _ in true })))
            : SyscallFaultPlan(before: ("unlinkat", setup.writer(when: claimed)))
        let itemName = try name("item.txt")
        let moved = Result { try plan.run { try setup.inbox.moveToDocuments(itemName, reason: "move") } }
        #expect(try setup.holding("the writer's") == ["Inbox/item.txt"], "the writer's file, once")
        #expect(FileManager.default.contents(atPath: mount.backing + "/outside.txt") == Data("the item".utf8))
        if beforeTheClaim {
            guard case .failure(let failure) = moved, let failure = failure as? ContainerError else {
                Issue.record("moved the writer's file")
                return
            }
            #expect(failure.cause == .staleFile, "\(failure)")
            #expect(try setup.holding("the item").isEmpty)
            #expect(try setup.records(.error).count == 1)
        } else {
            #expect(throws: Never.self) { try moved.get() }
            #expect(try setup.holding("the item") == ["item.txt"])
            #expect(try setup.records(.moved).count == 1)
        }
        let hidden = try FileManager.default.contentsOfDirectory(atPath: setup.inboxFolder).filter {
            $0.hasPrefix(".inbox-")
        }
        #expect(hidden.isEmpty, "\(hidden)")
        #expect(try MoveJournal(container: setup.inbox.container).entriesLeft().isEmpty)
    }

    /// A folder moves by `mkdir` of a placeholder (mode 0) and a `rename` onto it; a writer (root enters a folder of
    /// mode 0) that puts a file into the placeholder in between makes the rename fail: the placeholder becomes a
    /// folder of the item's mode, the writer's file in it, the item stays, an `error` says why, and the next try
    /// takes the next name.
    @Test func aFileWrittenIntoAFoldersPlaceholderFailsTheMoveWithAnErrorAndTheRetryMovesIt() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        let (placeholder, writer, plan) = try setup.folderItemAndPlaceholderWriter(mode: 0o750)
        let failure = #expect(throws: ContainerError.self) {
            try plan.run { try setup.inbox.moveToDocuments(try name("d"), reason: "move") }
        }
        #expect(writer.value, "the writer came between the mkdir and the rename")
        #expect(
            failure?.cause == .notEmpty && failure?.message.contains("\n") == false, "\(String(describing: failure))")
        let errors = try setup.records(.error)
        #expect(errors.count == 1 && errors.first?.fields["path"] == "Documents/Inbox/d", "\(errors)")
        #expect(try readFile(setup.inboxFolder + "/d/one.txt") == Array("one".utf8), "the item stays")
        #expect(try status(placeholder).mode == 0o750, "a folder of the item's mode now")
        #expect(try readFile(placeholder + "/writer.txt") == Array("w".utf8))

        let retried = try setup.inbox.moveToDocuments(try name("d"), reason: "retry")
        #expect(retried.name == (try name("d 2")))
        #expect(try readFile(setup.documents + "/d 2/one.txt") == Array("one".utf8))
        #expect(try readFile(placeholder + "/writer.txt") == Array("w".utf8))
    }

    /// A folder item goes through a private name too: one a writer replaced just before its move (another empty
    /// folder renamed over it) is put back, the item an `error`, and Documents never shows either, not even as the
    /// placeholder of a `mkdir`.
    @Test func aFolderReplacedJustBeforeItsMoveNeverShowsInDocuments() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        let item = setup.inbox.container.path(.inbox) + "/d"
        #expect(mkdir(item, 0o755) == 0)
        let shown = Guarded(false)
        let replaced = Guarded(false)
        let documents = setup.documents
        let inboxFolder = setup.inboxFolder
        let plan = SyscallFaultPlan(
            before: (
                "renameat2",
                {
                    if exists(documents + "/d") { shown.update { $0 = true } }
                    guard !replaced.value else { return }
                    replaced.update { $0 = true }
                    #expect(mkdir(inboxFolder + "/.writer", 0o755) == 0)
                    #expect(FileManager.default.createFile(atPath: inboxFolder + "/.writer/w.txt", contents: nil))
                    // Over the empty folder `d`, as another host's writer may.
                    #expect(rename(inboxFolder + "/.writer", inboxFolder + "/d") == 0)
                }
            ))
        let failure = #expect(throws: ContainerError.self) {
            try plan.run { try setup.inbox.moveToDocuments(try name("d"), reason: "move") }
        }
        #expect(failure?.cause == .staleFile, "\(String(describing: failure))")
        #expect(!shown.value, "Documents showed d")
        #expect(!exists(documents + "/d"))
        #expect(exists(inboxFolder + "/d/w.txt"), "the writer's folder is back under its name")
        #expect(try setup.privateNames().isEmpty)
    }

    /// The same for the watcher: the failure is an `error` record and its disposition stays pending (`watch --once`
    /// ends with it); the next run tries it again, without a second `arrived`, and the folder takes the next name.
    @Test func aFileWrittenIntoAFoldersPlaceholderIsAnErrorAndTheWatchersRetryMovesIt() throws {
        let mount = try FuseMount()
        let setup = try Setup(mount)
        let (placeholder, _, plan) = try setup.folderItemAndPlaceholderWriter(mode: 0o755)
        let failure = #expect(throws: ContainerError.self) { try setup.watchOnce(plan) }
        #expect(failure?.cause == .notEmpty, "\(String(describing: failure))")
        let errors = try setup.records(.error).filter { $0.fields["path"] == "Documents/Inbox/d" }
        #expect(errors.count == 1 && errors.first?.fields["during"] == "move", "\(errors)")
        #expect(try readFile(setup.inboxFolder + "/d/one.txt") == Array("one".utf8), "the item stays")
        #expect(try status(placeholder).mode == 0o755)

        try setup.watchOnce(SyscallFaultPlan())
        #expect(try readFile(setup.documents + "/d 2/one.txt") == Array("one".utf8))
        #expect(exists(placeholder + "/writer.txt"))
        let moved = try setup.records(.moved).filter { $0.fields["from"] == "Documents/Inbox/d" }
        #expect(moved.map { $0.fields["to"] } == ["Documents/d 2"])
        let arrived = try setup.records(.arrived).filter { $0.fields["path"] == "Documents/Inbox/d" }
        #expect(arrived.count == 1)
    }
}
