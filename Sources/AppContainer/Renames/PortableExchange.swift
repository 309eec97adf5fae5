import Glibc

/// An exchange of two names (ARCHITECTURE.md, "Network and FUSE filesystems"): `renameat2` with
/// `RENAME_EXCHANGE`, or, on a filesystem that refuses rename flags (EINVAL: NFS, SMB, FUSE), a journaled two-step
/// rename with the same outcome:
/// 1. the intent `intent` is written durably in `newFolder`, naming both names and both items (device and inode);
/// 2. `old` (in `oldFolder`) moves aside, to `intent` + ".aside" in `newFolder`: from here until step 3 no item is
///    at `old`, the window ARCHITECTURE.md names;
/// 3. `new` moves to `old`;
/// 4. the aside moves to `new`, so that `new` holds the old item as an exchange leaves it;
/// 5. both folders are synced and the intent removed; the caller syncs `newFolder`, as after an atomic exchange.
/// Each move is a `renameNoReplace`. A failure rolls back what was done (`rollBackExchange`, with `naming`) and is
/// thrown; where the rollback fails too, the intent stays (`isExchangePending`) for the caller's recovery at the
/// next start, which calls `rollBackExchange`. Which filesystems refuse the flags is remembered per device
/// (`RenameFlagSupport`).
package func exchange(
    _ newFolder: CInt, _ new: FileName, _ oldFolder: CInt, _ old: FileName, intent: FileName,
    naming: ClashNaming? = nil
) throws(Errno) {
    if !RenameFlagSupport.isKnownRefusing(newFolder) {
        do {
            try system_renameat2(newFolder, new, oldFolder, old, .exchange)
            return
        } catch .invalidArgument {
            RenameFlagSupport.remember(newFolder)
        }
    }
    let newID = try fileStatus(in: newFolder, new).fileID
    let oldID = try fileStatus(in: oldFolder, old).fileID
    let record = ExchangeIntent(new: new, old: old, newID: newID, oldID: oldID)
    try record.write(in: newFolder, as: intent)
    let aside = ExchangeIntent.asideName(intent)
    do {
        try renameNoReplace(oldFolder, old, newFolder, aside)
        try renameNoReplace(newFolder, new, oldFolder, old)
        try renameNoReplace(newFolder, aside, newFolder, new)
        try system_fsync(oldFolder)
        if oldFolder != newFolder { try system_fsync(newFolder) }
        try system_unlinkat(newFolder, intent)
    } catch {
        // Rolled back, or the intent stays for the recovery at the next start: either way the error is the answer.
        _ = try? rollBackExchange(newFolder, oldFolder, intent: intent, naming: naming)
        throw error
    }
}

/// Whether an exchange made in two steps left its intent `intent` in `newFolder`: its items are not where they
/// belong until `rollBackExchange` has run.
package func isExchangePending(_ newFolder: CInt, intent: FileName) throws(Errno) -> Bool {
    try fileStatusIfPresent(in: newFolder, intent) != nil
}

/// Undoes an exchange made in two steps that the intent `intent` in `newFolder` names, from wherever it was cut
/// off: the new item goes back to its name in `newFolder`, the old one to its name in `oldFolder`, then the intent
/// is removed. A no-op without an intent. Half-done moves (both names on one inode after a `link`, an empty folder
/// after a `mkdir`) are settled first. When another item took the old name meanwhile, the old item takes the first
/// free name beside it by `naming`; without `naming` (or for the new name) the rollback throws, keeping the intent.
package func rollBackExchange(_ newFolder: CInt, _ oldFolder: CInt, intent: FileName, naming: ClashNaming? = nil)
    throws(Errno)
{
    guard let record = try ExchangeIntent.read(in: newFolder, intent) else { return }
    let aside = ExchangeIntent.asideName(intent)
    guard let record else {
        // Cut off while being written, so before any move: nothing to undo.
        guard try fileStatusIfPresent(in: newFolder, aside) == nil else { throw .ioError }
        try system_unlinkat(newFolder, intent)
        return
    }
    let places = [(newFolder, record.new), (oldFolder, record.old), (newFolder, aside)]
    var found = try places.map { place throws(Errno) in try fileStatusIfPresent(in: place.0, place.1) }
    let folders = found.contains { $0?.kind == .directory && [record.newID, record.oldID].contains($0?.fileID) }
    // A half-done move: the same item under two names keeps the one nearer the rollback's end, and an empty
    // folder that a `mkdir` made (where the items are folders) goes.
    for (index, status) in found.enumerated() {
        guard let status else { continue }
        let id = status.fileID
        let wanted = id == record.newID ? 0 : id == record.oldID ? 1 : nil
        if let wanted {
            let keep = found[wanted]?.fileID == id ? wanted : (found[2]?.fileID == id ? 2 : index)
            if keep != index {
                try system_unlinkat(places[index].0, places[index].1)
                found[index] = nil
            }
        } else if folders, status.kind == .directory, index != 1 || found[2]?.fileID == record.oldID {
            try system_unlinkat(places[index].0, places[index].1, removeDirectory: true)
            found[index] = nil
        }
    }
    let newAt = found.firstIndex { $0?.fileID == record.newID }
    let oldAt = found.firstIndex { $0?.fileID == record.oldID }
    func move(_ from: Int, _ to: Int) throws(Errno) {
        try renameNoReplace(places[from].0, places[from].1, places[to].0, places[to].1)
    }
    if newAt == 1, oldAt == 0 {  // exchanged, cut off before the intent went: exchanged back through the aside
        try move(0, 2)
    }
    if newAt == 1, oldAt == 0 || oldAt == 2 {
        try move(1, 0)
    }
    if oldAt == 2 || newAt == 1 && oldAt == 0 {
        do {
            try move(2, 1)
        } catch .fileExists where naming != nil {
            _ = try naming?.firstFree(for: record.old) { candidate throws(Errno) in
                try renameNoReplace(newFolder, aside, oldFolder, candidate)
            }
        }
    }
    try system_fsync(oldFolder)
    try system_unlinkat(newFolder, intent)
    try system_fsync(newFolder)
}

/// The record an exchange made in two steps writes first.
struct ExchangeIntent {
    let new: FileName
    let old: FileName
    let newID: FileID
    let oldID: FileID

    static func asideName(_ intent: FileName) -> FileName {
        FileName(bytes: intent.bytes + Array(".aside".utf8)) ?? intent
    }

    /// "new NUL old NUL device inode NUL device inode NUL", synced with its folder.
    func write(in folder: CInt, as name: FileName) throws(Errno) {
        let ids = [newID, oldID].map { "\($0.device) \($0.inode)" }
        let fields: [[UInt8]] = [Array(new.bytes), Array(old.bytes), Array(ids[0].utf8), Array(ids[1].utf8)]
        let bytes: [UInt8] = Array(fields.joined(separator: [0])) + [0]
        let file = try FileDescriptor(at: folder, name, [.writeOnly, .create, .truncate, .noFollow], mode: 0o600)
        try file.writeAll(bytes)
        try file.sync()
        try file.close()
        try system_fsync(folder)
    }

    /// The intent `name` in `folder`: nil when there is none, `.some(nil)` when it is cut short.
    static func read(in folder: CInt, _ name: FileName) throws(Errno) -> ExchangeIntent?? {
        let bytes: [UInt8]
        do {
            bytes = try FileDescriptor(at: folder, name, [.readOnly, .noFollow, .nonBlocking]).readToEnd(limit: 4096)
        } catch .noSuchFile {
            return nil
        }
        let fields = bytes.split(separator: 0, omittingEmptySubsequences: false)
        guard fields.count == 5, fields[4].isEmpty, let new = FileName(bytes: fields[0]),
            let old = FileName(bytes: fields[1]), let newID = fileID(fields[2]), let oldID = fileID(fields[3])
        else { return .some(nil) }
        return ExchangeIntent(new: new, old: old, newID: newID, oldID: oldID)
    }

    private static func fileID(_ field: ArraySlice<UInt8>) -> FileID? {
        let parts = field.split(separator: 0x20)
        guard parts.count == 2, let device = UInt64(String(decoding: parts[0], as: UTF8.self)),
            let inode = UInt64(String(decoding: parts[1], as: UTF8.self))
        else { return nil }
        return FileID(device: device, inode: inode)
    }
}
