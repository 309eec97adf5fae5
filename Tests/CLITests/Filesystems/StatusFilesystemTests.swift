import Foundation
import Glibc
import TestSupport
import Testing

/// `status` names the Inbox's filesystem as the mount table does (`ext4`, `tmpfs`, `fuse.sshfs`), never as a magic
/// number (issue 49).
@Suite struct StatusFilesystemTests {
    /// The type `findmnt` names for the mount that holds `path`: the last it lists, where mounts are stacked.
    private func mountType(_ path: String) throws -> String {
        let found = try InboxProcess.run(
            ["-n", "-o", "FSTYPE", "--target", path].map { Array($0.utf8) }, executable: "/usr/bin/findmnt")
        #expect(found.status == 0, "\(found.stderr)")
        return found.lines.last?.trimmingCharacters(in: .whitespaces) ?? ""
    }

    /// `status` and `status --json` of a container made under `parent` name its filesystem as `findmnt` does.
    private func expectNamed(under parent: String) throws {
        let root = parent + "/container"
        #expect(try InboxProcess.run("--container", root, "init").status == 0)
        let type = try mountType(root + "/Documents/Inbox")
        #expect(!type.isEmpty)
        let text = try InboxProcess.run("--container", root, "status")
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.lines.contains("filesystem \(type): inotify, never polled"), "\(text.stdoutText)")
        let json = try InboxProcess.run("--container", root, "status", "--json")
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [String: Any]
        #expect((object?["filesystem"] as? [String: Any])?["type"] as? String == type, "\(json.stdoutText)")
    }

    @Test(.enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/findmnt"), "needs findmnt"))
    func theTemporaryFolderIsNamedAsTheMountTableNamesIt() throws {
        let folder = try Scratch()
        try expectNamed(under: folder.path)
    }

    @Test(
        .enabled(if: FileManager.default.fileExists(atPath: "/usr/bin/findmnt"), "needs findmnt"),
        .enabled(if: FileManager.default.isWritableFile(atPath: "/dev/shm"), "needs a writable /dev/shm"))
    func sharedMemoryIsNamedTmpfs() throws {
        var template = Array("/dev/shm/inbox-cli-test.XXXXXX".utf8CString)
        let made = try #require(mkdtemp(&template))
        let parent = String(cString: made)
        defer {
            do { try FileManager.default.removeItem(atPath: parent) } catch { Issue.record("left \(parent): \(error)") }
        }
        #expect(try mountType(parent) == "tmpfs")
        try expectNamed(under: parent)
    }
}
