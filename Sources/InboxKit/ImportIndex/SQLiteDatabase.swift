import AppContainer
import CSQLite

/// One SQLite database, opened for one thread at a time (ARCHITECTURE.md, "Mail import"): statements prepared
/// on demand, every failure a `ContainerError` whose exit status follows its cause (a full disk 74, busy 75,
/// a damaged file 65).
final class SQLiteDatabase {
    private let sqlite: SQLiteFunctions
    private let handle: OpaquePointer
    let path: String
    /// Statements prepared once and used again, by their SQL: parsing SQL for every message cost a tenth of
    /// an import's time.
    private var prepared: [String: OpaquePointer] = [:]
    /// Whether commits are synced now (`synchronous=FULL`), once a transaction has set it.
    private var synchronousFull: Bool?

    /// Opens the database at `path` (creating it with `create`), never through a symbolic link, and waits up to
    /// `busyTimeout` milliseconds for another process's lock.
    init(path exact: some CStringConvertible, create: Bool = false, busyTimeout: CInt = 60_000) throws(ContainerError) {
        let exact = exact.pathBytes
        path = String(decoding: exact, as: UTF8.self)
        sqlite = try SQLiteFunctions.loaded.get()
        var opened: OpaquePointer?
        let flags =
            SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_FULLMUTEX
        // The exact bytes: SQLite hands a file name to open(2) as it is (ARCHITECTURE.md, "Paths are bytes").
        let open = sqlite.open
        let result = exact.withCPath { open($0, &opened, flags, nil) }
        guard let opened else { throw ContainerError(.failure, "cannot open '\(path)': out of memory") }
        handle = opened
        guard result == SQLITE_OK else {
            let error = Self.error(result, handle, sqlite, doing: "open", path)
            _ = sqlite.close(opened)
            throw error
        }
        _ = sqlite.busyTimeout(handle, busyTimeout)
        _ = sqlite.extendedResultCodes(handle, 1)
    }

    deinit {
        for statement in prepared.values { _ = sqlite.finalize(statement) }
        _ = sqlite.close(handle)
    }

    /// Keeps the write-ahead log when the connection closes, neither checkpointed nor removed: a process that
    /// commits once and exits (`inbox import -` for each message an MTA hands over) then pays one sync for its
    /// commit, not three more for making the log again and checkpointing it at close. A commit that leaves more
    /// than `keptWriteAheadPages` pages in the log checkpoints it (SQLite's `wal_autocheckpoint`), so the next
    /// process's open, which reads the whole log to index it, reads at most that many: SQLite's own measure, 1,000
    /// pages, made every import read up to 4 MiB. Only for a database whose name stays where it is (a rebuilt
    /// index is checkpointed before it is renamed into place: ARCHITECTURE.md, "Mail import").
    func keepWriteAheadLogOnClose() throws(ContainerError) {
        var on: CInt = 1
        var result = sqlite.fileControl(handle, "main", SQLITE_FCNTL_PERSIST_WAL, &on)
        if result == SQLITE_OK {
            result = inbox_sqlite_db_config_flag(sqlite.dbConfig, handle, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
        }
        guard result == SQLITE_OK else { throw Self.error(result, handle, sqlite, doing: "set up", path) }
        try execute("PRAGMA wal_autocheckpoint=\(Self.keptWriteAheadPages)")
    }

    /// The most pages a kept write-ahead log holds after a commit (about 2 per message imported alone): a
    /// checkpoint, with its sync of the database, every 30 or so such imports.
    static let keptWriteAheadPages = 64

    /// Runs SQL that returns no rows (several statements allowed).
    func execute(_ sql: String) throws(ContainerError) {
        let result = sqlite.exec(handle, sql, nil, nil, nil)
        guard result == SQLITE_OK else { throw Self.error(result, handle, sqlite, doing: "write", path) }
    }

    /// Runs `body` in a transaction that takes the write lock at once, committed when it returns and rolled
    /// back when it throws. Not `durable`, the commit is not synced (WAL, `synchronous=NORMAL`): the next durable
    /// commit syncs it with its own.
    func transaction<R>(durable: Bool = true, _ body: () throws(ContainerError) -> R) throws(ContainerError) -> R {
        if synchronousFull != durable {
            try run(durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
            synchronousFull = durable
        }
        try run("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try run("COMMIT")
            return value
        } catch {
            _ = sqlite.exec(handle, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    /// Runs one statement that returns no rows, prepared once (`query`): a transaction's own statements run for
    /// every batch, not parsed again each time.
    private func run(_ sql: String) throws(ContainerError) {
        try query(sql, doing: "write")
    }

    /// Prepares `sql`, binds `values` to its parameters in order, and calls `row` for each result row; a failure
    /// names what it was `doing`.
    func query(
        _ sql: String, _ values: [SQLiteValue] = [], doing: String = "read",
        row: (SQLiteRow) throws(ContainerError) -> Void = { _ in }
    ) throws(ContainerError) {
        let statement = try statement(sql, doing: doing)
        defer {
            _ = sqlite.reset(statement)
            _ = sqlite.clearBindings(statement)
        }
        var result: CInt
        for (index, value) in values.enumerated() {
            let position = CInt(index + 1)
            switch value {
            case .integer(let number): result = sqlite.bindInt64(statement, position, number)
            case .text(let text): result = sqlite.bindText(statement, position, text, -1, inbox_sqlite_transient())
            case .blob(let bytes):
                result = bytes.withUnsafeBytes { raw in
                    sqlite.bindBlob(statement, position, raw.baseAddress, CInt(raw.count), inbox_sqlite_transient())
                }
            case .null: result = sqlite.bindNull(statement, position)
            }
            guard result == SQLITE_OK else { throw Self.error(result, handle, sqlite, doing: doing, path) }
        }
        while true {
            result = sqlite.step(statement)
            if result == SQLITE_DONE { return }
            guard result == SQLITE_ROW else { throw Self.error(result, handle, sqlite, doing: doing, path) }
            try row(SQLiteRow(sqlite: sqlite, statement: statement))
        }
    }

    /// The statement for `sql`, prepared on its first use.
    private func statement(_ sql: String, doing: String) throws(ContainerError) -> OpaquePointer {
        if let statement = prepared[sql] { return statement }
        var made: OpaquePointer?
        let result = sqlite.prepare(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &made, nil)
        guard result == SQLITE_OK, let statement = made else {
            throw Self.error(result, handle, sqlite, doing: doing, path)
        }
        prepared[sql] = statement
        return statement
    }

    /// The error of a failed call, its exit status by its primary result code.
    private static func error(
        _ result: CInt, _ handle: OpaquePointer?, _ sqlite: SQLiteFunctions, doing: String, _ path: String
    )
        -> ContainerError
    {
        let message = handle.flatMap { sqlite.errmsg($0) }.map { String(cString: $0) } ?? "error \(result)"
        let code: ContainerError.Code
        switch result & 0xFF {
        case SQLITE_FULL, SQLITE_IOERR: code = .ioError
        case SQLITE_BUSY, SQLITE_LOCKED: code = .busy
        case SQLITE_CORRUPT, SQLITE_NOTADB: code = .badData
        case SQLITE_READONLY: code = .cannotCreate
        case SQLITE_PERM, SQLITE_AUTH: code = .refused
        case SQLITE_CANTOPEN: code = .ioError
        default: code = .failure
        }
        return ContainerError(code, "cannot \(doing) the import index '\(path)': \(message)")
    }
}

/// A value bound to a statement's parameter.
enum SQLiteValue {
    case integer(Int64)
    case text(String)
    case blob([UInt8])
    case null
}

/// The current row of a statement, valid only inside the `row` callback.
struct SQLiteRow {
    let sqlite: SQLiteFunctions
    let statement: OpaquePointer

    func integer(_ column: CInt) -> Int64 { sqlite.columnInt64(statement, column) }

    func blob(_ column: CInt) -> [UInt8] {
        // The pointer first, then its length, as SQLite asks.
        let bytes = sqlite.columnBlob(statement, column)
        let count = Int(sqlite.columnBytes(statement, column))
        guard count > 0, let bytes else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func isNull(_ column: CInt) -> Bool { sqlite.columnType(statement, column) == SQLITE_NULL }
}

/// libsqlite3's functions, typed by their prototypes (`shim.h`), resolved when the first database is opened: the
/// commands that open none never load libsqlite3 (ARCHITECTURE.md, "Start-up and memory").
struct SQLiteFunctions {
    let open: inbox_sqlite3_open_v2
    let close: inbox_sqlite3_close_v2
    let busyTimeout: inbox_sqlite3_busy_timeout
    let extendedResultCodes: inbox_sqlite3_extended_result_codes
    let finalize: inbox_sqlite3_finalize
    let exec: inbox_sqlite3_exec
    let reset: inbox_sqlite3_reset
    let clearBindings: inbox_sqlite3_clear_bindings
    let bindInt64: inbox_sqlite3_bind_int64
    let bindText: inbox_sqlite3_bind_text
    let bindBlob: inbox_sqlite3_bind_blob
    let bindNull: inbox_sqlite3_bind_null
    let step: inbox_sqlite3_step
    let prepare: inbox_sqlite3_prepare_v3
    let errmsg: inbox_sqlite3_errmsg
    let columnInt64: inbox_sqlite3_column_int64
    let columnBlob: inbox_sqlite3_column_blob
    let columnBytes: inbox_sqlite3_column_bytes
    let columnType: inbox_sqlite3_column_type
    let fileControl: inbox_sqlite3_file_control
    /// `sqlite3_db_config`, variadic: called through `inbox_sqlite_db_config_flag`.
    let dbConfig: inbox_sqlite3_db_config

    static let loaded = Result { () throws(ContainerError) in
        let library = try LazyLibrary("libsqlite3.so.0")
        return SQLiteFunctions(
            open: try library.function("sqlite3_open_v2", as: inbox_sqlite3_open_v2.self),
            close: try library.function("sqlite3_close_v2", as: inbox_sqlite3_close_v2.self),
            busyTimeout: try library.function("sqlite3_busy_timeout", as: inbox_sqlite3_busy_timeout.self),
            extendedResultCodes: try library.function(
                "sqlite3_extended_result_codes", as: inbox_sqlite3_extended_result_codes.self),
            finalize: try library.function("sqlite3_finalize", as: inbox_sqlite3_finalize.self),
            exec: try library.function("sqlite3_exec", as: inbox_sqlite3_exec.self),
            reset: try library.function("sqlite3_reset", as: inbox_sqlite3_reset.self),
            clearBindings: try library.function("sqlite3_clear_bindings", as: inbox_sqlite3_clear_bindings.self),
            bindInt64: try library.function("sqlite3_bind_int64", as: inbox_sqlite3_bind_int64.self),
            bindText: try library.function("sqlite3_bind_text", as: inbox_sqlite3_bind_text.self),
            bindBlob: try library.function("sqlite3_bind_blob", as: inbox_sqlite3_bind_blob.self),
            bindNull: try library.function("sqlite3_bind_null", as: inbox_sqlite3_bind_null.self),
            step: try library.function("sqlite3_step", as: inbox_sqlite3_step.self),
            prepare: try library.function("sqlite3_prepare_v3", as: inbox_sqlite3_prepare_v3.self),
            errmsg: try library.function("sqlite3_errmsg", as: inbox_sqlite3_errmsg.self),
            columnInt64: try library.function("sqlite3_column_int64", as: inbox_sqlite3_column_int64.self),
            columnBlob: try library.function("sqlite3_column_blob", as: inbox_sqlite3_column_blob.self),
            columnBytes: try library.function("sqlite3_column_bytes", as: inbox_sqlite3_column_bytes.self),
            columnType: try library.function("sqlite3_column_type", as: inbox_sqlite3_column_type.self),
            fileControl: try library.function("sqlite3_file_control", as: inbox_sqlite3_file_control.self),
            dbConfig: try library.function("sqlite3_db_config", as: inbox_sqlite3_db_config.self))
    }
}
