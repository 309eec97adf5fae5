import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox` runs every command but those that need InboxFormats (GMime, libarchive), which it hands whole to
/// `inbox-formats` (ARCHITECTURE.md, "Two executables").
@Suite struct TwoExecutablesTests {
    /// The folder of the built `inbox` and `inbox-formats`.
    static let built = URL(fileURLWithPath: InboxProcess.binary).deletingLastPathComponent().path

    /// Copies of the built executables laid out as `make install` lays them out under `prefix`: `bin/inbox`, and
    /// `libexec/inbox/inbox-formats` unless `withFormats` is false. Returns the path of `bin/inbox`.
    static func install(under prefix: String, withFormats: Bool = true) throws -> String {
        let files = FileManager.default
        try files.createDirectory(atPath: prefix + "/bin", withIntermediateDirectories: true)
        try files.copyItem(atPath: built + "/inbox", toPath: prefix + "/bin/inbox")
        if withFormats {
            try files.createDirectory(atPath: prefix + "/libexec/inbox", withIntermediateDirectories: true)
            try files.copyItem(atPath: built + "/inbox-formats", toPath: prefix + "/libexec/inbox/inbox-formats")
        }
        return prefix + "/bin/inbox"
    }

    @Test func anInstalledInboxHandsImportAndBackupsToInboxFormatsInLibexec() throws {
        let folder = try Scratch()
        let inbox = try Self.install(under: folder.path + "/usr")
        let container = try folder.initContainer()

        let imported = try InboxProcess.run(
            "--container", container, "import", "-", input: ImportCommandTests.message, executable: inbox)
        #expect(imported.status == 0, "\(imported.stderr)")
        let names = imported.lines.map { URL(fileURLWithPath: $0).lastPathComponent }.sorted()
        #expect(names == ["figures.csv", "inner.bin", "report.pdf"])

        let plan = try InboxProcess.run("--container", container, "backup-plan", "--json", executable: inbox)
        #expect(plan.status == 0, "\(plan.stderr)")
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(plan.stdout)) as? [[String: Any]])
        #expect(entries.contains { $0["path"] as? String == "Documents/Inbox/report.pdf" })

        let archive = folder.path + "/backup.tar"
        let backup = try InboxProcess.run("--container", container, "backup", "--to", archive, executable: inbox)
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(backup.lines == [archive])
        #expect(FileManager.default.fileExists(atPath: archive))
    }

    @Test func withoutInboxFormatsSuchACommandFailsWith75InOneLineAndTheRestStillRun() throws {
        let folder = try Scratch()
        let inbox = try Self.install(under: folder.path + "/usr", withFormats: false)
        let container = try folder.initContainer()

        for arguments in [["import", "-"], ["backup", "--to", folder.path + "/b.tar"], ["backup-plan"]] {
            let result = try InboxProcess.run(
                (["--container", container] + arguments).map { Array($0.utf8) }, executable: inbox)
            #expect(result.status == 75, "\(arguments)")
            #expect(result.stdout.isEmpty)
            let expected =
                "inbox: this command runs in inbox-formats, and '\(folder.path)/usr/bin/inbox-formats' does not run: "
            #expect(result.stderr.hasPrefix(expected), "\(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        }
        // Help for such a command is inbox's own; the commands of InboxKit run as ever.
        let help = try InboxProcess.run("import", "--help", executable: inbox)
        #expect(help.status == 0)
        #expect(help.stdoutText.contains("USAGE: inbox [--container DIR] import"))
        let status = try InboxProcess.run("--container", container, "status", "--json", executable: inbox)
        #expect(status.status == 0, "\(status.stderr)")
    }

    @Test func anInboxInPlaceOfInboxFormatsIsRefusedOnceNotRunInALoop() throws {
        let folder = try Scratch()
        let inbox = try Self.install(under: folder.path + "/usr", withFormats: false)
        let container = try folder.initContainer()
        #expect(link(inbox, folder.path + "/usr/bin/inbox-formats") == 0)
        let result = try InboxProcess.run(
            "--container", container, "import", "-", input: ImportCommandTests.message, executable: inbox)
        #expect(result.status == 75, "\(result.stderr)")
        #expect(
            result.stderr
                == "inbox: this command runs in inbox-formats, and '\(folder.path)/usr/bin/inbox-formats' is inbox itself:"
                + " install inbox-formats there\n")
        // Nothing of the message reached the Inbox.
        #expect(try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox").isEmpty)
    }

    /// The libraries a running process has mapped, by file name. `/proc/PID/maps` is read to its end with
    /// `read`: it claims a size of 0, and a read by that size stops short.
    static func mappedLibraries(_ pid: pid_t) throws -> Set<String> {
        let fd = open("/proc/\(pid)/maps", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &chunk, chunk.count)
            guard count >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        let maps = String(decoding: bytes, as: UTF8.self)
        return Set(
            maps.split(separator: "\n").compactMap { line in
                line.split(separator: " ", omittingEmptySubsequences: true).last.flatMap {
                    $0.contains(".so") ? URL(fileURLWithPath: String($0)).lastPathComponent : nil
                }
            })
    }

    @Test func theWatcherMapsNeitherMailLibrariesNorLibmagicForTextAndALogReaderNoHashing() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let watcher = try WatchProcess(container, ["--on-arrival", "move"])
        defer { _ = try? watcher.stop() }
        try folder.file("note.txt", "hello")
        #expect(rename(folder.path + "/note.txt", container + "/Documents/Inbox/note.txt") == 0)
        #expect(waitUntil { logRecords(container, event: "moved").count == 1 })
        // Hashed and typed by now: libnettle is mapped; libmagic is not, since the sniffer named the text and the
        // start's check of the database let it go; GMime and libarchive never are.
        let watching = try Self.mappedLibraries(watcher.child.pid)
        #expect(watching.contains { $0.hasPrefix("libnettle.so") }, "\(watching.sorted())")
        #expect(!watching.contains { $0.hasPrefix("libmagic") }, "\(watching.sorted())")
        #expect(watching.contains { $0.hasPrefix("libinotifytools.so") }, "\(watching.sorted())")
        for absent in ["libgmime", "libglib", "libarchive", "libytnef", "libxml2", "libicu"] {
            #expect(!watching.contains { $0.hasPrefix(absent) }, "\(absent) in \(watching.sorted())")
        }

        // `log --follow` reads the log and never hashes: it maps neither libnettle nor libmagic.
        let reader = try InboxProcess.start(["--container", container, "log", "--follow"].map { Array($0.utf8) })
        _ = reader.readStdout { $0.contains("moved") }
        let reading = try Self.mappedLibraries(reader.pid)
        #expect(reading.contains { $0.hasPrefix("libinotifytools.so") }, "\(reading.sorted())")
        for absent in ["libnettle", "libmagic", "libgmime", "libarchive"] {
            #expect(!reading.contains { $0.hasPrefix(absent) }, "\(absent) in \(reading.sorted())")
        }
        _ = reader.terminate()
    }
}
