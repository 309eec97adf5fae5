#ifndef INBOX_CMAGIC_SHIM_H
#define INBOX_CMAGIC_SHIM_H

#include <magic.h>

#endif
