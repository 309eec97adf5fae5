import AppContainer
import CSQLite

/// One SQLite database, opened for one thread at a time (ARCHITECTURE.md, "Mail import"): statements prepared
/// on demand, every failure a `ContainerError` whose exit status follows its cause (a full disk 74, busy 75,
/// a damaged file 65).
final class SQLiteDatabase {
    private let handle: OpaquePointer
    let path: String
    /// Statements prepared once and used again, by their SQL: parsing SQL for every message cost a tenth of
    /// an import's time.
    private var prepared: [String: OpaquePointer] = [:]
    /// Whether commits are synced now (`synchronous=FULL`), once a transaction has set it.
    private var synchronousFull: Bool?

    /// Opens (creating) the database at `path`, never through a symbolic link, and waits up to `busyTimeout`
    /// milliseconds for another process's lock.
    init(path: String, busyTimeout: CInt = 60_000) throws(ContainerError) {
        self.path = path
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_FULLMUTEX
        let result = sqlite3_open_v2(path, &opened, flags, nil)
        guard let opened else { throw ContainerError(.failure, "cannot open '\(path)': out of memory") }
        handle = opened
        guard result == SQLITE_OK else {
            let error = Self.error(result, handle, doing: "open", path)
            sqlite3_close_v2(opened)
            throw error
        }
        sqlite3_busy_timeout(handle, busyTimeout)
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit {
        for statement in prepared.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs SQL that returns no rows (several statements allowed).
    func execute(_ sql: String) throws(ContainerError) {
        let result = sqlite3_exec(handle, sql, nil, nil, nil)
        guard result == SQLITE_OK else { throw Self.error(result, handle, doing: "write", path) }
    }

    /// Runs `body` in a transaction that takes the write lock at once, committed when it returns and rolled
    /// back when it throws. Not `durable`, the commit is not synced (WAL, `synchronous=NORMAL`): the next durable
    /// commit syncs it with its own.
    func transaction<R>(durable: Bool = true, _ body: () throws(ContainerError) -> R) throws(ContainerError) -> R {
        if synchronousFull != durable {
            try execute(durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL")
            synchronousFull = durable
        }
        try execute("BEGIN IMMEDIATE")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }

    /// Prepares `sql`, binds `values` to its parameters in order, and calls `row` for each result row.
    func query(_ sql: String, _ values: [SQLiteValue] = [], row: (SQLiteRow) throws(ContainerError) -> Void = { _ in })
        throws(ContainerError)
    {
        let statement = try statement(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var result: CInt
        for (index, value) in values.enumerated() {
            let position = CInt(index + 1)
            switch value {
            case .integer(let number): result = sqlite3_bind_int64(statement, position, number)
            case .text(let text): result = sqlite3_bind_text(statement, position, text, -1, inbox_sqlite_transient())
            case .blob(let bytes):
                result = bytes.withUnsafeBytes { raw in
                    sqlite3_bind_blob(statement, position, raw.baseAddress, CInt(raw.count), inbox_sqlite_transient())
                }
            case .null: result = sqlite3_bind_null(statement, position)
            }
            guard result == SQLITE_OK else { throw Self.error(result, handle, doing: "read", path) }
        }
        while true {
            result = sqlite3_step(statement)
            if result == SQLITE_DONE { return }
            guard result == SQLITE_ROW else { throw Self.error(result, handle, doing: "read", path) }
            try row(SQLiteRow(statement: statement))
        }
    }

    /// The statement for `sql`, prepared on its first use.
    private func statement(_ sql: String) throws(ContainerError) -> OpaquePointer {
        if let statement = prepared[sql] { return statement }
        var made: OpaquePointer?
        let result = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &made, nil)
        guard result == SQLITE_OK, let statement = made else {
            throw Self.error(result, handle, doing: "read", path)
        }
        prepared[sql] = statement
        return statement
    }

    /// The error of a failed call, its exit status by its primary result code.
    private static func error(_ result: CInt, _ handle: OpaquePointer?, doing: String, _ path: String)
        -> ContainerError
    {
        let message = handle.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) } ?? "error \(result)"
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
    let statement: OpaquePointer

    func integer(_ column: CInt) -> Int64 { sqlite3_column_int64(statement, column) }

    func blob(_ column: CInt) -> [UInt8] {
        // The pointer first, then its length, as SQLite asks.
        let bytes = sqlite3_column_blob(statement, column)
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let bytes else { return [] }
        return Array(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    func isNull(_ column: CInt) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
}
