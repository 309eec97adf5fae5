import Foundation
import Glibc
import TestSupport
import Testing

/// `backup-plan`, `exclude-from-backup`, `backup` and `restore`, run as the built binary (ARCHITECTURE.md, "Bundle,
/// backup and setup", "The command line").
@Suite struct BackupCommandTests {
    static let commands = ["backup-plan", "exclude-from-backup", "backup", "restore"]

    /// The size of the exclusion flag's value on `path`, or -1 when it has none (read with python3).
    private func flagSize(_ path: String) throws -> Int {
        let script = """
            import os, sys
            try: print(len(os.getxattr(sys.argv[1], 'user.com.apple.metadata:com_apple_backup_excludeItem')))
            except OSError: print(-1)
            """
        let (_, output, _) = try runProgram("/usr/bin/python3", ["-c", script, path]).parts
        return Int(output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -2
    }

    private func write(_ path: String, _ contents: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test(arguments: commands)
    func helpPrintsUsageAndExitsZero(command: String) throws {
        let result = try InboxProcess.run(command, "--help")
        #expect(result.status == 0)
        #expect(result.stdoutText.contains("USAGE: inbox [--container DIR] \(command)"))
        let overview = try InboxProcess.run("--help")
        #expect(overview.stdoutText.contains("  \(command) "), "the command list cuts no name")
    }

    @Test func thePlanPrintsOneLineAFileAndAJSONArray() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try write(container + "/Documents/report.pdf", "pdf")
        try write(container + "/Library/Caches/x", "cache")
        #expect(symlink("report.pdf", container + "/Documents/latest") == 0)

        let text = try InboxProcess.run("--container", container, "backup-plan")

        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.lines.contains("+ Documents/report.pdf  (Documents: backed up)"))
        #expect(text.lines.contains("- Library/Caches/x  (Library/Caches: not backed up)"))
        #expect(text.lines.contains("+ Documents/latest -> report.pdf  (Documents: backed up)"))
        let json = try InboxProcess.run("--container", container, "backup-plan", "--json")
        #expect(json.status == 0)
        let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]])
        #expect(array.count == text.lines.count)
        for object in array {
            #expect(Set(object.keys) == ["path", "included", "reason"])
            #expect((object["path"] as? String)?.hasPrefix("/") == false, "paths are relative to the container")
        }
        let report = array.first { $0["path"] as? String == "Documents/report.pdf" }
        #expect(report?["included"] as? Bool == true)
        #expect(report?["reason"] as? String == "Documents: backed up")
    }

    @Test(.enabled(if: userAttributesWork)) func excludeFromBackupSetsAndClearsTheFlag() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try write(container + "/Documents/big/a.iso", "iso")
        try write(container + "/Documents/small.txt", "txt")
        #expect(symlink("small.txt", container + "/Documents/link") == 0)

        let set = try InboxProcess.run("--container", container, "exclude-from-backup", container + "/Documents/big")
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.lines == ["excluded from backup: \(container)/Documents/big"])
        var plan = try InboxProcess.run("--container", container, "backup-plan").lines
        #expect(plan.contains("- Documents/big/a.iso  (Documents/big/ flagged: excluded from backup)"))

        let undo = try InboxProcess.run(
            "--container", container, "exclude-from-backup", container + "/Documents/big", "--undo")
        #expect(undo.status == 0)
        #expect(undo.lines == ["exclusion flag cleared: \(container)/Documents/big"])
        plan = try InboxProcess.run("--container", container, "backup-plan").lines
        #expect(plan.contains("+ Documents/big/a.iso  (Documents: backed up)"))

        for (path, status) in [
            (container + "/Documents/missing", Int32(66)), (container + "/Documents/link", 77), ("/etc/passwd", 77),
            (container + "/Documents/../Documents/small.txt", 77), (container, 77),
        ] {
            let result = try InboxProcess.run("--container", container, "exclude-from-backup", path)
            #expect(result.status == status, "\(path): \(result.stderr)")
            #expect(result.stderr.hasPrefix("inbox: "))
            #expect(result.stdout.isEmpty)
        }
    }

    /// Linux asks for write permission to set a `user.` attribute, even of the owner: an ordinary user's
    /// read-only Inbox item gets its owner's write bit for the moment of the change only.
    @Test(
        .enabled(if: userAttributesWork && getuid() == 0, "needs root, to act as another user"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs setpriv"))
    func anOrdinaryUserFlagsAReadOnlyInboxItem() throws {
        let setpriv = "/usr/bin/setpriv"
        let folder = try Scratch()
        #expect(chmod(folder.path, 0o755) == 0)
        let container = try folder.initContainer()
        #expect(try runProgram("/bin/chown", ["-R", "65534:65534", container]).status == 0)
        let asNobody = [
            setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", try SharedBinaries.ready(), "--container",
            container,
        ]
        try write(folder.path + "/scan.pdf", "scan")
        #expect(chmod(folder.path + "/scan.pdf", 0o644) == 0)
        let delivered = try runProgram(setpriv, Array(asNobody.dropFirst()) + ["deliver", folder.path + "/scan.pdf"])
        #expect(delivered.status == 0, "\(delivered.stderr)")
        let item = container + "/Documents/Inbox/scan.pdf"
        let direct = try runProgram(
            setpriv,
            Array(asNobody.dropFirst(1).prefix(3)) + [
                "/usr/bin/python3", "-c", "import os, sys; os.setxattr(sys.argv[1], 'user.t', b'1')", item,
            ])
        #expect(direct.status != 0, "the owner cannot set an attribute on its own 0444 file directly")

        let flagged = try runProgram(setpriv, Array(asNobody.dropFirst()) + ["exclude-from-backup", item])

        #expect(flagged.status == 0, "\(flagged.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: item)
        #expect(attributes[.posixPermissions] as? Int == 0o444)
        #expect(attributes[.ownerAccountID] as? Int == 65534)
        #expect(try flagSize(item) == 61)
        let cleared = try runProgram(setpriv, Array(asNobody.dropFirst()) + ["exclude-from-backup", item, "--undo"])
        #expect(cleared.status == 0, "\(cleared.stderr)")
        #expect(try flagSize(item) == -1)
        #expect((try FileManager.default.attributesOfItem(atPath: item))[.posixPermissions] as? Int == 0o444)
    }

    @Test func backupThenRestoreGivesBackTheSameFiles() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try write(folder.path + "/in.txt", "handed in")
        #expect(try InboxProcess.run("--container", container, "deliver", folder.path + "/in.txt").status == 0)
        let files = [
            "Documents/report.pdf": String(repeating: "report ", count: 50_000), "Documents/Deep/er/notes.md": "notes",
            "Library/Preferences/app.plist": "<plist/>", "Library/Application Support/model.bin": "model",
        ]
        for (path, contents) in files { try write(container + "/" + path, contents) }
        try write(container + "/Library/Caches/thumb.png", "cache")
        try write(container + "/tmp/upload.part", "part")
        let archive = folder.path + "/backup.tar"

        let backup = try InboxProcess.run("--container", container, "backup", "--to", archive)

        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(backup.lines == [archive])
        let (tarStatus, listing, tarErrors) = try runProgram("/usr/bin/tar", ["-tvf", archive]).parts
        #expect(tarStatus == 0 && tarErrors.isEmpty, "\(tarErrors)")
        #expect(listing.contains("Documents/Inbox/in.txt") && listing.contains("Documents/Deep/er/notes.md"))
        #expect(!listing.contains("Caches/thumb.png") && !listing.contains("tmp/"))

        let target = folder.path + "/restored"
        #expect(try InboxProcess.run("--container", target, "init").status == 0)
        let restore = try InboxProcess.run("--container", target, "restore", archive)

        #expect(restore.status == 0, "\(restore.stderr)")
        #expect(restore.lines == [target])
        for path in Array(files.keys) + ["Documents/Inbox/in.txt", "Library/Application Support/inbox/events.jsonl"] {
            #expect(
                FileManager.default.contents(atPath: target + "/" + path)
                    == FileManager.default.contents(atPath: container + "/" + path), "\(path)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: target + "/Library/Caches").isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: target + "/tmp").isEmpty)

        let again = try InboxProcess.run("--container", target, "restore", archive)
        #expect(again.status == 73)
        #expect(again.stderr.contains("restore into a new container made by 'inbox init'"))
        #expect(
            try InboxProcess.run("--container", container, "backup", "--to", container + "/Documents/b.tar").status
                == 77)
        #expect(try InboxProcess.run("--container", container, "backup").status == 64)
        #expect(try InboxProcess.run("--container", target, "restore", folder.path + "/none.tar").status == 66)
    }

    /// All or nothing (issue 9): a truncated archive is one line and exit 65, and the container stays fresh.
    @Test func aTruncatedArchiveRestoresNothing() throws {
        let folder = try Scratch()
        let source = try folder.initContainer()
        try write(source + "/Documents/report.pdf", String(repeating: "report ", count: 20_000))
        try write(source + "/Documents/notes.md", "notes")
        let archive = folder.path + "/backup.tar"
        #expect(try InboxProcess.run("--container", source, "backup", "--to", archive).status == 0)
        let whole = try #require(FileManager.default.contents(atPath: archive))
        let half = folder.path + "/half.tar"
        try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: half))
        let target = folder.path + "/target"
        #expect(try InboxProcess.run("--container", target, "init").status == 0)
        let before = try treeListing(target)

        let result = try InboxProcess.run("--container", target, "restore", half)

        #expect(result.status == 65)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("inbox: cannot read the backup '\(half)': "), "\(result.stderr)")
        #expect(try treeListing(target) == before)
        let again = try InboxProcess.run("--container", target, "restore", archive)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(FileManager.default.contents(atPath: target + "/Documents/notes.md") == Data("notes".utf8))
    }

    @Test func aHostileArchiveIsRefusedEntryByEntry() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let absolute = "/tmp/inbox-cli-abs-\(UUID().uuidString)"
        let passwd = FileManager.default.contents(atPath: "/etc/passwd")
        let script = """
            import io, sys, tarfile
            archive = tarfile.open(sys.argv[1], 'w', format=tarfile.PAX_FORMAT)
            def add(name, kind=tarfile.REGTYPE, data=b'x', link=''):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = kind, link
                info.size = len(data) if kind == tarfile.REGTYPE else 0
                archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
            add('../x')
            add(sys.argv[2])
            add('Documents/evil', tarfile.SYMTYPE, link='/etc')
            add('Documents/evil/passwd', data=b'owned')
            add('Documents/hard', tarfile.LNKTYPE, link='/etc/passwd')
            add('Documents/fifo', tarfile.FIFOTYPE)
            add('Documents/good.txt', data=b'good')
            archive.close()
            """
        let made = try runProgram("/usr/bin/python3", ["-c", script, folder.path + "/h.tar", absolute])
        try #require(made.status == 0, "\(made.stderr)")

        let result = try InboxProcess.run("--container", container, "restore", folder.path + "/h.tar")

        #expect(result.status == 65)
        let lines = result.stderr.split(separator: "\n").map(String.init)
        #expect(lines.contains("inbox: refused '../x': a '..' in the path"))
        #expect(lines.contains("inbox: refused '\(absolute)': an absolute path"))
        #expect(
            lines.contains(
                "inbox: refused 'Documents/evil': a symbolic link that may lead out of the container (to '/etc')"))
        #expect(lines.contains("inbox: refused 'Documents/hard': a hard link out of the container (to '/etc/passwd')"))
        #expect(lines.contains("inbox: refused 'Documents/fifo': a FIFO is never restored"))
        #expect(lines.last?.hasPrefix("inbox: refused 5 entries of") == true)
        #expect(FileManager.default.contents(atPath: container + "/Documents/good.txt") == Data("good".utf8))
        #expect(!FileManager.default.fileExists(atPath: absolute))
        #expect(!FileManager.default.fileExists(atPath: folder.path + "/x"))
        #expect(FileManager.default.contents(atPath: "/etc/passwd") == passwd)
        let evil = try FileManager.default.attributesOfItem(atPath: container + "/Documents/evil")
        #expect(evil[.type] as? FileAttributeType == .typeDirectory, "the link was never made, so never followed")
    }
}
