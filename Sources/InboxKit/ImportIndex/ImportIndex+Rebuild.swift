import AppContainer
import Glibc

/// Rebuilding the import index from the event log (ARCHITECTURE.md, "The index is a cache of the log"): a message
/// with an `imported` record (a duplicate's too) is complete; each `delivered` or `recovered` record carrying
/// `message_sha256` marks its `ordinal` delivered. The new index is built under a temporary name and renamed into
/// place, so no one ever opens a half-built one.
extension ImportIndex {
    /// Under `import.lock`: sets the index aside when `reason` says why (or when its WAL was left without it), logs
    /// it (`during` what the damage was found; the log's lock waited for as `lockWait` says), and builds a new one
    /// from the log of the state folder `directory`.
    static func rebuild(
        inStateFolder directory: [UInt8], settingAside reason: String?, during: String = "open the import index",
        lockWait: LockWait
    ) throws(ContainerError) {
        let shown = Self.shown(directory) + "/" + fileName
        let folder: FileDescriptor
        do {
            folder = try FileDescriptor(folder: directory)
        } catch {
            throw error.failure("open", directory)
        }
        let log = try EventLog(directory: directory, lockWait: lockWait)
        var orphans = false
        do throws(Errno) {
            for suffix in ["-wal", "-shm"] where try present(fileName + suffix, in: folder.rawValue) { orphans = true }
        } catch {
            throw error.failure("read", shown)
        }
        if let reason = reason ?? (orphans ? "its write-ahead log was left without it" : nil) {
            try setAside(because: reason, during: during, in: folder.rawValue, shown: shown, log: log)
        }
        let building = fileName + ".rebuilding"
        do {
            // Left by a rebuild a crash cut short.
            for suffix in ["", "-wal", "-shm", "-journal"] where try present(building + suffix, in: folder.rawValue) {
                try system_unlinkat(folder.rawValue, building + suffix)
            }
        } catch {
            throw error.failure("rebuild the import index", shown)
        }
        let journal: JournalMode
        do {
            journal = try JournalMode(for: folder)
        } catch {
            throw error.failure("read", directory)
        }
        try build(directory + Array("/\(building)".utf8), from: log, journal: journal)
        do {
            let file = try FileDescriptor(at: folder.rawValue, building, [.readOnly, .noFollow])
            try system_fsync(file.rawValue)
            try renameNoReplace(folder.rawValue, building, folder.rawValue, fileName)
            try system_fsync(folder.rawValue)
        } catch {
            throw error.failure("rebuild the import index", shown)
        }
    }

    /// Renames the index and its `-wal` and `-shm` aside (`import.sqlite.damaged-<time>`) and logs `error`.
    private static func setAside(because reason: String, during: String, in folder: CInt, shown: String, log: EventLog)
        throws(ContainerError)
    {
        let aside: String
        do throws(Errno) {
            let name = FileName(fileName).unsafelyUnwrapped
            let companions = ["-wal", "-shm"]
            aside = try AppContainer.setAside(name, in: folder, suffix: damagedSuffix(), companions: companions).string
        } catch {
            throw error.failure("set aside the damaged import index", shown)
        }
        try log.append(
            Event(
                .error,
                [
                    "during": .string(during),
                    "path": .string(Container.stateRelativePath + "/" + aside),
                    "message": .string(
                        "the import index was set aside as '\(aside)' and rebuilt from the event log: \(reason)"),
                ]), durable: true)
    }

    private static func present(_ name: String, in folder: CInt) throws(Errno) -> Bool {
        try fileStatusIfPresent(in: folder, name) != nil
    }

    /// Builds a new index at `path` from the import records of `log`, in one transaction, left in `journal` mode.
    private static func build(_ path: [UInt8], from log: EventLog, journal: JournalMode) throws(ContainerError) {
        let database = try SQLiteDatabase(path: path, create: true)
        try database.execute(schema)
        let index = ImportIndex(building: database)
        try database.transaction { () throws(ContainerError) in
            var failure: ContainerError?
            try log.forEachRecord(kinds: [.imported, .delivered, .recovered]) { record in
                do throws(ContainerError) {
                    try index.add(record)
                } catch {
                    failure = error
                    return false
                }
                return true
            }
            if let failure { throw failure }
        }
        try database.execute("PRAGMA journal_mode=\(journal.rawValue)")
    }

    /// Adds what one record says of an imported message.
    private func add(_ record: EventRecord) throws(ContainerError) {
        guard let hex = record.fields["message_sha256"], let key = Self.key(hex: hex) else { return }
        if record.kind == .imported {
            try database.query(
                """
                INSERT INTO messages(key, message_id, attachments, complete, source)
                VALUES (?1, ?2, max(?3, (SELECT count(*) FROM parts WHERE key = ?1)), 1, ?4)
                ON CONFLICT(key) DO NOTHING
                """,
                [
                    .blob(key), record.fields["message_id"].map { .text($0) } ?? .null,
                    .integer(record.fields["attachments"].flatMap { Int64($0) } ?? 0),
                    record.fields["source"].map { .text($0) } ?? .null,
                ])
            // A complete message needs no part rows (see `settle`).
            try database.query("DELETE FROM parts WHERE key = ?", [.blob(key)])
            return
        }
        guard try !isComplete(key) else { return }
        var ordinal = record.fields["ordinal"].flatMap { Int64($0) }
        if ordinal == nil {
            // A record from before they carried the ordinal: placement delivers a message's missing attachments
            // in order and stops at the first failure, so its records name its first attachments, in order.
            try database.query("SELECT COALESCE(MAX(ordinal) + 1, 0) FROM parts WHERE key = ?", [.blob(key)]) { row in
                ordinal = row.integer(0)
            }
        }
        let name = record.pathBytes("path").map { Array($0.split(separator: 0x2F).last ?? []) }
        try database.query(
            "INSERT OR REPLACE INTO parts(key, ordinal, delivered, name) VALUES (?, ?, 1, ?)",
            [.blob(key), .integer(ordinal ?? 0), name.map { .blob($0) } ?? .null])
    }

    /// The bytes of 64 hex digits; nil for anything else.
    static func key(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count == 64 else { return nil }
        var key: [UInt8] = []
        key.reserveCapacity(32)
        for pair in stride(from: 0, to: 64, by: 2) {
            guard let high = hexValue(digits[pair]), let low = hexValue(digits[pair + 1]) else { return nil }
            key.append(high << 4 | low)
        }
        return key
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
