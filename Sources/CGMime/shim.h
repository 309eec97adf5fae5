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

/// A message file without some byte ranges (multiparts' preambles and epilogues, which GMime would hold in memory,
/// and the middle of large leaves' contents, which it would only scan): a GMimeStreamCat of file streams over the
/// ranges kept. A substream inside one kept range, or across gaps that are all a leaf's content left out (`joins`),
/// as a persisted part's content is, is a file stream of the file's own offsets, so `inbox_gmime_file_range` reads it.
typedef struct {
    GMimeStreamCat parent;
    int fd;
    guint count;
    gint64 *starts;  // in the view, ascending; kept range i is [files[i], files[i] + lengths[i]) of the file
    gint64 *files;
    gint64 *lengths;
    gboolean *joins;  // joins[i]: the gap after range i is part of one leaf's content, which a substream may span
    gboolean *spanned;  // spanned[i]: a substream spanned the gap after range i
} InboxSkipStream;

typedef struct {
    GMimeStreamCatClass parent;
} InboxSkipStreamClass;

/// GMimeStreamCat's class, the one InboxSkipStream extends (a function: Swift does not emit a header's variables).
static inline GMimeStreamClass *inbox_skip_stream_parent_class(void) {
    return GMIME_STREAM_CLASS(g_type_class_peek(GMIME_TYPE_STREAM_CAT));
}

/// The last kept range that starts at or before `position` of the view.
static inline guint inbox_skip_stream_range(InboxSkipStream *view, gint64 position) {
    guint low = 0, high = view->count;
    while (high - low > 1) {
        guint middle = low + (high - low) / 2;
        if (view->starts[middle] <= position) low = middle; else high = middle;
    }
    return low;
}

static inline GMimeStream *inbox_skip_stream_substream(GMimeStream *stream, gint64 start, gint64 end) {
    InboxSkipStream *view = (InboxSkipStream *)stream;
    if (view->count > 0 && end != -1 && start >= 0 && end >= start) {
        guint low = inbox_skip_stream_range(view, start);
        guint high = end > start ? inbox_skip_stream_range(view, end - 1) : low;
        gboolean joined = end <= view->starts[high] + view->lengths[high];
        for (guint i = low; joined && i < high; i++) joined = view->joins[i];
        if (joined) {
            for (guint i = low; i < high; i++) view->spanned[i] = TRUE;
            gint64 first = view->files[low] - view->starts[low];
            gint64 last = view->files[high] - view->starts[high];
            GMimeStream *file = g_mime_stream_fs_new_with_bounds(view->fd, start + first, end + last);
            if (file != NULL) inbox_gmime_stream_fs_disown(file);
            return file;
        }
    }
    return inbox_skip_stream_parent_class()->substream(stream, start, end);
}

static inline void inbox_skip_stream_finalize(GObject *object) {
    InboxSkipStream *view = (InboxSkipStream *)object;
    g_free(view->starts);
    g_free(view->files);
    g_free(view->lengths);
    g_free(view->joins);
    g_free(view->spanned);
    G_OBJECT_CLASS(inbox_skip_stream_parent_class())->finalize(object);
}

static inline void inbox_skip_stream_class_init(gpointer klass, gpointer data) {
    (void)data;
    G_OBJECT_CLASS(klass)->finalize = inbox_skip_stream_finalize;
    GMIME_STREAM_CLASS(klass)->substream = inbox_skip_stream_substream;
}

static inline GType inbox_skip_stream_get_type(void) {
    static gsize type = 0;
    if (g_once_init_enter(&type)) {
        GType registered = g_type_register_static_simple(
            GMIME_TYPE_STREAM_CAT, g_intern_static_string("InboxSkipStream"), sizeof(InboxSkipStreamClass),
            inbox_skip_stream_class_init, sizeof(InboxSkipStream), NULL, 0);
        g_once_init_leave(&type, registered);
    }
    return type;
}

/// A view of the file open at `fd` made of its byte ranges [starts[i], ends[i]), in order, where `joins[i]` says
/// the gap after range i is a leaf's content left out (NULL: none is); the descriptor stays the caller's.
static inline GMimeStream *inbox_skip_stream_new(
    int fd, const gint64 *starts, const gint64 *ends, const gboolean *joins, guint count) {
    InboxSkipStream *view = g_object_new(inbox_skip_stream_get_type(), NULL);
    g_mime_stream_construct(GMIME_STREAM(view), 0, -1);
    view->fd = fd;
    view->count = count;
    view->starts = g_new(gint64, count);
    view->files = g_new(gint64, count);
    view->lengths = g_new(gint64, count);
    view->joins = g_new0(gboolean, count);
    view->spanned = g_new0(gboolean, count);
    gint64 position = 0;
    for (guint i = 0; i < count; i++) {
        view->starts[i] = position;
        view->files[i] = starts[i];
        view->lengths[i] = ends[i] - starts[i];
        if (joins != NULL) view->joins[i] = joins[i];
        position += view->lengths[i];
        GMimeStream *file = g_mime_stream_fs_new_with_bounds(fd, starts[i], ends[i]);
        inbox_gmime_stream_fs_disown(file);
        g_mime_stream_cat_add_source(GMIME_STREAM_CAT(view), file);
        g_object_unref(file);
    }
    return GMIME_STREAM(view);
}

/// Whether every gap of leaf content left out of the view was spanned by a substream (a part's content): then
/// GMime read each gap inside a leaf's content, where no line of it could change what it parsed.
static inline gboolean inbox_skip_stream_joins_spanned(GMimeStream *stream) {
    InboxSkipStream *view = (InboxSkipStream *)stream;
    for (guint i = 0; i < view->count; i++) {
        if (view->joins[i] && !view->spanned[i]) return FALSE;
    }
    return TRUE;
}

#endif
