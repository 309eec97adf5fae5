import Foundation
import Glibc
import TestSupport
import Testing

/// Paths are bytes (ARCHITECTURE.md, "Paths are bytes"): a `--container`, `$INBOX_CONTAINER`, `--root` entry,
/// FILE or `--to` that is not UTF-8 names exactly the file it names, never its U+FFFD spelling.
@Suite struct BytePathTests {
    /// `box\xFF\xFE`, and the name a decoding with replacement makes of it: `box\u{FFFD}\u{FFFD}`.
    static let oddName: [UInt8] = Array("box".utf8) + [0xFF, 0xFE]
    static let replacedName: [UInt8] = Array("box\u{FFFD}\u{FFFD}".utf8)
    /// A file name with the same bytes.
    static let oddFile: [UInt8] = Array("note".utf8) + [0xFF, 0xFE] + Array(".txt".utf8)

    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    private func cPath(_ path: [UInt8]) -> [CChar] { path.map { CChar(bitPattern: $0) } + [0] }

    private func exists(_ path: [UInt8]) -> Bool {
        var status = stat()
        return lstat(cPath(path), &status) == 0
    }

    private func write(_ path: [UInt8], _ contents: String) throws {
        let fd = open(cPath(path), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let data = Array(contents.utf8)
        guard Glibc.write(fd, data, data.count) == data.count else { throw POSIXError(.EIO) }
    }

    @Test func aContainerNamedByBytesThatAreNotUTF8IsExactlyThatFolder() throws {
        let folder = try Scratch()
        let exact = bytes(folder.path + "/") + Self.oddName
        let sibling = bytes(folder.path + "/") + Self.replacedName
        let made = try InboxProcess.run([bytes("--container"), exact, bytes("init")])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(made.stdout == exact + [0x0A], "init prints the exact root")
        #expect(exists(exact + bytes("/Library/Application Support/inbox")))
        #expect(!exists(sibling), "nothing is made under the U+FFFD spelling")
        // On a terminal the root is one line, its bytes escaped as `ls` escapes a name.
        let shown = try InboxProcess.run([bytes("--container"), exact, bytes("init")], terminalColumns: 80)
        #expect(shown.stdoutText == folder.path + "/box\\xff\\xfe\r\n", "\(shown.stdoutText.debugDescription)")

        // A sibling under the U+FFFD spelling is another container: nothing done to one reaches the other.
        #expect(try InboxProcess.run([bytes("--container"), sibling, bytes("init")]).status == 0)
        let source = bytes(folder.path + "/") + Self.oddFile
        try write(source, "exact")
        let delivered = try InboxProcess.run([bytes("--container"), exact, bytes("deliver"), source])
        #expect(delivered.status == 0, "\(delivered.stderr)")
        let item = exact + bytes("/Documents/Inbox/") + Self.oddFile
        #expect(delivered.stdout == item + [0x0A])
        #expect(exists(item) && !exists(sibling + bytes("/Documents/Inbox/") + Self.oddFile))

        let listed = try InboxProcess.run([bytes("--container"), exact, bytes("ls"), bytes("--json")])
        #expect(listed.status == 0, "\(listed.stderr)")
        let objects = try JSONSerialization.jsonObject(with: Data(listed.stdout)) as? [[String: Any]] ?? []
        #expect(objects.count == 1)
        #expect((objects.first?["path_b64"] as? String).flatMap { Data(base64Encoded: $0) } == Data(item))
        let siblingListed = try InboxProcess.run([bytes("--container"), sibling, bytes("ls"), bytes("--json")])
        #expect(siblingListed.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) == "[]")

        // Moved by its full path, both the container's name and the file's not UTF-8.
        let moved = try InboxProcess.run([bytes("--container"), exact, bytes("move"), item])
        #expect(moved.status == 0, "\(moved.stderr)")
        let document = exact + bytes("/Documents/") + Self.oddFile
        #expect(moved.stdout == document + [0x0A])
        #expect(exists(document) && !exists(item))
    }

    @Test func inboxContainerAndXDGDataHomeFromTheEnvironmentAreReadAsBytes() throws {
        let folder = try Scratch()
        let exact = bytes(folder.path + "/") + Self.oddName
        #expect(try InboxProcess.run([bytes("--container"), exact, bytes("init")]).status == 0)
        let source = bytes(folder.path + "/plain.txt")
        try write(source, "plain")
        // `env` sets the variable to raw bytes, which a `[String: String]` environment could not carry.
        let result = try InboxProcess.run(
            [bytes("INBOX_CONTAINER=") + exact, bytes(InboxProcess.binary), bytes("deliver"), source],
            executable: "/usr/bin/env")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(exists(exact + bytes("/Documents/Inbox/plain.txt")))
        #expect(!exists(bytes(folder.path + "/") + Self.replacedName))

        // `$XDG_DATA_HOME` too: the default container is `<it>/inbox/default`, exactly.
        let data = bytes(folder.path + "/data") + [0xFF]
        let made = try InboxProcess.run(
            [bytes("XDG_DATA_HOME=") + data, bytes(InboxProcess.binary), bytes("init")], executable: "/usr/bin/env")
        #expect(made.status == 0, "\(made.stderr)")
        #expect(exists(data + bytes("/inbox/default/Library/Application Support/inbox")))
    }

    @Test func aContainerUnderTheRootNamedByBytesThatAreNotUTF8IsServed() throws {
        let folder = try Scratch()
        let root = folder.path + "/apps"
        let exact = bytes(root + "/") + Self.oddName
        #expect(try InboxProcess.run([bytes("--container"), exact, bytes("init")]).status == 0)
        let fleet = try InboxProcess.start(["watch", "--root", root, "--on-arrival", "move"].map(bytes))
        defer { _ = fleet.terminate() }
        let source = bytes(folder.path + "/") + Self.oddFile
        try write(source, "served")
        #expect(try InboxProcess.run([bytes("--container"), exact, bytes("deliver"), source]).status == 0)
        let moved = waitUntil(timeout: 30) { exists(exact + bytes("/Documents/") + Self.oddFile) }
        #expect(moved, "the fleet serves the container and moves its arrival")
        #expect(!exists(bytes(root + "/") + Self.replacedName), "nothing is made under the U+FFFD spelling")
        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test func aRootAndANamedContainerThatAreNotUTF8AreServedByOneFleet() throws {
        let folder = try Scratch()
        let root = bytes(folder.path + "/apps") + [0xFF]
        let named = bytes(folder.path + "/named") + [0xFE]
        let containers = [root + bytes("/a"), named]
        for container in containers {
            #expect(try InboxProcess.run([bytes("--container"), container, bytes("init")]).status == 0)
        }
        let fleet = try InboxProcess.start(
            [bytes("--container"), named, bytes("watch"), bytes("--root"), root, bytes("--on-arrival"), bytes("move")])
        defer { _ = fleet.terminate() }
        for (index, container) in containers.enumerated() {
            let source = bytes(folder.path + "/") + Self.oddFile + bytes("\(index)")
            try write(source, "served \(index)")
            #expect(try InboxProcess.run([bytes("--container"), container, bytes("deliver"), source]).status == 0)
            let moved = waitUntil(timeout: 30) {
                exists(container + bytes("/Documents/") + Self.oddFile + bytes("\(index)"))
            }
            #expect(moved, "the fleet serves \(String(decoding: container, as: UTF8.self))")
        }
        kill(fleet.pid, SIGTERM)
        let result = try fleet.finish()
        #expect(result.status == 0, "\(result.stderr)")
    }

    @Test func backupToAndRestoreFromAPathThatIsNotUTF8() throws {
        let folder = try Scratch()
        let exact = bytes(folder.path + "/") + Self.oddName
        #expect(try InboxProcess.run([bytes("--container"), exact, bytes("init")]).status == 0)
        let source = bytes(folder.path + "/") + Self.oddFile
        try write(source, "backed up")
        #expect(try InboxProcess.run([bytes("--container"), exact, bytes("deliver"), source]).status == 0)
        #expect(try InboxProcess.run([bytes("--container"), exact, bytes("move"), Self.oddFile]).status == 0)
        // An import, from a source named by such bytes, so that the backup snapshots the import index beside the
        // archive (`VACUUM INTO` a path that is not UTF-8).
        let mail = bytes(folder.path + "/mail") + [0xFF]
        try write(mail, ImportIndexDamageTests.message(1))
        let imported = try InboxProcess.run([bytes("--container"), exact, bytes("import"), mail])
        #expect(imported.status == 0, "\(imported.stderr)")

        let out = bytes(folder.path + "/out") + [0xFF]
        #expect(mkdir(cPath(out), 0o755) == 0)
        let archive = out + [0x2F] + Self.oddName + bytes(".tar")
        let written = try InboxProcess.run([bytes("--container"), exact, bytes("backup"), bytes("--to"), archive])
        #expect(written.status == 0, "\(written.stderr)")
        #expect(written.stdout == archive + [0x0A])
        #expect(exists(archive) && !exists(bytes(folder.path + "/out\u{FFFD}")))

        let fresh = bytes(folder.path + "/fresh") + [0xFF]
        #expect(try InboxProcess.run([bytes("--container"), fresh, bytes("init")]).status == 0)
        let restored = try InboxProcess.run([bytes("--container"), fresh, bytes("restore"), archive])
        #expect(restored.status == 0, "\(restored.stderr)")
        #expect(exists(fresh + bytes("/Documents/") + Self.oddFile))
        #expect(exists(fresh + bytes("/Documents/Inbox/m1-0.bin")))
        #expect(exists(fresh + bytes("/Library/Application Support/inbox/import.sqlite")), "the index was archived")

        // exclude-from-backup takes an absolute path inside such a container.
        let excluded = try InboxProcess.run([
            bytes("--container"), fresh, bytes("exclude-from-backup"), fresh + bytes("/Documents/") + Self.oddFile,
        ])
        #expect(excluded.status == 0, "\(excluded.stderr)")
    }

    @Test func aBundleFolderNamedByBytesThatAreNotUTF8IsInstalled() throws {
        let folder = try Scratch()
        let bundle = bytes(folder.path + "/bundle") + [0xFF]
        #expect(mkdir(cPath(bundle), 0o755) == 0)
        try write(bundle + bytes("/Info.plist"), "<plist/>")
        let exact = bytes(folder.path + "/") + Self.oddName
        let made = try InboxProcess.run([bytes("--container"), exact, bytes("init"), bytes("--bundle"), bundle])
        #expect(made.status == 0, "\(made.stderr)")
        #expect(exists(exact + bytes("/App.app/Info.plist")))
    }
}
