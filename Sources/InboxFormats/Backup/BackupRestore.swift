import AppContainer
import Glibc
import InboxKit

/// What `BackupArchive.restore(into:)` did with each entry of the archive.
public struct RestoreReport: Sendable {
    /// An entry of the archive that was not restored.
    public struct Refusal: Sendable {
        /// The entry's name as the archive holds it.
        public let path: [UInt8]
        /// Why, for a person: `an absolute path`, `a '..' in the path`, `a path too long`, ….
        public let reason: String
    }

    /// The entries restored, relative to the container root.
    public var restored: [[UInt8]] = []
    /// Entries left out on purpose: those under `Library/Caches` and `tmp` (which come back empty) and the
    /// files inbox re-creates.
    public var skipped: [[UInt8]] = []
    /// Entries never written, and why.
    public var refused: [Refusal] = []
    /// Problems that left the restore complete, one line each: a staging folder that could not be removed (the
    /// next command that opens the container removes it).
    public var warnings: [String] = []
}

extension BackupArchive {
    /// Restores the archive into `container`, which must be fresh from `inbox init`: its Documents (the Inbox
    /// included) must hold nothing, else exit status 73; a running watcher is exit status 75. Another restore into
    /// it is waited for (and then it is no longer fresh). Documents and Library become the archive's: what `init`
    /// wrote in Library is replaced.
    ///
    /// All or nothing (`RestoreSwitch`): the archive is extracted into a staging folder in the container and read
    /// to its end (its end-of-archive marker included: a truncated or damaged archive is exit status 65); only then
    /// are the staged Documents and Library switched in. On any failure the container is as it was, still fresh;
    /// a restore killed during the switch is swapped back by the next command that opens the container.
    ///
    /// Each entry is checked before anything is written, and refused (never written) when its path is absolute
    /// or holds `..`, when it lies outside the places or in the bundle, when it is nested deeper than a backup
    /// goes, when it is a FIFO, socket or device node, when it is a symbolic link that may lead out of the
    /// container, or a hard link to a path that is absolute, holds `..` or is not restored. Entries under
    /// `Library/Caches` and `tmp`, and the files inbox re-creates, are skipped. libarchive then extracts with its
    /// own guards on (`ARCHIVE_EXTRACT_SECURE_SYMLINKS`, `_NODOTDOT`, `_NOABSOLUTEPATHS`: nothing is written
    /// through a symbolic link) and what it refuses is refused too. Refusals are reported, not thrown: the rest is
    /// restored. An Inbox item under a claim name gets a visible name (`ClaimedItems`). Owners are not restored;
    /// modes (without set-id bits) and modification times are. The container's filesystem is synced before this
    /// returns.
    public func restore(into container: Container) throws(ContainerError) -> RestoreReport {
        try restore(into: container, ownWorkingFolder: true)
    }

    /// `ownWorkingFolder` false forces the fallback for kernels that refuse `unshare(CLONE_FS)` (tests).
    func restore(into container: Container, ownWorkingFolder: Bool) throws(ContainerError) -> RestoreReport {
        let archive = try openArchive()
        let restoreSwitch = try RestoreSwitch(container: container)
        if let entry = try Self.userContent(container) {
            throw ContainerError(
                .cannotCreate,
                "cannot restore into '\(container.root)': it already holds '\(entry)'; "
                    + "restore into a new container made by 'inbox init'")
        }
        if let pid = WatcherLock.holder(of: container) {
            throw ContainerError(.busy, "a watcher (pid \(pid)) holds '\(container.root)'; stop it, then restore")
        }
        let staging = try restoreSwitch.makeStaging()
        var report: RestoreReport
        do {
            let job = try RestoreJob(
                container: container, archive: archive.rawValue, staging: staging.rawValue,
                stagingPath: restoreSwitch.stagingPath, shown: path, ownWorkingFolder: ownWorkingFolder)
            report = try job.runOnOwnThread()
            let stagingPath = restoreSwitch.stagingPath
            try ClaimedItems.unclaim(
                inStaging: staging.rawValue, &report, shown: String(decoding: stagingPath, as: UTF8.self))
            try ImportIndex.forgetPlacements(
                ofIndexAt: stagingPath + Array("/\(Container.stateRelativePath)/import.sqlite".utf8))
        } catch {
            throw restoreSwitch.discarding(after: error)
        }
        if let leftover = try restoreSwitch.switchIn(staging) { report.warnings.append(leftover.message) }
        // Closed here, once the job that borrowed its raw descriptor is done.
        try? archive.close()
        return report
    }

    /// The archive, open to read; a folder, FIFO or device is not one (exit status 65).
    private func openArchive() throws(ContainerError) -> FileDescriptor {
        do throws(Errno) {
            let archive = try FileDescriptor(pathBytes, [.readOnly, .nonBlocking])
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
