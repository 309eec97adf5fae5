#ifndef INBOX_CGMIME_SHIM_H
#define INBOX_CGMIME_SHIM_H

#include <gmime/gmime.h>

// Swift cannot import GMime's function-like macros (type checks and casts): these wrap the ones InboxKit uses.

static inline gboolean inbox_gmime_is_multipart(GMimeObject *object) { return GMIME_IS_MULTIPART(object); }
static inline gboolean inbox_gmime_is_message_part(GMimeObject *object) { return GMIME_IS_MESSAGE_PART(object); }
static inline gboolean inbox_gmime_is_part(GMimeObject *object) { return GMIME_IS_PART(object); }

static inline GMimeMultipart *inbox_gmime_as_multipart(GMimeObject *object) { return GMIME_MULTIPART(object); }
static inline GMimeMessagePart *inbox_gmime_as_message_part(GMimeObject *object) {
    return GMIME_MESSAGE_PART(object);
}
static inline GMimePart *inbox_gmime_as_part(GMimeObject *object) { return GMIME_PART(object); }
static inline GMimeObject *inbox_gmime_message_as_object(GMimeMessage *message) { return GMIME_OBJECT(message); }

/// A file stream that leaves its descriptor open when it goes (the caller owns it).
static inline void inbox_gmime_stream_fs_disown(GMimeStream *stream) {
    g_mime_stream_fs_set_owner(GMIME_STREAM_FS(stream), FALSE);
}

/// The byte range of the file behind `stream`, when it is a file stream (a persisted part's content):
/// `end` is -1 when the range runs to the end of the file.
static inline gboolean inbox_gmime_file_range(GMimeStream *stream, gint64 *start, gint64 *end) {
    if (stream == NULL || !GMIME_IS_STREAM_FS(stream)) return FALSE;
    *start = stream->bound_start;
    *end = stream->bound_end;
    return TRUE;
}

#endif
