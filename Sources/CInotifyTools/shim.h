#ifndef INBOX_CINOTIFYTOOLS_SHIM_H
#define INBOX_CINOTIFYTOOLS_SHIM_H

#include <inotifytools/inotify.h>
#include <inotifytools/inotifytools.h>

/// The flexible `name` member of `struct inotify_event`, which Swift cannot import.
static inline const char *inbox_inotify_event_name(const struct inotify_event *event) {
    return event->len > 0 ? event->name : "";
}

#endif
