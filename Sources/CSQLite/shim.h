#ifndef INBOX_CSQLITE_SHIM_H
#define INBOX_CSQLITE_SHIM_H

#include <sqlite3.h>

/// SQLITE_TRANSIENT, a cast Swift cannot import: SQLite copies the bound bytes at once.
static inline sqlite3_destructor_type inbox_sqlite_transient(void) { return SQLITE_TRANSIENT; }

#endif
