import AppContainer
import Glibc

/// Opening the import index (ARCHITECTURE.md, "Mail import", "The index is a cache of the log"). A sound index is
/// opened at once. Otherwise, under `import.lock`: an index of ours of an earlier schema is brought up to date; a
/// damaged (not a database, truncated, corrupt), foreign (a database whose schema is not ours) or unreadable (not a
/// regular file, its open refused) one is set aside as `import.sqlite.damaged-<time>` with its `-wal` and `-shm`,
/// logged `error`, and rebuilt from the event log (`ImportIndex+Rebuild.swift`); a missing one is built from the
/// log. A failure that is not damage (a full disk, an I/O error, a busy database) is thrown, nothing set aside.
extension ImportIndex {
    /// Runs its body under `import.lock` (or, for a restore's staging, which nothing else touches, as it is).
    typealias Locking = (() throws(ContainerError) -> Void) throws(ContainerError) -> Void

    /// `inbx`: the `application_id` that says a database is an import index.
    static let applicationID: Int64 = 0x696E_6278
    /// 1: `messages.source`; 2: `parts.not_expanded`. An index of before 1 has neither, and no stamp.
    static let schemaVersion: Int64 = 2
    static let schema = """
        CREATE TABLE messages(
            key BLOB PRIMARY KEY, message_id TEXT, attachments INTEGER NOT NULL, complete INTEGER NOT NULL,
            source TEXT
        ) WITHOUT ROWID;
        CREATE TABLE parts(
            key BLOB NOT NULL, ordinal INTEGER NOT NULL, delivered INTEGER NOT NULL,
            staging BLOB, device INTEGER, inode INTEGER, name BLOB, not_expanded TEXT,
            PRIMARY KEY(key, ordinal)
        ) WITHOUT ROWID;
        PRAGMA application_id = \(applicationID);
        PRAGMA user_version = \(schemaVersion);
        """
    static let messagesColumns = ["key", "message_id", "attachments", "complete", "source"]
    static let partsColumns = ["key", "ordinal", "delivered", "staging", "device", "inode", "name", "not_expanded"]
    /// `upgrades[v]` brings an index of version `v` to the next.
    private static let upgrades = [
        "ALTER TABLE messages ADD COLUMN source TEXT;", "ALTER TABLE parts ADD COLUMN not_expanded TEXT;",
    ]

    /// What the index file of a state folder is.
    private enum Health {
        case sound(SQLiteDatabase)
        case missing
        /// Ours, of an earlier schema version (0: from before the stamp).
        case earlier(SQLiteDatabase, version: Int64)
        case damaged(reason: String)
    }

    /// The sound index of the state folder `directory`, rebuilt first when it is not (see above).
    static func openDatabase(inStateFolder directory: [UInt8], lockWait: LockWait, underLock: Locking)
        throws(ContainerError) -> SQLiteDatabase
    {
        if case .sound(let database) = try health(directory, lockWait) { return database }
        var opened: SQLiteDatabase?
        try underLock { () throws(ContainerError) in opened = try openHoldingLock(directory, lockWait: lockWait) }
        guard let opened else {
            throw ContainerError(.failure, "cannot open the import index in '\(shown(directory))'")
        }
        return opened
    }

    /// As `openDatabase`, for a caller that holds `import.lock`.
    static func openHoldingLock(_ directory: [UInt8], lockWait: LockWait) throws(ContainerError) -> SQLiteDatabase {
        switch try health(directory, lockWait) {
        case .sound(let database):
            return database
        case .earlier(let database, let version):
            try database.transaction { () throws(ContainerError) in
                for upgrade in upgrades[Int(version)...] { try database.execute(upgrade) }
                try database.execute(
                    """
                    PRAGMA application_id = \(applicationID);
                    PRAGMA user_version = \(schemaVersion);
                    """)
            }
            return database
        case .missing:
            try rebuild(inStateFolder: directory, settingAside: nil, lockWait: lockWait)
        case .damaged(let reason):
            try rebuild(inStateFolder: directory, settingAside: reason, lockWait: lockWait)
        }
        switch try health(directory, lockWait) {
        case .sound(let database):
            return database
        case .damaged(let reason):
            throw ContainerError(
                .failure, "cannot rebuild the import index '\(shown(directory))/\(fileName)': \(reason)")
        case .missing, .earlier:
            throw ContainerError(.failure, "cannot rebuild the import index '\(shown(directory))/\(fileName)'")
        }
    }

    /// A path as text, for messages.
    static func shown(_ path: [UInt8]) -> String { String(decoding: path, as: UTF8.self) }

    /// Looks at the index file: missing, damaged, or open (and set to WAL, `synchronous=FULL`) when it is ours.
    private static func health(_ directory: [UInt8], _ lockWait: LockWait) throws(ContainerError) -> Health {
        let path = directory + Array("/\(fileName)".utf8)
        let status: FileStatus?
        do {
            status = try fileStatusIfPresent(in: currentDirectory, path)
        } catch {
            throw error.failure("read", path)
        }
        guard let status else { return .missing }
        guard status.kind == .regular else { return .damaged(reason: "it is not a regular file") }
        let journal: JournalMode
        do {
            // SQLite's own open failure does not say why: ours does. Only a refusal is damage.
            let file = try FileDescriptor(path, [.readWrite, .noFollow, .nonBlocking])
            journal = try JournalMode(for: file)
        } catch  where error == .permissionDenied || error == .notPermitted {
            return .damaged(reason: "it cannot be opened: \(error)")
        } catch {
            throw error.failure("open the import index", path)
        }
        do {
            let database = try SQLiteDatabase(path: path, busyTimeout: busyTimeout(lockWait))
            let health = try schemaHealth(database)
            if case .damaged = health { return health }
            try database.execute("PRAGMA journal_mode=\(journal.rawValue); PRAGMA synchronous=FULL;")
            if journal == .writeAhead { try database.keepWriteAheadLogOnClose() }
            return health
        } catch {
            // SQLITE_CORRUPT and SQLITE_NOTADB, and only they, are `badData`.
            guard error.code == .badData else { throw error }
            return .damaged(reason: error.message)
        }
    }

    /// How the index keeps its journal: a write-ahead log, except on a network or FUSE filesystem, where SQLite's
    /// WAL does not work (its shared memory is of one host) and a rollback journal is kept instead (ARCHITECTURE.md,
    /// "Network and FUSE filesystems").
    enum JournalMode: String {
        case writeAhead = "WAL"
        case rollback = "DELETE"

        /// The mode for a database held by the filesystem of the open `file` (the index, or its folder).
        init(for file: borrowing FileDescriptor) throws(Errno) {
            self = try Filesystem(of: file).pollReason == nil ? .writeAhead : .rollback
        }
    }

    /// Whether the database's stamp, tables and columns are the import index's.
    private static func schemaHealth(_ database: SQLiteDatabase) throws(ContainerError) -> Health {
        func texts(_ sql: String, _ values: [SQLiteValue] = []) throws(ContainerError) -> [String] {
            var texts: [String] = []
            try database.query(sql, values) { row in texts.append(String(decoding: row.blob(0), as: UTF8.self)) }
            return texts
        }
        func integer(_ sql: String) throws(ContainerError) -> Int64 {
            var value: Int64 = 0
            try database.query(sql) { row in value = row.integer(0) }
            return value
        }
        let application = try integer("PRAGMA application_id")
        let version = try integer("PRAGMA user_version")
        let tables = try texts("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        let messages = try texts("SELECT name FROM pragma_table_info(?)", [.text("messages")])
        let parts = try texts("SELECT name FROM pragma_table_info(?)", [.text("parts")])
        // The columns of each version: each added its column last.
        let columnsOf: [Int64: (messages: [String], parts: [String])] = [
            0: (Array(messagesColumns.dropLast()), Array(partsColumns.dropLast())),
            1: (messagesColumns, Array(partsColumns.dropLast())),
            schemaVersion: (messagesColumns, partsColumns),
        ]
        // Only the header and the schema are read: damage deeper in is found where a lookup or a commit meets it
        // (`ImportIndex.recovering`), not by reading every page at every open, O(history).
        if tables == ["messages", "parts"], application == (version == 0 ? 0 : applicationID),
            let columns = columnsOf[version], messages == columns.messages, parts == columns.parts
        {
            return version == schemaVersion ? .sound(database) : .earlier(database, version: version)
        }
        let held = tables.isEmpty ? "no tables" : "tables " + tables.joined(separator: ", ")
        return .damaged(
            reason: "it is not an import index (application_id \(application), user_version \(version), \(held))")
    }
}
