import Foundation
import Glibc
import TestSupport
import Testing

/// A watcher switched from keep to move leaves the items it kept, and the README says how to hand them to `move`
/// (issue 49; README.md, "Watch an Inbox").
@Suite struct SwitchToMoveTests {
    @Test func itemsKeptBeforeTheSwitchStayUntilTheREADMEsRecipeMovesThem() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let sources = try ["kept.txt", "also kept.txt"].map { try folder.file($0, $0) }
        let delivered = try InboxProcess.run((["--container", container, "deliver"] + sources).map { Array($0.utf8) })
        #expect(delivered.status == 0, "\(delivered.stderr)")
        #expect(try InboxProcess.run("--container", container, "watch", "--once").status == 0)
        let switched = try InboxProcess.run("--container", container, "watch", "--once", "--on-arrival", "move")
        #expect(switched.status == 0, "\(switched.stderr)")
        let inbox = container + "/Documents/Inbox"
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox).sorted() == ["also kept.txt", "kept.txt"])

        // The recipe as the README writes it, its container this one.
        let readme = try ReadmeListsTests.section("## Watch an Inbox").joined(separator: "\n")
        let recipe = "(cd ~/mail-app/Documents/Inbox && inbox --container ~/mail-app move -- *)"
        #expect(readme.contains("`" + recipe + "`"), "the README says how")
        let script = recipe.replacingOccurrences(of: "~/mail-app", with: "\"$1\"")
            .replacingOccurrences(of: "inbox --container", with: "\"$2\" --container")
        let moved = try InboxProcess.run(
            ["-c", script, "sh", container, InboxProcess.binary].map { Array($0.utf8) }, executable: "/bin/sh")
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox).isEmpty)
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/also kept.txt"))
        #expect(FileManager.default.fileExists(atPath: container + "/Documents/kept.txt"))
    }
}
