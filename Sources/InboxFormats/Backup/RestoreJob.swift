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
    let stagingPath: [UInt8]
    let shown: String
    let ownWorkingFolder: Bool
    private let result = Mutex<Result<RestoreReport, ContainerError>?>(nil)
    private let lib: ArchiveFunctions

    init(
        container: Container, archive: CInt, staging: CInt, stagingPath: [UInt8], shown: String, ownWorkingFolder: Bool
    ) throws(ContainerError) {
        lib = try ArchiveFunctions.loaded.get()
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
            prefix = stagingPath + [0x2F]
        }
        guard let reader = lib.readNew(), let disk = lib.writeDiskNew() else {
            throw ContainerError(.failure, "cannot restore '\(shown)': libarchive made no reader")
        }
        defer {
            _ = lib.readFree(reader)
            _ = lib.writeFree(disk)
        }
        _ = lib.readSupportFormatTar(reader)
        _ = lib.writeDiskSetOptions(disk, flags)
        guard lib.readOpenFd(reader, archive, 64 * 1024) == ARCHIVE_OK else {
            throw failure(reader, .badData, "read the backup")
        }
        var report = RestoreReport()
        var entry: OpaquePointer?
        while true {
            let status = lib.readNextHeader(reader, &entry)
            if status == ARCHIVE_EOF { break }
            guard status >= ARCHIVE_WARN, let entry else { throw failure(reader, .badData, "read the backup") }
            let name = RestoreRules.bytes(lib.entryPathname(entry) ?? lib.entryPathnameUtf8(entry))
            let symlink = lib.entrySymlink(entry) ?? lib.entrySymlinkUtf8(entry)
            let hardlink = lib.entryHardlink(entry) ?? lib.entryHardlinkUtf8(entry)
            let verdict = RestoreRules.verdict(
                name, type: lib.entryFiletype(entry), symlink: symlink.map(RestoreRules.bytes),
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
                (prefix + relative).withCPath { lib.entryCopyPathname(entry, $0) }
                if let linkTarget { (prefix + linkTarget).withCPath { lib.entryCopyHardlink(entry, $0) } }
                _ = lib.entrySetPerm(entry, lib.entryPerm(entry) & 0o777)
                let written = lib.writeHeader(disk, entry)
                if written == ARCHIVE_FATAL { throw failure(disk, .ioError, "restore into") }
                guard written >= ARCHIVE_WARN else {
                    report.refused.append(RestoreReport.Refusal(path: name, reason: message(disk)))
                    continue
                }
                try copyData(reader, disk)
                if lib.writeFinishEntry(disk) == ARCHIVE_FATAL { throw failure(disk, .ioError, "restore into") }
                report.restored.append(relative)
            }
        }
        try checkEndMarker(at: lib.readHeaderPosition(reader))
        // Folders get their modes and times now, once what they hold is written.
        guard lib.writeClose(disk) >= ARCHIVE_WARN else { throw failure(disk, .ioError, "restore into") }
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
            let status = lib.readDataBlock(reader, &block, &size, &offset)
            if status == ARCHIVE_EOF { return }
            guard status >= ARCHIVE_WARN else { throw failure(reader, .badData, "read the backup") }
            guard lib.writeDataBlock(disk, block, size, offset) >= ARCHIVE_WARN else {
                throw failure(disk, .ioError, "restore into")
            }
        }
    }

    private func message(_ archive: OpaquePointer) -> String {
        lib.errorString(archive).map { String(cString: $0) } ?? "libarchive failed"
    }

    /// libarchive's error; its errno, where it has one, decides the exit status.
    private func failure(_ archive: OpaquePointer, _ code: ContainerError.Code, _ doing: String) -> ContainerError {
        let errno = lib.errno(archive)
        let cause = errno > 0 ? Errno(rawValue: errno) : nil
        let mapped = cause?.failure("", "").code
        let finalCode: ContainerError.Code =
            code == .badData
            ? (mapped == .ioError ? .ioError : .badData)
            : (mapped == nil || mapped == .failure ? code : mapped ?? code)
        let place = code == .badData ? shown : container.root
        // A reader that says nothing met an archive it cannot take as whole.
        let said = lib.errorString(archive) == nil && code == .badData ? "damaged or truncated" : message(archive)
        return ContainerError(finalCode, "cannot \(doing) '\(place)': \(said)", cause: cause)
    }
}
