#ifndef INBOX_CSQLITE_SHIM_H
#define INBOX_CSQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT, a cast Swift cannot import: SQLite copies the bound bytes at once.
static inline sqlite3_destructor_type inbox_sqlite_transient(void) { return SQLITE_TRANSIENT; }

// The type of each function SQLiteDatabase calls, from its prototype: LazyLibrary resolves them by name
// (libsqlite3 is opened when the first database is, not linked).
typedef __typeof__(sqlite3_open_v2) *inbox_sqlite3_open_v2;
typedef __typeof__(sqlite3_close_v2) *inbox_sqlite3_close_v2;
typedef __typeof__(sqlite3_busy_timeout) *inbox_sqlite3_busy_timeout;
typedef __typeof__(sqlite3_extended_result_codes) *inbox_sqlite3_extended_result_codes;
typedef __typeof__(sqlite3_finalize) *inbox_sqlite3_finalize;
typedef __typeof__(sqlite3_exec) *inbox_sqlite3_exec;
typedef __typeof__(sqlite3_reset) *inbox_sqlite3_reset;
typedef __typeof__(sqlite3_clear_bindings) *inbox_sqlite3_clear_bindings;
typedef __typeof__(sqlite3_bind_int64) *inbox_sqlite3_bind_int64;
typedef __typeof__(sqlite3_bind_text) *inbox_sqlite3_bind_text;
typedef __typeof__(sqlite3_bind_blob) *inbox_sqlite3_bind_blob;
typedef __typeof__(sqlite3_bind_null) *inbox_sqlite3_bind_null;
typedef __typeof__(sqlite3_step) *inbox_sqlite3_step;
typedef __typeof__(sqlite3_prepare_v3) *inbox_sqlite3_prepare_v3;
typedef __typeof__(sqlite3_errmsg) *inbox_sqlite3_errmsg;
typedef __typeof__(sqlite3_column_int64) *inbox_sqlite3_column_int64;
typedef __typeof__(sqlite3_column_blob) *inbox_sqlite3_column_blob;
typedef __typeof__(sqlite3_column_bytes) *inbox_sqlite3_column_bytes;
typedef __typeof__(sqlite3_column_type) *inbox_sqlite3_column_type;
typedef __typeof__(sqlite3_file_control) *inbox_sqlite3_file_control;

/// `sqlite3_db_config`'s address, as a type Swift can hold: it is variadic, which Swift cannot call.
typedef void (*inbox_sqlite3_db_config)(void);

/// Sets an on/off option through `sqlite3_db_config`, called with its own (variadic) prototype.
static inline int inbox_sqlite_db_config_flag(inbox_sqlite3_db_config db_config, sqlite3 *db, int option, int on) {
    int (*set)(sqlite3 *, int, ...) = (int (*)(sqlite3 *, int, ...))db_config;
    return set(db, option, on, (int *)0);
}

#endif
