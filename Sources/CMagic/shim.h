#ifndef INBOX_CMAGIC_SHIM_H
#define INBOX_CMAGIC_SHIM_H

#include <magic.h>

// The type of each function ContentInspector calls, from its prototype: LazyLibrary resolves them by name
// (libmagic is opened on first use, not linked).
typedef __typeof__(magic_open) *inbox_magic_open;
typedef __typeof__(magic_load) *inbox_magic_load;
typedef __typeof__(magic_close) *inbox_magic_close;
typedef __typeof__(magic_error) *inbox_magic_error;
typedef __typeof__(magic_buffer) *inbox_magic_buffer;
typedef __typeof__(magic_getpath) *inbox_magic_getpath;

#endif
