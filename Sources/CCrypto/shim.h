#ifndef INBOX_CCRYPTO_SHIM_H
#define INBOX_CCRYPTO_SHIM_H

#include <openssl/evp.h>

#endif
