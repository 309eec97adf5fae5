import Foundation
import Glibc
import TestSupport
import Testing

/// Messages and refusals a hostile or careless user meets (issue 9, "Messages" and "Init").
@Suite struct MessagesTests {
    @Test func anErrorAboutANameWithControlCharactersStaysOnOneLine() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let result = try InboxProcess.run([
            Array("--container".utf8), Array(container.utf8), Array("move".utf8),
            Array("two\nlines\u{1B}[31m.txt".utf8),
        ])
        #expect(result.status == 66)
        #expect(result.stderr.split(separator: "\n").count == 1, "one line: \(result.stderr)")
        #expect(result.stderr.contains(#"two\nlines\x1b[31m.txt"#), "escaped: \(result.stderr)")
    }

    @Test func aDoubleDashMakesHelpAName() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let source = try folder.file("--help", "a file named --help")
        #expect(try InboxProcess.run("--container", container, "deliver", "--", source).status == 0)
        let moved = try InboxProcess.run("--container", container, "move", "--", "--help")
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(moved.stdoutText == container + "/Documents/--help\n")
        #expect(try InboxProcess.run("--container", container, "move", "--help").stdoutText.contains("USAGE"))
    }

    @Test func initMakesAContainerOnlyInAnEmptyFolderOrAContainer() throws {
        let folder = try Scratch()
        let home = folder.path + "/home"
        try folder.file("home/.bashrc", "export PS1=")
        let refused = try InboxProcess.run("--container", home, "init")
        #expect(refused.status == 73, "\(refused.stderr)")
        #expect(refused.stderr.contains(".bashrc"))
        let mode = try FileManager.default.attributesOfItem(atPath: home)[.posixPermissions] as? Int
        #expect(mode != 0o700, "not chmodded")
        #expect(try FileManager.default.contentsOfDirectory(atPath: home) == [".bashrc"], "nothing created")
        let file = try folder.file("plain", "a file")
        let onAFile = try InboxProcess.run("--container", file, "init")
        #expect(onAFile.status == 73, "\(onAFile.stderr)")
        // A container, and one a crash left half made, are fine.
        let container = try folder.initContainer()
        #expect(try InboxProcess.run("--container", container, "init").status == 0)
        try FileManager.default.createDirectory(
            atPath: folder.path + "/half/Documents", withIntermediateDirectories: true)
        #expect(try InboxProcess.run("--container", folder.path + "/half", "init").status == 0)
    }

    @Test func aSocketAndAFIFOAreRefusedByOneRule() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let fifo = folder.path + "/fifo"
        #expect(mkfifo(fifo, 0o644) == 0)
        let socketPath = folder.path + "/socket"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            socketPath.utf8CString.withUnsafeBytes { raw.copyBytes(from: $0.prefix(raw.count)) }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        #expect(bound == 0)
        let statuses = try [fifo, socketPath].map {
            try InboxProcess.run("--container", container, "deliver", $0).status
        }
        #expect(statuses == [66, 66])
    }
}

/// Leftovers of crashes are swept by the watcher, not only by `init` (issue 9, "Leftovers").
@Suite struct LeftoverTests {
    @Test func theWatcherSweepsStagingThatACrashedDeliveryLeft() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let inbox = container + "/Documents/Inbox"
        try folder.file("container/Documents/Inbox/.inbox-staging.1.2", "half a delivery")
        try folder.file("container/Documents/Inbox/.inbox-staging.1.3", "a delivery under way")
        let old = Date().addingTimeInterval(-40 * 3600)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: inbox + "/.inbox-staging.1.2")
        let watch = try InboxProcess.run("--container", container, "watch", "--once")
        #expect(watch.status == 0, "\(watch.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: inbox) == [".inbox-staging.1.3"])
        let deleted = logRecords(container, event: "deleted")
        #expect(deleted.count == 1 && deleted.first?["reason"] as? String == "abandoned staging")
    }
}

/// Init and backup replace only what is theirs (issue 9).
@Suite struct ReplaceOnlyOwnTests {
    @Test func aBackupNeverReplacesADeviceAFIFOOrALink() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let fifo = folder.path + "/fifo.tar"
        #expect(mkfifo(fifo, 0o644) == 0)
        let target = try folder.file("precious.txt", "precious")
        let link = folder.path + "/link.tar"
        #expect(symlink(target, link) == 0)
        var paths = [fifo, link]
        let device = folder.path + "/null.tar"
        if mknod(device, S_IFCHR | 0o644, dev_t((1 << 8) | 3)) == 0 {  // 1:3, /dev/null
            paths.append(device)
        } else {
            print("skipped the device node: mknod is not allowed here")
        }
        for path in paths {
            let backup = try InboxProcess.run("--container", container, "backup", "--to", path)
            #expect(backup.status == 77, "\(path): \(backup.stderr)")
            #expect(backup.stderr.contains("not a regular file"))
        }
        var status = stat()
        #expect(lstat(fifo, &status) == 0 && status.st_mode & S_IFMT == S_IFIFO)
        #expect(lstat(link, &status) == 0 && status.st_mode & S_IFMT == S_IFLNK)
        #expect(FileManager.default.contents(atPath: target) == Data("precious".utf8))
        if paths.count == 3 { #expect(lstat(device, &status) == 0 && status.st_mode & S_IFMT == S_IFCHR) }
        let regular = try folder.file("old.tar", "an old backup")
        #expect(try InboxProcess.run("--container", container, "backup", "--to", regular).status == 0)
        #expect(FileManager.default.contents(atPath: regular) != Data("an old backup".utf8), "replaced")
    }

    @Test func aSecondWatcherNamesTheFirstEvenAtItsStart() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        // Holds the lock as a watcher does in the moment before it writes its pid, over the pid a killed
        // watcher left in the file.
        let lock = open(
            container + "/Library/Application Support/inbox/watch.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        defer { close(lock) }
        let stale = Array("424242\n".utf8)
        #expect(stale.withUnsafeBytes { pwrite(lock, $0.baseAddress, $0.count, 0) } == stale.count)
        #expect(flock(lock, LOCK_EX) == 0)
        let second = try InboxProcess.run("--container", container, "watch")
        #expect(second.status == 75)
        #expect(second.stderr.contains("pid \(getpid())"), "the kernel's word: \(second.stderr)")
        #expect(!second.stderr.contains("424242"), "never the stale pid")
    }
}

extension LeftoverTests {
    @Test func aBackupRemovesWhatKilledBackupsLeftBesideIt() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        // A process that has ended: its pid names no one now.
        var child: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
        defer { for pointer in argv { free(pointer) } }
        #expect(posix_spawn(&child, "/bin/true", nil, nil, &argv, environ) == 0)
        var status: CInt = 0
        waitpid(child, &status, 0)
        let dead = try folder.file(".inbox-backup-\(child)-7.partial", "half an archive")
        let alive = try folder.file(".inbox-backup-\(getpid())-8.partial", "an archive being written")
        #expect(try InboxProcess.run("--container", container, "backup", "--to", folder.path + "/b.tar").status == 0)
        #expect(!FileManager.default.fileExists(atPath: dead), "a killed backup's leftover is removed")
        #expect(FileManager.default.fileExists(atPath: alive), "a backup under way is left alone")
    }
}

/// A backup never holds the move journal, and a restore refuses an archive's intents (issue 9).
@Suite struct JournalInArchiveTests {
    @Test func aRestoreRefusesAMoveJournalIntent() throws {
        let folder = try Scratch()
        let archive = folder.path + "/crafted.tar"
        let script = """
            import io, sys, tarfile
            with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as tar:
                for path, data in [("Documents/letter.txt", b"dear"),
                                   ("Library/Application Support/inbox/journal/x.intent", b"name aW52b2ljZS5wZGY=\\n")]:
                    info = tarfile.TarInfo(path); info.size = len(data); info.mode = 0o644
                    tar.addfile(info, io.BytesIO(data))
            """
        let python = try runProgram("/usr/bin/env", ["python3", "-c", script, archive])
        #expect(python.status == 0)
        let container = try folder.initContainer()
        let restore = try InboxProcess.run("--container", container, "restore", archive)
        #expect(restore.status == 65, "\(restore.stderr)")
        #expect(restore.stderr.contains("move journal intent"))
        #expect(
            !FileManager.default.fileExists(atPath: container + "/Library/Application Support/inbox/journal/x.intent"))
        #expect(FileManager.default.contents(atPath: container + "/Documents/letter.txt") == Data("dear".utf8))
    }

    @Test func aBackupLeavesTheMoveJournalOut() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let journal = container + "/Library/Application Support/inbox/journal"
        try FileManager.default.createDirectory(atPath: journal, withIntermediateDirectories: true)
        try Data("name eA==\n".utf8).write(to: URL(fileURLWithPath: journal + "/a.intent"))
        let plan = try InboxProcess.run("--container", container, "backup-plan")
        #expect(plan.stdoutText.contains("- Library/Application Support/inbox/journal/a.intent"), "\(plan.stdoutText)")
    }
}
