import AppContainer
import CArchive
import Foundation
import Glibc
import Synchronization

/// What `BackupArchive.restore(into:)` did with each entry of the archive.
public struct RestoreReport: Sendable {
    public struct Refusal: Sendable {
        /// The entry's name as the archive holds it.
        public let path: [UInt8]
        public let reason: String
    }

    /// The entries restored, relative to the container root.
    public var restored: [[UInt8]] = []
    /// Entries left out on purpose: those under `Library/Caches` and `tmp` (which come back empty) and the
    /// files inbox re-creates.
    public var skipped: [[UInt8]] = []
    /// Entries never written, and why.
    public var refused: [Refusal] = []
}

extension BackupArchive {
    /// Restores the archive into `container`, which must be fresh from `inbox init`: its Documents (the Inbox
    /// included) must hold nothing, else exit status 73; a running watcher is exit status 75. Files `init` wrote
    /// in Library are replaced by the archive's copies.
    ///
    /// Each entry is checked before anything is written, and refused (never written) when its path is absolute
    /// or holds `..`, when it lies outside the places or in the bundle, when it is a FIFO, socket or device
    /// node, when it is a symbolic link that may lead out of the container, or a hard link to a path that is
    /// absolute, holds `..` or is not restored. Entries under `Library/Caches` and `tmp`, and the files inbox
    /// re-creates, are skipped. libarchive then extracts with its own guards on
    /// (`ARCHIVE_EXTRACT_SECURE_SYMLINKS`, `_NODOTDOT`, `_NOABSOLUTEPATHS`: nothing is written through a
    /// symbolic link) and what it refuses is refused too. Refusals are reported, not thrown: the rest is
    /// restored. Owners are not restored; modes (without set-id bits) and modification times are. The
    /// container's filesystem is synced before this returns.
    public func restore(into container: Container) throws(ContainerError) -> RestoreReport {
        try restore(into: container, ownWorkingFolder: true)
    }

    /// `ownWorkingFolder` false forces the fallback for kernels that refuse `unshare(CLONE_FS)` (tests).
    func restore(into container: Container, ownWorkingFolder: Bool) throws(ContainerError) -> RestoreReport {
        let archive = try openArchive()
        if let entry = try Self.userContent(container) {
            throw ContainerError(
                .cannotCreate,
                "cannot restore into '\(container.root)': it already holds '\(entry)'; "
                    + "restore into a new container made by 'inbox init'")
        }
        if let pid = WatcherLock.holder(of: container) {
            throw ContainerError(.busy, "a watcher (pid \(pid)) holds '\(container.root)'; stop it, then restore")
        }
        let root = try container.openFolder([])
        let job = RestoreJob(
            container: container, archive: archive.rawValue, root: root.rawValue, shown: path,
            ownWorkingFolder: ownWorkingFolder)
        let report = try job.runOnOwnThread()
        // Everything restored reaches the disk before this returns: one call for the container's filesystem.
        do {
            try system_syncfs(root.rawValue)
        } catch {
            throw error.failure("sync", container.root)
        }
        // Closed here, once the job that borrowed their raw descriptors is done.
        try? archive.close()
        try? root.close()
        return report
    }

    /// The archive, open to read; a folder, FIFO or device is not one (exit status 65).
    private func openArchive() throws(ContainerError) -> FileDescriptor {
        do throws(Errno) {
            let archive = try FileDescriptor(path, [.readOnly, .nonBlocking])
            guard try archive.fileStatus().kind == .regular else { throw Errno.isDirectory }
            return archive
        } catch .isDirectory {
            throw ContainerError(.badData, "'\(path)' is not a file, so not a tar archive")
        } catch {
            throw error.failure("open the backup", path)
        }
    }

    /// The first thing in Documents but an empty Inbox folder, as `Documents/<name>`.
    private static func userContent(_ container: Container) throws(ContainerError) -> String? {
        let documents = try container.openFolder(.documents)
        do {
            for name in try documents.entries() {
                // A failed look is an error, not content: it names the cause.
                if name.string == "Inbox", try fileStatus(in: documents.rawValue, name).kind == .directory {
                    let inbox = try FileDescriptor(at: documents.rawValue, name, [.directory, .noFollow])
                    if let item = try inbox.entries().first { return "Documents/Inbox/\(item)" }
                    continue
                }
                return "Documents/\(name)"
            }
        } catch {
            throw error.failure("read", container.path(.documents))
        }
        return nil
    }
}

/// One restore, run on a thread of its own: after `unshare(CLONE_FS)` that thread alone has the container
/// root as its working folder (and its own umask, which libarchive sets and resets), so entries are extracted
/// by their relative paths with every libarchive guard on, and no other thread of the process is affected.
/// Where the kernel refuses the unshare, entries get the root as a prefix instead, without
/// `_NOABSOLUTEPATHS` (which would refuse every one of them); the checks of `RestoreRules` still come first.
private final class RestoreJob: Sendable {
    let container: Container
    let archive: CInt
    let root: CInt
    let shown: String
    let ownWorkingFolder: Bool
    private let result = Mutex<Result<RestoreReport, ContainerError>?>(nil)

    init(container: Container, archive: CInt, root: CInt, shown: String, ownWorkingFolder: Bool) {
        self.container = container
        self.archive = archive
        self.root = root
        self.shown = shown
        self.ownWorkingFolder = ownWorkingFolder
    }

    func runOnOwnThread() throws(ContainerError) -> RestoreReport {
        let finished = DispatchSemaphore(value: 0)
        #if DEBUG
            // A test's fault plan covers the restore's own thread too.
            let plan = SyscallFaultPlan.current ?? SyscallFaultPlan()
        #endif
        let thread = Thread { [self] in
            var outcome: Result<RestoreReport, ContainerError>
            #if DEBUG
                outcome = plan.run { Result { () throws(ContainerError) in try withUTF8Names(extract) } }
            #else
                outcome = Result { () throws(ContainerError) in try withUTF8Names(extract) }
            #endif
            result.withLock { $0 = outcome }
            finished.signal()
        }
        thread.name = "inbox-restore"
        thread.start()
        finished.wait()
        guard let outcome = result.withLock({ $0 }) else {
            throw ContainerError(.failure, "the restore of '\(shown)' ended without a result")
        }
        return try outcome.get()
    }

    private func extract() throws(ContainerError) -> RestoreReport {
        var prefix: [UInt8] = []
        var flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS
        flags |= ARCHIVE_EXTRACT_SECURE_NODOTDOT
        if ownWorkingFolder, (try? system_unshare_fs()) != nil {
            do {
                try system_fchdir(root)
            } catch {
                throw error.failure("enter", container.root)
            }
            flags |= ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS
        } else {
            prefix = Array(container.root.utf8) + [0x2F]
        }
        guard let reader = archive_read_new(), let disk = archive_write_disk_new() else {
            throw ContainerError(.failure, "cannot restore '\(shown)': libarchive made no reader")
        }
        defer {
            archive_read_free(reader)
            archive_write_free(disk)
        }
        archive_read_support_format_tar(reader)
        archive_write_disk_set_options(disk, flags)
        guard archive_read_open_fd(reader, archive, 64 * 1024) == ARCHIVE_OK else {
            throw failure(reader, .badData, "read the backup")
        }
        var report = RestoreReport()
        var entry: OpaquePointer?
        while true {
            let status = archive_read_next_header(reader, &entry)
            if status == ARCHIVE_EOF { break }
            guard status >= ARCHIVE_WARN, let entry else { throw failure(reader, .badData, "read the backup") }
            let name = RestoreRules.bytes(archive_entry_pathname(entry) ?? archive_entry_pathname_utf8(entry))
            let symlink = archive_entry_symlink(entry) ?? archive_entry_symlink_utf8(entry)
            let hardlink = archive_entry_hardlink(entry) ?? archive_entry_hardlink_utf8(entry)
            let verdict = RestoreRules.verdict(
                name, type: archive_entry_filetype(entry), symlink: symlink.map(RestoreRules.bytes),
                hardlink: hardlink.map(RestoreRules.bytes), appName: container.appName)
            switch verdict {
            case .skip:
                if !name.allSatisfy({ $0 == 0x2E || $0 == 0x2F }) { report.skipped.append(name) }
            case .refuse(let reason):
                report.refused.append(RestoreReport.Refusal(path: name, reason: reason))
            case .restore(let relative, let linkTarget):
                guard prefix.count + max(relative.count, linkTarget?.count ?? 0) < PATH_MAX else {
                    report.refused.append(RestoreReport.Refusal(path: name, reason: "a path too long"))
                    continue
                }
                (prefix + relative).withCString { archive_entry_copy_pathname(entry, $0) }
                if let linkTarget { (prefix + linkTarget).withCString { archive_entry_copy_hardlink(entry, $0) } }
                archive_entry_set_perm(entry, archive_entry_perm(entry) & 0o777)
                let written = archive_write_header(disk, entry)
                if written == ARCHIVE_FATAL { throw failure(disk, .ioError, "restore into") }
                guard written >= ARCHIVE_WARN else {
                    report.refused.append(RestoreReport.Refusal(path: name, reason: message(disk)))
                    continue
                }
                try copyData(reader, disk)
                if archive_write_finish_entry(disk) == ARCHIVE_FATAL { throw failure(disk, .ioError, "restore into") }
                report.restored.append(relative)
            }
        }
        // Folders get their modes and times now, once what they hold is written.
        guard archive_write_close(disk) >= ARCHIVE_WARN else { throw failure(disk, .ioError, "restore into") }
        return report
    }

    private func copyData(_ reader: OpaquePointer, _ disk: OpaquePointer) throws(ContainerError) {
        var block: UnsafeRawPointer?
        var size = 0
        var offset: la_int64_t = 0
        while true {
            let status = archive_read_data_block(reader, &block, &size, &offset)
            if status == ARCHIVE_EOF { return }
            guard status >= ARCHIVE_WARN else { throw failure(reader, .badData, "read the backup") }
            guard archive_write_data_block(disk, block, size, offset) >= ARCHIVE_WARN else {
                throw failure(disk, .ioError, "restore into")
            }
        }
    }

    private func message(_ archive: OpaquePointer) -> String {
        archive_error_string(archive).map { String(cString: $0) } ?? "libarchive failed"
    }

    /// libarchive's error; its errno, where it has one, decides the exit status.
    private func failure(_ archive: OpaquePointer, _ code: ContainerError.Code, _ doing: String) -> ContainerError {
        let errno = archive_errno(archive)
        let cause = errno > 0 ? Errno(rawValue: errno) : nil
        let mapped = cause?.failure("", "").code
        let finalCode: ContainerError.Code =
            code == .badData
            ? (mapped == .ioError ? .ioError : .badData)
            : (mapped == nil || mapped == .failure ? code : mapped ?? code)
        let place = code == .badData ? shown : container.root
        return ContainerError(finalCode, "cannot \(doing) '\(place)': \(message(archive))", cause: cause)
    }
}
