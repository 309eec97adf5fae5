import Foundation
import Glibc
import TestSupport
import Testing

/// The `RENAME_EXCHANGE` uses on a FUSE filesystem (bindfs), which refuses rename flags: bundle install, the
/// restore switch and the private copy each work there as a journaled two-step rename (ARCHITECTURE.md, "Network
/// and FUSE filesystems"), and a kill at any call leaves each item there once after the next start.
@Suite(.long, .serialized) struct FuseExchangeTests {
    /// A bundle folder of two files, in `folder`.
    static func makeBundle(_ folder: Scratch) throws -> String {
        try folder.file("Source.app/Info.plist", "<plist>info</plist>\n")
        try folder.file("Source.app/Resources/config.json", #"{"greeting":"hello"}"#)
        return folder.path + "/Source.app"
    }

    /// The names in `path`, sorted.
    static func names(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }

    /// The installed bundle in the backing folder `root`: its files, and nothing an install leaves beside it.
    static func expectInstalled(_ root: String, _ label: String) throws {
        #expect(try names(root) == ["App.app", "Documents", "Library", "tmp"], "\(label)")
        #expect(try names(root + "/App.app") == ["Info.plist", "Resources", "_CodeSignature"], "\(label)")
        #expect(
            FileManager.default.contents(atPath: root + "/App.app/Info.plist") == Data("<plist>info</plist>\n".utf8))
    }

    /// The bundle in the backing folder `root` is the empty one of `init`, or the installed one, whole (`verify`);
    /// no exchange is pending.
    static func expectOldOrNew(_ root: String, _ container: String, _ label: String) throws {
        #expect(!FileManager.default.fileExists(atPath: root + "/.inbox-bundle-exchange"), "\(label)")
        guard FileManager.default.fileExists(atPath: root + "/App.app") else {
            Issue.record("\(label): no App.app in \(try names(root))")
            return
        }
        let bundle = try names(root + "/App.app")
        if !bundle.isEmpty {
            #expect(bundle == ["Info.plist", "Resources", "_CodeSignature"], "\(label)")
            let verify = try InboxProcess.run("--container", container, "verify")
            #expect(verify.status == 0, "\(label): \(verify.stderr)")
        }
    }

    @Test func aBundleIsInstalledOnTheMount() throws {
        let mount = try FuseMount()
        let folder = try Scratch()
        let source = try Self.makeBundle(folder)
        let install = try InboxProcess.run("--container", mount.mountPoint + "/c", "init", "--bundle", source)
        #expect(install.status == 0, "\(install.stderr)")
        try Self.expectInstalled(mount.backing + "/c", "install")
        #expect(try InboxProcess.run("--container", mount.mountPoint + "/c", "verify").status == 0)
    }

    /// `inbox init --bundle` killed at each of its calls in turn: the next install leaves the bundle there once,
    /// installed, and nothing beside it.
    @Test func aBundleInstallKilledAtAnyCallIsInstalledOnceByTheNext() throws {
        let mount = try FuseMount()
        let folder = try Scratch()
        let source = try Self.makeBundle(folder)
        let points = try CrashSweep.everyCall("inbox init --bundle on FUSE") { call in
            let container = mount.mountPoint + "/c\(call)"
            defer { try? FileManager.default.removeItem(atPath: container) }
            #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
            let install = try InboxProcess.run(
                "--container", container, "init", "--bundle", source, environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            guard install.status == CrashSweep.killed else {
                #expect(install.status == 0, "\(install.stderr)")
                try Self.expectInstalled(mount.backing + "/c\(call)", "not killed")
                return false
            }
            // Any command finds the bundle again, the old one (empty) or the new one whole, no intent left.
            let status = try InboxProcess.run("--container", container, "status")
            #expect(status.status == 0, "crash at call \(call): \(status.stderr)")
            try Self.expectOldOrNew(mount.backing + "/c\(call)", container, "crash at call \(call), then status")
            let again = try InboxProcess.run("--container", container, "init", "--bundle", source)
            #expect(again.status == 0, "crash at call \(call): \(again.stderr)")
            try Self.expectInstalled(mount.backing + "/c\(call)", "crash at call \(call)")
            return true
        }
        #expect(points > 20)
    }

    /// A container's backup, made on a local filesystem, and the listing of a container restored from it.
    static func backup(_ folder: Scratch) throws -> (archive: String, restored: [String]) {
        let source = try folder.initContainer()
        try folder.file("container/Documents/letter.txt", "dear")
        try folder.file("container/Documents/Deep/notes.md", "notes")
        let archive = folder.path + "/backup.tar"
        #expect(try InboxProcess.run("--container", source, "backup", "--to", archive).status == 0)
        let reference = folder.path + "/reference"
        #expect(try InboxProcess.run("--container", reference, "init", "--single-host").status == 0)
        #expect(try InboxProcess.run("--container", reference, "restore", archive).status == 0)
        return (archive, try treeListing(reference).filter { !$0.contains(".lock ") })
    }

    @Test func aRestoreSwitchesInOnTheMount() throws {
        let mount = try FuseMount()
        let folder = try Scratch()
        let (archive, restored) = try Self.backup(folder)
        let target = mount.mountPoint + "/c"
        #expect(try InboxProcess.run("--container", target, "init", "--single-host").status == 0)
        let restore = try InboxProcess.run("--container", target, "restore", archive)
        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(try treeListing(mount.backing + "/c").filter { !$0.contains(".lock ") } == restored)
    }

    /// `inbox restore` killed at each of its calls in turn on the mount: the next command finds the container as
    /// it was or restored, never half and never without its Documents or Library, and a second restore completes.
    @Test func aRestoreKilledAtAnyCallOnTheMountLeavesTheContainerAsItWasOrRestored() throws {
        let mount = try FuseMount()
        let folder = try Scratch()
        let (archive, restored) = try Self.backup(folder)
        let points = try CrashSweep.everyCall("inbox restore on FUSE") { call in
            let target = mount.mountPoint + "/c\(call)"
            let backing = mount.backing + "/c\(call)"
            defer { try? FileManager.default.removeItem(atPath: target) }
            #expect(try InboxProcess.run("--container", target, "init", "--single-host").status == 0)
            let before = try treeListing(backing)
            let restore = try InboxProcess.run(
                "--container", target, "restore", archive, environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            guard restore.status == CrashSweep.killed else {
                #expect(restore.status == 0, "\(restore.stderr)")
                #expect(try treeListing(backing).filter { !$0.contains(".lock ") } == restored)
                return false
            }
            let settled = try InboxProcess.run("--container", target, "ls", "documents")
            #expect(settled.status == 0, "crash at call \(call): \(settled.stderr)")
            let after = try treeListing(backing)
            let wasRestored = after.filter { !$0.contains(".lock ") } == restored
            #expect(after == before || wasRestored, "crash at call \(call): half restored: \(after)")
            let again = try InboxProcess.run("--container", target, "restore", archive)
            #expect(again.status == (wasRestored ? 73 : 0), "crash at call \(call): \(again.stderr)")
            #expect(try treeListing(backing).filter { !$0.contains(".lock ") } == restored, "crash at call \(call)")
            return true
        }
        #expect(points > 20)
    }

    /// A container on the mount whose Inbox holds `l.txt`, a hard link to `shared.txt` beside the container.
    static func hardLinkedArrival(_ mount: FuseMount, _ name: String) throws -> String {
        let container = mount.mountPoint + "/" + name
        #expect(try InboxProcess.run("--container", container, "init", "--single-host").status == 0)
        try Data("shared".utf8).write(to: URL(fileURLWithPath: mount.mountPoint + "/" + name + "-shared.txt"))
        #expect(link(mount.mountPoint + "/" + name + "-shared.txt", container + "/Documents/Inbox/l.txt") == 0)
        return container
    }

    /// The Inbox (as the backing folder holds it) has `l.txt` once, a private copy, and the shared file keeps its
    /// content. Staging files (a copy, or the shared file's second name, once swapped out) are left for the sweep.
    static func expectPrivateCopy(_ mount: FuseMount, _ name: String, _ label: String) throws {
        let inbox = mount.backing + "/" + name + "/Documents/Inbox"
        #expect(try names(inbox).filter { !$0.hasPrefix(".inbox-staging.") } == ["l.txt"], "\(label)")
        #expect(FileManager.default.contents(atPath: inbox + "/l.txt") == Data("shared".utf8), "\(label)")
        var item = stat()
        var shared = stat()
        #expect(stat(inbox + "/l.txt", &item) == 0 && stat(mount.backing + "/" + name + "-shared.txt", &shared) == 0)
        #expect(item.st_ino != shared.st_ino, "\(label)")
        #expect(FileManager.default.contents(atPath: mount.backing + "/" + name + "-shared.txt") == Data("shared".utf8))
    }

    @Test func aHardLinkedArrivalGetsAPrivateCopyOnTheMount() throws {
        let mount = try FuseMount()
        let container = try Self.hardLinkedArrival(mount, "c")
        let watch = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "keep")
        #expect(watch.status == 0, "\(watch.stderr)")
        try Self.expectPrivateCopy(mount, "c", "watch")
    }

    /// `inbox watch --once` killed at each of its calls in turn while it makes a private copy on the mount: the
    /// next start leaves the item there once, a private copy.
    @Test func aWatcherKilledAtAnyCallOfAPrivateCopyOnTheMountKeepsTheItemOnce() throws {
        let mount = try FuseMount()
        let arguments = ["watch", "--once", "--on-arrival", "keep"] + CrashPointTests.quickPoll
        let points = try CrashSweep.everyCall("inbox watch (private copy) on FUSE") { call in
            let container = try Self.hardLinkedArrival(mount, "c\(call)")
            defer {
                try? FileManager.default.removeItem(atPath: container)
                try? FileManager.default.removeItem(atPath: container + "-shared.txt")
            }
            let watch = try InboxProcess.run(
                (["--container", container] + arguments).map { Array($0.utf8) },
                environment: ["INBOX_CRASH_AT_CALL": "\(call)"])
            guard watch.status == CrashSweep.killed else {
                #expect(watch.status == 0, "\(watch.stderr)")
                try Self.expectPrivateCopy(mount, "c\(call)", "not killed")
                return false
            }
            let again = try InboxProcess.run((["--container", container] + arguments).map { Array($0.utf8) })
            #expect(again.status == 0, "crash at call \(call): \(again.stderr)")
            try Self.expectPrivateCopy(mount, "c\(call)", "crash at call \(call)")
            return true
        }
        #expect(points > 20)
    }
}
