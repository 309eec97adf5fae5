#ifndef INBOX_CNETTLE_SHIM_H
#define INBOX_CNETTLE_SHIM_H

// SHA-256 through Nettle, whose Debian build picks its SHA-NI code at run time: about as fast as libcrypto's
// (1.4 against 1.6 GB/s here), and about 1.5 MiB less resident once loaded (libcrypto's relocations and size).
// ARCHITECTURE.md, "Start-up and memory".
#include <nettle/sha2.h>

// The type of each function SHA256Digest calls, from its prototype: LazyLibrary resolves them by name
// (libnettle is opened on first use, not linked).
typedef __typeof__(nettle_sha256_init) *inbox_sha256_init;
typedef __typeof__(nettle_sha256_update) *inbox_sha256_update;
typedef __typeof__(nettle_sha256_digest) *inbox_sha256_digest;

#endif
