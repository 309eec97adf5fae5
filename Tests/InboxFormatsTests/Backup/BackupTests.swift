import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// Backup (ARCHITECTURE.md, "Places and rules", "Bundle, backup and setup"): the plan by place, the exclusion flag,
/// service files inbox re-creates, the pax archive, and a restore that writes nothing outside the container, whatever
/// the archive holds.
@Suite struct BackupTests {
    /// The plan's entries as `path -> (included, reason)`, paths as listed (folders end with `/`).
    private func plan(_ container: Container) throws -> [String: (included: Bool, reason: String)] {
        var result: [String: (included: Bool, reason: String)] = [:]
        for entry in try BackupPlan(container: container).entries {
            result[String(decoding: entry.listedPath, as: UTF8.self)] = (entry.isIncluded, entry.reason)
        }
        return result
    }

    private func write(_ container: Container, _ relative: String, _ bytes: [UInt8] = Array("x".utf8)) throws {
        let path = container.root + "/" + relative
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try makeFile(path, bytes)
    }

    @Test func thePlanFollowsThePlaces() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container
        let expected: [(String, Bool, String)] = [
            ("Mail.app/Info.plist", false, "Mail.app: not backed up"),
            ("Documents/report.pdf", true, "Documents: backed up"),
            ("Documents/Inbox/scan.pdf", true, "Documents/Inbox: backed up"),
            ("Library/notes.db", true, "Library: backed up"),
            ("Library/Application Support/model.bin", true, "Library/Application Support: backed up"),
            ("Library/Caches/thumb.png", false, "Library/Caches: not backed up"),
            ("Library/Caches/deep/er/x", false, "Library/Caches: not backed up"),
            ("Library/Preferences/app.plist", true, "Library/Preferences: backed up"),
            ("tmp/upload.part", false, "tmp: not backed up"),
            ("stray.txt", false, "outside the places: not backed up"),
        ]
        #expect(chmod(container.path(.bundle), 0o755) == 0)
        for (path, _, _) in expected { try write(container, path) }
        try FileManager.default.createDirectory(
            atPath: container.root + "/Documents/Empty", withIntermediateDirectories: true)

        let entries = try plan(container)

        for (path, included, reason) in expected {
            #expect(entries[path]?.included == included, "\(path)")
            #expect(entries[path]?.reason == reason, "\(path)")
        }
        #expect(entries["Documents/Empty/"]?.included == true, "an empty folder is listed, with a /")
        #expect(entries["Library/Caches/deep/"] == nil, "a folder that holds something is walked, not listed")
    }

    /// On a local disk no NFS or FUSE client made them: `.nfs…` and `.fuse_hidden…` names are a user's files and
    /// folders, backed up like any other.
    @Test func aClientsHiddenNamesOnALocalDiskAreBackedUp() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container
        try write(container, "Documents/.nfs000000000012345600000001")
        try write(container, "Documents/.fuse_hidden0000000a00000002/notes.txt")
        let entries = try plan(container)
        #expect(entries["Documents/.nfs000000000012345600000001"]?.included == true, "\(entries.keys.sorted())")
        #expect(entries["Documents/.fuse_hidden0000000a00000002/notes.txt"]?.included == true)
    }

    /// On a FUSE mount (bindfs) a `.fuse_hidden…` name is the client's, left out; a `.nfs…` name is a user's there.
    @Test func aFuseClientsHiddenNamesAreNotBackedUp() throws {
        let mount = try FuseMount()
        let scratch = try Scratch.withInbox(under: mount.mountPoint)
        defer {
            scratch.remove()
            withExtendedLifetime(mount) {}
        }
        let container = scratch.container
        for path in ["Documents/.nfs000000000012345600000001", "Documents/deep/.fuse_hidden0000000a00000002"] {
            try write(container, path)
        }
        try write(container, "Documents/.fuse_hidden-notes")
        let entries = try plan(container)
        #expect(entries["Documents/.fuse_hidden-notes"]?.included == true)
        #expect(entries["Documents/.nfs000000000012345600000001"]?.included == true)
        #expect(entries.keys.filter { $0.contains(".fuse_hidden0") }.isEmpty)
        #expect(entries["Documents/deep/"]?.included == true, "a folder with only a leftover is listed as empty")
    }

    @Test func linksAreListedAndNeverFollowedAndSpecialFilesAreLeftOut() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let documents = scratch.container.path(.documents)
        try FileManager.default.createDirectory(atPath: scratch.outside("elsewhere"), withIntermediateDirectories: true)
        try makeFile(scratch.outside("elsewhere/secret"), Array("secret".utf8))
        #expect(symlink("../Library/Preferences", documents + "/prefs") == 0)
        #expect(symlink(scratch.outside("elsewhere"), documents + "/out") == 0)
        #expect(symlink("a/../../..", documents + "/sly") == 0)
        #expect(mkfifo(documents + "/pipe", 0o644) == 0)

        let entries = try BackupPlan(container: scratch.container).entries
        let byPath = Dictionary(uniqueKeysWithValues: entries.map { (String(decoding: $0.path, as: UTF8.self), $0) })

        #expect(byPath["Documents/prefs"]?.isIncluded == true)
        #expect(byPath["Documents/prefs"]?.linkTarget == Array("../Library/Preferences".utf8))
        #expect(
            byPath["Documents/prefs"].map { String(decoding: $0.line, as: UTF8.self) }
                == "+ Documents/prefs -> ../Library/Preferences  (Documents: backed up)")
        #expect(byPath["Documents/out"]?.isIncluded == false)
        #expect(byPath["Documents/sly"]?.isIncluded == false, "a .. after a name could climb out through a link")
        #expect(byPath["Documents/pipe"]?.reason == "a FIFO: never backed up")
        #expect(!byPath.keys.contains { $0.hasPrefix("Documents/out/") }, "the link is not walked")
    }

    @Test func filesInboxRecreatesAreExcludedButTheLogIsBackedUp() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try scratch.inbox.log.append(Event(.setup))
        let state = Container.stateRelativePath
        for name in [
            "watch.lock", "setup.lock", "cleanup.lock", "bundle.lock", "cleanup.intent", "arrived.checkpoint",
            ".arrived.checkpoint.tmp", "events.00000000000000000007.jsonl",
        ] {
            try write(scratch.container, state + "/" + name)
        }
        try FileManager.default.createDirectory(
            atPath: scratch.container.stateDirectory + "/journal", withIntermediateDirectories: true)

        var entries = try plan(scratch.container)

        for name in [
            "events.lock", "watch.lock", "setup.lock", "cleanup.lock", "bundle.lock", "cleanup.intent",
            "arrived.checkpoint", ".arrived.checkpoint.tmp", "journal/",
        ] {
            #expect(entries[state + "/" + name]?.included == false, "\(name)")
            #expect(entries[state + "/" + name]?.reason == "re-created by inbox", "\(name)")
        }
        for name in ["events.jsonl", "events.00000000000000000007.jsonl"] {
            #expect(entries[state + "/" + name]?.included == true, "\(name)")
        }
        // A journal intent names files of this container by inode: it means nothing in a restored one (and a
        // restore refuses it). The same names elsewhere are plain files.
        try write(scratch.container, state + "/journal/intent-1")
        try write(scratch.container, "Documents/watch.lock")
        entries = try plan(scratch.container)
        #expect(entries[state + "/journal/intent-1"]?.included == false)
        #expect(entries["Documents/watch.lock"]?.included == true)
    }

    @Test func aDeliveryUnderWayIsLeftOutButAClaimedItemIsBackedUp() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try write(scratch.container, "Documents/Inbox/.inbox-staging.12.34")
        try write(scratch.container, "Documents/Inbox/.inbox-claim.12.34")
        try write(scratch.container, "Documents/.inbox-staging.12.34")
        let entries = try plan(scratch.container)
        #expect(entries["Documents/Inbox/.inbox-staging.12.34"]?.included == false)
        #expect(entries["Documents/Inbox/.inbox-staging.12.34"]?.reason == "a delivery under way: not backed up")
        #expect(entries["Documents/Inbox/.inbox-claim.12.34"]?.included == true, "an item in the middle of a move")
        #expect(entries["Documents/.inbox-staging.12.34"]?.included == true, "only the Inbox stages deliveries")
    }

    @Test func theFlagsBytesAreFoundationsBinaryPropertyListOfTheString() throws {
        let encoded = try PropertyListSerialization.data(
            fromPropertyList: "com.apple.backupd", format: .binary, options: 0)
        #expect(BackupFlag.value == Array(encoded))
    }

    @Test(.enabled(if: userAttributesWork)) func theFlagIsSetReadAndClearedWithTheBytesMacOSWrites() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container
        try write(container, "Documents/big.iso")
        let item = [try name("Documents"), try name("big.iso")]

        try container.setExcludedFromBackup(true, at: item)

        #expect(try container.isExcludedFromBackup(at: item))
        #expect(try container.isExcludedFromBackup(URL(fileURLWithPath: scratch.documentsPath("big.iso"))))
        let file = try FileDescriptor(scratch.documentsPath("big.iso"), [.readOnly])
        let stored = try #require(try system_fgetxattr(file.rawValue, BackupFlag.attribute))
        let plist =
            "62706c69737430305f1011636f6d2e6170706c652e6261636b757064080000000000000101000000000000000100"
            + "00000000000000000000000000001c"
        #expect(stored.map { String(format: "%02x", $0) }.joined() == plist)
        #expect(try plan(container)["Documents/big.iso"]?.reason == "flagged: excluded from backup")

        try container.setExcludedFromBackup(false, at: item)
        try container.setExcludedFromBackup(false, at: item)  // clearing twice is fine

        #expect(try !container.isExcludedFromBackup(at: item))
        #expect(try plan(container)["Documents/big.iso"]?.included == true)
    }

    @Test(.enabled(if: userAttributesWork)) func aFlaggedFolderExcludesEverythingBelowIt() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container
        try write(container, "Documents/Videos/a.mov")
        try write(container, "Documents/Videos/2024/b.mov")
        try write(container, "Documents/keep.txt")

        try container.setExcludedFromBackup(true, for: URL(fileURLWithPath: scratch.documentsPath("Videos")))

        let entries = try plan(container)
        #expect(entries["Documents/Videos/a.mov"]?.reason == "Documents/Videos/ flagged: excluded from backup")
        #expect(entries["Documents/Videos/2024/b.mov"]?.reason == "Documents/Videos/ flagged: excluded from backup")
        #expect(entries["Documents/keep.txt"]?.included == true)
        let inside = [try name("Documents"), try name("Videos"), try name("a.mov")]
        #expect(try !container.isExcludedFromBackup(at: inside), "the file has no flag of its own")
    }

    @Test(.enabled(if: userAttributesWork)) func theFlagIsRefusedOnLinksSpecialFilesTheBundleAndTheRoot() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container
        #expect(symlink("/etc/passwd", scratch.documentsPath("link")) == 0)
        #expect(mkfifo(scratch.documentsPath("pipe"), 0o644) == 0)
        #expect(chmod(container.path(.bundle), 0o755) == 0)
        try write(container, "Mail.app/Info.plist")

        expectError(.refused) {
            try container.setExcludedFromBackup(true, at: [try name("Documents"), try name("link")])
        }
        expectError(.refused) {
            try container.setExcludedFromBackup(true, at: [try name("Documents"), try name("pipe")])
        }
        expectError(.refused) {
            try container.setExcludedFromBackup(true, at: [try name("Mail.app"), try name("Info.plist")])
        }
        expectError(.refused) { try container.setExcludedFromBackup(true, at: []) }
        expectError(.noSuchItem) {
            try container.setExcludedFromBackup(true, at: [try name("Documents"), try name("gone")])
        }
        expectError(.refused) { try container.setExcludedFromBackup(true, for: URL(fileURLWithPath: "/etc/passwd")) }
        #expect(try !container.isExcludedFromBackup(at: [try name("Mail.app"), try name("Info.plist")]))
    }

    @Test(.enabled(if: userAttributesWork)) func aReadOnlyInboxItemIsFlaggedAndStaysReadOnly() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let url = try scratch.inbox.deliver(data: Data("scan".utf8), suggestedName: "scan.pdf")
        let before = try status(url.path)

        try scratch.container.setExcludedFromBackup(true, for: url)

        #expect(try scratch.container.isExcludedFromBackup(url))
        #expect(try status(url.path).mode == 0o444)
        #expect(try status(url.path).modified == before.modified)
        #expect(try readFile(url.path) == Array("scan".utf8))
    }
}

/// The archive: what it holds, GNU tar's view of it, and the restore round trip.
@Suite struct BackupArchiveTests {
    /// A container with something in every place, names that are not ASCII (and not UTF-8), a read-only Inbox
    /// item, an empty folder, a link, a flagged file and the service's own files.
    private func populated(_ scratch: Scratch) throws {
        let root = scratch.container.root
        _ = try scratch.inbox.deliver(data: Data(pattern(70_000, seed: 1)), suggestedName: "scan.pdf")
        try makeFile(root + "/Documents/report.pdf", pattern(1_500_000, seed: 2), mode: 0o640)
        try makeFile(root + "/Documents/résumé.txt", Array("café".utf8))
        try makeFile(Array((root + "/Documents/raw-").utf8) + [0xFF, 0xFE], [1, 2, 3])
        try FileManager.default.createDirectory(atPath: root + "/Documents/Empty", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/Documents/Deep/er", withIntermediateDirectories: true)
        try makeFile(root + "/Documents/Deep/er/leaf", pattern(10, seed: 3), mode: 0o600)
        #expect(symlink("Inbox/scan.pdf", root + "/Documents/latest") == 0)
        try makeFile(root + "/Documents/huge.iso", pattern(1000, seed: 4))
        try scratch.container.setExcludedFromBackup(true, at: [try name("Documents"), try name("huge.iso")])
        try makeFile(root + "/Library/Preferences/app.plist", Array("<plist/>".utf8))
        try makeFile(root + "/Library/Caches/thumb.png", pattern(100, seed: 5))
        try makeFile(root + "/tmp/upload.part", pattern(100, seed: 6))
        try makeFile(scratch.container.stateDirectory + "/watch.lock", Array("123\n".utf8))
        try scratch.inbox.log.append(Event(.setup))
    }

    /// `tar ARGS…`: its exit status, standard output and standard error.
    private func tar(_ arguments: [String]) throws -> (Int32, String, String) {
        try runProgram("/usr/bin/tar", arguments).parts
    }

    @Test(.enabled(if: userAttributesWork)) func theArchiveHoldsExactlyTheIncludedEntriesAndGNUTarListsIt() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try populated(scratch)
        let plan = try BackupPlan(container: scratch.container)

        let summary = try BackupArchive(path: scratch.outside("backup.tar")).write(from: scratch.container)

        #expect(summary.path == scratch.outside("backup.tar"))
        #expect(try status(summary.path).mode == 0o600)
        let (code, listing, errors) = try tar(["-tf", summary.path])
        #expect(code == 0)
        #expect(errors.contains("hdrcharset"), "only the name that is not UTF-8 is stored as binary")
        let listed = Set(listing.split(separator: "\n").map(String.init))
        var expected: Set<String> = []
        for entry in plan.included {
            expected.insert(String(decoding: entry.listedPath, as: UTF8.self))
            var folder = (String(decoding: entry.path, as: UTF8.self) as NSString).deletingLastPathComponent
            while !folder.isEmpty {
                expected.insert(folder + "/")
                folder = (folder as NSString).deletingLastPathComponent
            }
        }
        #expect(listed.count == expected.count)
        #expect(listed.subtracting(expected).filter { !$0.hasPrefix("Documents/raw-") }.isEmpty)
        #expect(listed.contains("Documents/résumé.txt"))
        #expect(!listed.contains { $0.contains("Caches/") || $0.hasPrefix("tmp/") || $0.contains("huge.iso") })
        #expect(!listed.contains { $0.hasSuffix("watch.lock") || $0.hasSuffix("events.lock") })
        let (verbose, table, _) = try tar(["-tvf", summary.path])
        #expect(verbose == 0)
        #expect(table.contains("-r--r--r--") && table.contains("Documents/Inbox/scan.pdf"))
        #expect(table.contains("Documents/latest -> Inbox/scan.pdf"))
        #expect(summary.files == plan.included.filter { $0.status.kind == .regular }.count)
    }

    @Test(.enabled(if: userAttributesWork), arguments: [true, false])
    func aRestoreGivesBackEveryIncludedFileByteForByte(ownWorkingFolder: Bool) throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try populated(scratch)
        let plan = try BackupPlan(container: scratch.container)
        let archive = BackupArchive(path: scratch.outside("backup.tar"))
        _ = try archive.write(from: scratch.container)
        let target = try Container.create(at: scratch.outside("restored"), appName: "Mail")

        let report = try archive.restore(into: target, ownWorkingFolder: ownWorkingFolder)

        #expect(report.refused.isEmpty, "\(report.refused.map(\.reason))")
        for entry in plan.included {
            let source = Array((scratch.container.root + "/").utf8) + entry.path
            let copy = Array((target.root + "/").utf8) + entry.path
            let restored = try fileStatus(in: currentDirectory, copy)
            #expect(restored.kind == entry.status.kind)
            #expect(restored.modified == entry.status.modified, "\(entry.reason)")
            switch entry.status.kind {
            case .regular:
                #expect(try readFile(copy) == readFile(source))
                #expect(restored.mode == entry.status.mode)
            case .symbolicLink:
                #expect(try system_readlinkat(currentDirectory, copy) == entry.linkTarget)
            default:
                #expect(restored.mode == entry.status.mode)
            }
        }
        for place in [Place.caches, .tmp] {
            #expect(try FileDescriptor(target.path(place), [.directory]).entries().isEmpty)
        }
        #expect(!exists(target.root + "/Documents/huge.iso"))
        #expect(!exists(target.stateDirectory + "/watch.lock"))
        #expect(try !target.isExcludedFromBackup(at: [try name("Documents")]))
    }

    @Test func theImportIndexIsArchivedAsOneSnapshotWithoutItsWAL() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // Ten messages recorded, all still in the WAL: the index file itself holds none of them yet.
        let index = try ImportIndex(container: scratch.container)
        let keys = (0..<10).map { Array(repeating: UInt8($0), count: 32) }
        try index.settle(
            keys.map { ImportIndex.Settlement(key: $0, complete: true, count: 0, messageID: nil) })
        let wal = ImportIndex.path(scratch.container) + "-wal"
        #expect(try status(wal).size > 0)

        // The index stays open meanwhile, as an import's would: its WAL is not checkpointed away.
        let summary = try withExtendedLifetime(index) {
            try BackupArchive(path: scratch.outside("backup.tar")).write(from: scratch.container)
        }

        let (code, listing, _) = try tar(["-tf", summary.path])
        #expect(code == 0)
        let listed = listing.split(separator: "\n").map(String.init)
        #expect(listed.contains(ImportIndex.relativePath))
        #expect(!listed.contains { $0.hasPrefix(ImportIndex.relativePath + "-") }, "no WAL, no shared memory")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: scratch.outside("")).filter { $0.hasPrefix(".") }
                .isEmpty, "no snapshot left beside the archive")
        // GNU tar takes the index out; SQLite (through Python) finds it whole, with every message.
        let extracted = scratch.outside("extracted")
        try FileManager.default.createDirectory(atPath: extracted, withIntermediateDirectories: true)
        #expect(try tar(["-xf", summary.path, "-C", extracted, ImportIndex.relativePath]).0 == 0)
        let (pythonCode, answer, errors) = try runProgram(
            "/usr/bin/python3",
            [
                "-c",
                "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
                    + "print(c.execute('PRAGMA integrity_check').fetchone()[0], "
                    + "c.execute('SELECT count(*) FROM messages WHERE complete=1').fetchone()[0])",
                extracted + "/" + ImportIndex.relativePath,
            ]
        ).parts
        #expect(pythonCode == 0, "\(errors)")
        #expect(answer == "ok 10\n")
    }

    @Test func aFileWithTwoNamesIsArchivedOnceAndRestoredWithBoth() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let root = scratch.container.root
        try FileManager.default.createDirectory(atPath: root + "/Documents/sub", withIntermediateDirectories: true)
        try makeFile(root + "/Documents/a.bin", pattern(100_000, seed: 9))
        #expect(link(root + "/Documents/a.bin", root + "/Documents/sub/b.bin") == 0)
        let archive = BackupArchive(path: scratch.outside("backup.tar"))

        let summary = try archive.write(from: scratch.container)

        #expect(summary.bytes == 100_000, "the contents are archived once")
        #expect(try status(scratch.outside("backup.tar")).size < 150_000)
        let (code, table, _) = try tar(["-tvf", summary.path])
        #expect(code == 0)
        // Whichever name the walk meets first holds the contents (folders are read in no set order).
        #expect(
            table.contains("Documents/sub/b.bin link to Documents/a.bin")
                || table.contains("Documents/a.bin link to Documents/sub/b.bin"), "\(table)")
        let target = try Container.create(at: scratch.outside("restored"), appName: "Mail")
        let report = try archive.restore(into: target)
        #expect(report.refused.isEmpty, "\(report.refused.map(\.reason))")
        let first = try status(target.root + "/Documents/a.bin")
        let second = try status(target.root + "/Documents/sub/b.bin")
        #expect(first.isSameFile(as: second) && first.linkCount == 2)
        #expect(try readFile(target.root + "/Documents/sub/b.bin") == pattern(100_000, seed: 9))
    }

    @Test func anArchiveInsideABackedUpPlaceIsRefused() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let container = scratch.container

        for place in [Place.documents, .inbox, .library, .applicationSupport, .preferences, .bundle] {
            expectError(.refused) { try BackupArchive(path: container.path(place) + "/b.tar").write(from: container) }
            #expect(!exists(container.path(place) + "/b.tar"))
        }
        expectError(.refused) { try BackupArchive(path: container.root + "/b.tar").write(from: container) }
        let inTmp = try BackupArchive(path: container.path(.tmp) + "/b.tar").write(from: container)
        #expect(try status(inTmp.path).kind == .regular)
        let again = try BackupArchive(path: container.path(.tmp) + "/b.tar").write(from: container)
        #expect(again.files == inTmp.files, "the archive is replaced, and never holds itself")
        expectError(.noSuchItem) { try BackupArchive(path: scratch.outside("no/such/b.tar")).write(from: container) }
        #expect(try FileDescriptor(container.path(.tmp), [.directory]).entries().map(\.string) == ["b.tar"])
    }

    @Test func aRestoreNeedsAFreshContainerAndNoWatcher() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let archive = BackupArchive(path: scratch.outside("backup.tar"))
        _ = try archive.write(from: scratch.container)

        try makeFile(scratch.documentsPath("mine.txt"))
        expectError(.cannotCreate) { try archive.restore(into: scratch.container) }
        try FileManager.default.removeItem(atPath: scratch.documentsPath("mine.txt"))
        _ = try scratch.inbox.deliver(data: Data("x".utf8), suggestedName: "x.txt")
        expectError(.cannotCreate) { try archive.restore(into: scratch.container) }

        let fresh = try Container.create(at: scratch.outside("fresh"), appName: "Mail")
        do {
            let lock = try WatcherLock(container: fresh)
            expectError(.busy) { try archive.restore(into: fresh) }
            withExtendedLifetime(lock) {}
        }
        expectError(.noSuchItem) { try BackupArchive(path: scratch.outside("none.tar")).restore(into: fresh) }
        try makeFile(scratch.outside("junk.tar"), pattern(5000))
        expectError(.badData) { try BackupArchive(path: scratch.outside("junk.tar")).restore(into: fresh) }
    }

    @Test(arguments: [true, false])
    func aHostileArchiveWritesNothingOutsideTheContainer(ownWorkingFolder: Bool) throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let absolute = "/tmp/inbox-abs-\(UUID().uuidString)"
        let passwd = try readFile("/etc/passwd")
        let passwdStatus = try status("/etc/passwd")
        let (code, _, errors) = try runProgram(
            "/usr/bin/python3", ["-c", hostileArchiveScript, scratch.outside("h.tar"), absolute]
        ).parts
        try #require(code == 0, "\(errors)")
        let target = try Container.create(at: scratch.outside("c2"), appName: "Mail")

        let report = try BackupArchive(path: scratch.outside("h.tar")).restore(
            into: target, ownWorkingFolder: ownWorkingFolder)

        let refused = Dictionary(report.refused.map { (String(decoding: $0.path, as: UTF8.self), $0.reason) }) { a, _ in
            a
        }
        for path in [
            "../escaped-by-dot-dot", absolute, "evil", "evil/passwd", "Documents/evil", "Documents/hard",
            "Documents/hard2",
            "Documents/up", "Documents/null", "Documents/fifo", "Documents/in/sneak", "Documents/Inbox",
            "Mail.app/Info.plist",
        ] {
            #expect(refused[path] != nil, "\(path) refused")
        }
        #expect(refused["../escaped-by-dot-dot"] == "a '..' in the path")
        #expect(refused[absolute] == "an absolute path")
        #expect(refused["Documents/evil"] == "a symbolic link that may lead out of the container (to '/etc')")
        #expect(report.restored.contains(Array("Documents/good.txt".utf8)))
        #expect(report.skipped.contains(Array("Library/Caches/c.bin".utf8)))
        #expect(report.skipped.contains(Array("tmp/t".utf8)))
        #expect(!exists(absolute))
        // A name no one else makes, even beside the scratch folder in the shared temporary folder.
        #expect(!exists(scratch.outside("escaped-by-dot-dot")) && !exists(scratch.path + "/../escaped-by-dot-dot"))
        #expect(try readFile("/etc/passwd") == passwd)
        let passwdAfter = try status("/etc/passwd")
        #expect(passwdAfter.isSameFile(as: passwdStatus) && passwdAfter.modified == passwdStatus.modified)
        #expect(passwdAfter.linkCount == passwdStatus.linkCount, "no hard link was made to it")
        #expect(!exists(target.root + "/evil"))
        #expect(try status(target.root + "/Documents/evil").kind != .symbolicLink)
        #expect(!exists(target.root + "/Documents/hard") && !exists(target.root + "/Documents/null"))
        #expect(!exists(target.path(.inbox) + "/sneak"), "nothing was written through the link")
        #expect(try status(target.path(.inbox)).kind == .directory)
        #expect(try readFile(target.root + "/Documents/good.txt") == Array("good".utf8))
        #expect(try FileDescriptor(target.path(.caches), [.directory]).entries().isEmpty)
        #expect(try FileDescriptor(target.path(.tmp), [.directory]).entries().isEmpty)
    }

    @Test func theRulesForLinksAndEntries() throws {
        let documents = [try name("Documents")]
        #expect(BackupRules.linkStaysInside(Array("Inbox/a".utf8), from: documents))
        #expect(BackupRules.linkStaysInside(Array("../Library/x".utf8), from: documents))
        #expect(BackupRules.linkStaysInside(Array("./a/./b".utf8), from: documents))
        #expect(!BackupRules.linkStaysInside(Array("../../x".utf8), from: documents))
        #expect(!BackupRules.linkStaysInside(Array("a/../b".utf8), from: documents))
        #expect(!BackupRules.linkStaysInside(Array("/etc".utf8), from: documents))
        #expect(!BackupRules.linkStaysInside([], from: documents))

        func verdict(_ path: String, _ type: mode_t = S_IFREG, symlink: String? = nil, hardlink: String? = nil)
            -> RestoreVerdict
        {
            RestoreRules.verdict(
                Array(path.utf8), type: type, symlink: symlink.map { Array($0.utf8) },
                hardlink: hardlink.map { Array($0.utf8) }, appName: "Mail")
        }
        #expect(verdict("./Documents//a.txt") == .restore(path: Array("Documents/a.txt".utf8), hardlink: nil))
        #expect(
            verdict("Documents/b", hardlink: "./Documents/a")
                == .restore(path: Array("Documents/b".utf8), hardlink: Array("Documents/a".utf8)))
        #expect(verdict("./") == .skip)
        #expect(verdict("Library/Caches/x") == .skip)
        #expect(verdict("Library/Application Support/inbox/events.lock") == .skip)
        #expect(
            verdict("Library/Application Support/inbox/events.jsonl")
                == .restore(path: Array("Library/Application Support/inbox/events.jsonl".utf8), hardlink: nil))
        #expect(verdict("Documents/a/../../x") == .refuse("a '..' in the path"))
        #expect(
            verdict("Documents/b", hardlink: "Library/Caches/a")
                == .refuse("a hard link to 'Library/Caches/a', which is not restored"))
        #expect(verdict("Documents/s", S_IFSOCK) == .refuse("a socket is never restored"))
        #expect(verdict("Documents/d", S_IFBLK) == .refuse("a device node is never restored"))
        #expect(
            verdict("Library", S_IFLNK, symlink: "Documents")
                == .refuse("the folder of a place, which must be a folder"))
        #expect(
            verdict("Documents/l", S_IFLNK, symlink: "Inbox")
                == .restore(path: Array("Documents/l".utf8), hardlink: nil))
    }
}

/// python3: writes a pax archive of hostile entries to argv[1]; argv[2] is an absolute path to aim at.
let hostileArchiveScript = """
    import io, sys, tarfile
    archive = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)
    def add(name, kind=tarfile.REGTYPE, data=b'x', link=''):
        info = tarfile.TarInfo(name)
        info.type, info.linkname, info.devmajor, info.devminor = kind, link, 1, 3
        info.size = len(data) if kind == tarfile.REGTYPE else 0
        archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    add('../escaped-by-dot-dot')
    add(sys.argv[2])
    add('evil', tarfile.SYMTYPE, link='/etc')
    add('evil/passwd', data=b'owned')
    add('Documents/evil', tarfile.SYMTYPE, link='/etc')
    add('Documents/evil/passwd', data=b'owned')
    add('Documents/hard', tarfile.LNKTYPE, link='/etc/passwd')
    add('Documents/hard2', tarfile.LNKTYPE, link='../../../../../../../../etc/passwd')
    add('Documents/in', tarfile.SYMTYPE, link='Inbox')
    add('Documents/in/sneak', data=b'through the link')
    add('Documents/up', tarfile.SYMTYPE, link='../..')
    add('Documents/null', tarfile.CHRTYPE)
    add('Documents/fifo', tarfile.FIFOTYPE)
    add('Documents/Inbox', data=b'not a folder')
    add('Mail.app/Info.plist')
    add('Library/Caches/c.bin')
    add('tmp/t')
    add('Documents/good.txt', data=b'good')
    archive.close()
    """
