#ifndef INBOX_CYTNEF_SHIM_H
#define INBOX_CYTNEF_SHIM_H

#include <stdio.h>
#include <ytnef.h>

// Swift cannot import MAPI_UNDEFINED (a cast) nor PROP_TAG (a function-like macro).

/// A MAPI property of an attachment, or NULL when it has none (libytnef answers MAPI_UNDEFINED).
static inline variableLength *inbox_tnef_property(MAPIProps *props, unsigned int type, unsigned int id) {
    variableLength *found = MAPIFindProperty(props, PROP_TAG(type, id));
    return found == MAPI_UNDEFINED ? NULL : found;
}

#endif
