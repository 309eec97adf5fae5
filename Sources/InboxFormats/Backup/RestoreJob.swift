import AppContainer
import CArchive
import Dispatch
import FoundationEssentials
import Glibc
import InboxKit
import Synchronization

/// One restore's extraction into the staging folder (`RestoreSwitch`), run on a thread of its own: after
/// `unshare(CLONE_FS)` that thread alone has the staging folder as its working folder (and its own umask, which
/// libarchive sets and resets), so entries are extracted by their relative paths with every libarchive guard on,
/// and no other thread of the process is affected. Where the kernel refuses the unshare, entries get the staging
/// folder's path as a prefix instead, without `_NOABSOLUTEPATHS` (which would refuse every one of them); the checks
/// of `RestoreRules` still come first. The archive is read to its end-of-archive marker: one cut short at an
/// entry's end is truncated too.
final class RestoreJob: Sendable {
    let container: Container
    let archive: CInt
    let staging: CInt
    let stagingPath: String
    let shown: String
    let ownWorkingFolder: Bool
    private let result = Mutex<Result<RestoreReport, ContainerError>?>(nil)

    init(
        container: Container, archive: CInt, staging: CInt, stagingPath: String, shown: String, ownWorkingFolder: Bool
    ) {
        self.container = container
        self.archive = archive
        self.staging = staging
        self.stagingPath = stagingPath
        self.shown = shown
        self.ownWorkingFolder = ownWorkingFolder
    }

    func runOnOwnThread() throws(ContainerError) -> RestoreReport {
        let finished = DispatchSemaphore(value: 0)
        #if DEBUG
            // A test's fault plan covers the restore's own thread too.
            let plan = SyscallFaultPlan.current ?? SyscallFaultPlan()
        #endif
        do throws(Errno) {
            try startDetachedThread(name: "inbox-restore") { [self] in
                var outcome: Result<RestoreReport, ContainerError>
                #if DEBUG
                    outcome = plan.run { Result { () throws(ContainerError) in try withUTF8Names(extract) } }
                #else
                    outcome = Result { () throws(ContainerError) in try withUTF8Names(extract) }
                #endif
                result.withLock { $0 = outcome }
                finished.signal()
            }
        } catch {
            throw error.failure("start a thread for the restore of", shown)
        }
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
                try system_fchdir(staging)
            } catch {
                throw error.failure("enter", stagingPath)
            }
            flags |= ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS
        } else {
            prefix = Array(stagingPath.utf8) + [0x2F]
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
                (prefix + relative).withCPath { archive_entry_copy_pathname(entry, $0) }
                if let linkTarget { (prefix + linkTarget).withCPath { archive_entry_copy_hardlink(entry, $0) } }
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
        try checkEndMarker(at: archive_read_header_position(reader))
        // Folders get their modes and times now, once what they hold is written.
        guard archive_write_close(disk) >= ARCHIVE_WARN else { throw failure(disk, .ioError, "restore into") }
        return report
    }

    /// libarchive takes an archive that simply stops after an entry for a whole one: the zero block that marks
    /// the end must be where it stopped reading (`offset`), else the archive was cut short (exit status 65).
    private func checkEndMarker(at offset: la_int64_t) throws(ContainerError) {
        let truncated = ContainerError(
            .badData, "cannot read the backup '\(shown)': it ends before its end-of-archive marker (truncated)")
        guard offset >= 0 else { throw truncated }
        var block = [UInt8](repeating: 0, count: 512)
        let count: Int
        do {
            count = try block.withUnsafeMutableBytes { raw in
                Result(catching: { () throws(Errno) in try system_pread(archive, into: raw, at: Int64(offset)) })
            }.get()
        } catch {
            throw error.failure("read the backup", shown)
        }
        guard count == block.count, block.allSatisfy({ $0 == 0 }) else { throw truncated }
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
        // A reader that says nothing met an archive it cannot take as whole.
        let said = archive_error_string(archive) == nil && code == .badData ? "damaged or truncated" : message(archive)
        return ContainerError(finalCode, "cannot \(doing) '\(place)': \(said)", cause: cause)
    }
}
