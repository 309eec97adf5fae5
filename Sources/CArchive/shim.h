#ifndef INBOX_CARCHIVE_SHIM_H
#define INBOX_CARCHIVE_SHIM_H

#include <archive.h>
#include <archive_entry.h>

#endif
