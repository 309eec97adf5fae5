#ifndef INBOX_CCRYPTO_SHIM_H
#define INBOX_CCRYPTO_SHIM_H

// SHA-256 through the low-level functions (SHA256_Init, _Update, _Final), which OpenSSL 3 marks deprecated but
// still ships: they run the same assembly as the EVP interface without loading the default provider and the
// configuration, which EVP_MD_fetch does (about 1.6 MiB of RSS and 1.5 ms for every process that hashes).
// ARCHITECTURE.md, "Start-up and memory".
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>

// The type of each function SHA256Digest calls, from its prototype: LazyLibrary resolves them by name
// (libcrypto is opened on first use, not linked).
typedef __typeof__(SHA256_Init) *inbox_SHA256_Init;
typedef __typeof__(SHA256_Update) *inbox_SHA256_Update;
typedef __typeof__(SHA256_Final) *inbox_SHA256_Final;

#endif
