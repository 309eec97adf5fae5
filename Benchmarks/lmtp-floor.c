/* The floor of the LMTP row (Benchmarks/lmtp_bench.py): an LMTP server in C that makes the files, renames and
 * syncs `inbox lmtp` makes for a message and for a batch, and as little else as such a server can do. What
 * `inbox lmtp` spends beyond it is its own.
 *
 *   lmtp-floor SOCKET INBOX STATE
 *       listens on the unix socket SOCKET (made, mode 0600); delivers into the folder INBOX; keeps its import.lock,
 *       events.lock, index.log and events.jsonl in the folder STATE; exits on SIGTERM
 *
 * A session a thread. The data of a message, dot-unstuffed, goes into the session's spool (an unnamed file in
 * $TMPDIR, else /tmp, kept from one message to the next, cut to the message's length), is read back whole and hashed
 * (SHA-256, nettle: the message's key). A key placed before (by this process, or in the lines of index.log it has
 * read) is a duplicate: answered 250, nothing staged. Each attachment (a part with `filename="..."` and base64
 * content: the only MIME this floor knows, the benchmark's messages) is decoded into an unnamed file in INBOX
 * (O_TMPFILE), linked under a hidden staging name, its writeback started (sync_file_range) and its status read
 * (fstat), then fsynced and closed by its session. The session then joins the group commit, as `inbox lmtp`'s
 * sessions do: the first to come leads and places every message waiting (at most 64). Under import.lock (flock): the
 * lines other processes appended to index.log read, the keys looked up again (a key twice in the batch is placed
 * once), one line an attachment appended to index.log and fdatasync'ed (the index's placing commit); under
 * events.lock: the renames into INBOX (RENAME_NOREPLACE, another name when one is taken), INBOX fsynced, a
 * `delivered` record a file and an `imported` record a message (with seq and time) appended to events.jsonl in one
 * write and fsynced; then one line a message appended to index.log, not synced (the index's settle). Then each
 * session answers 250.
 *
 * Left out, which `inbox lmtp` does: MIME beyond that shape (GMime), the limits, names made safe, SQLite (its pages,
 * checkpoints and locks: an appended line stands for a commit), the log's sequence chain across processes and
 * rotation, the container's identity checked for each message, the repair of a crashed batch, the idle timeout. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { batch_messages = 64, attachments_max = 16, line_max = 8192, chunk = 64 * 1024, keys_max = 1 << 20 };

static int inbox, import_lock, events_lock, index_log, events_log;
static const char *spool_folder;

static void fail(const char *what) {
    fprintf(stderr, "lmtp-floor: %s: %s\n", what, strerror(errno));
    exit(70);
}

static void write_all(int fd, const char *data, size_t length) {
    while (length) {
        ssize_t n = write(fd, data, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("write");
        data += n;
        length -= (size_t)n;
    }
}

/* The keys placed, by this process or (read from index.log under import.lock) another: open addressing over the
 * key's first 8 bytes. Under `group_lock`. */
static char (*keys)[65];
static size_t key_count;
static off_t index_read; /* how much of index.log was read for keys */

static size_t slot(const char *key) {
    uint64_t h = 0;
    for (int i = 0; i < 16; i++) h = h << 4 | (uint64_t)(key[i] <= '9' ? key[i] - '0' : key[i] - 'a' + 10);
    return (size_t)h & (keys_max - 1);
}
static int known(const char *key) {
    for (size_t i = slot(key); keys[i][0]; i = (i + 1) & (keys_max - 1))
        if (!memcmp(keys[i], key, 64)) return 1;
    return 0;
}
static void remember(const char *key) {
    if (known(key) || key_count >= keys_max / 2) return;
    size_t i = slot(key);
    while (keys[i][0]) i = (i + 1) & (keys_max - 1);
    memcpy(keys[i], key, 65);
    key_count++;
}

/* ------------------------------------------------------------------------------------------- the group commit */

struct staged {
    char staging[64], name[256];
    struct stat status;
};
struct request {
    char key[65];
    struct staged files[attachments_max];
    int count, duplicate, done, leads;
    struct request *next;
};

static pthread_mutex_t group_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t group_moved = PTHREAD_COND_INITIALIZER;
static struct request *waiting, *waiting_last;
static int leading;
static uint64_t seq;

/* The settled keys other processes appended to index.log since it was last read. Under import.lock. */
static void read_index(void) {
    static char text[chunk + 1];
    size_t kept = 0;
    for (;;) {
        ssize_t n = pread(index_log, text + kept, chunk - kept, index_read);
        if (n <= 0) return;
        index_read += n;
        text[kept + (size_t)n] = 0;
        char *line = text, *end;
        while ((end = strchr(line, '\n'))) {
            if (!strncmp(line, "settled ", 8) && end - line == 8 + 64) {
                line[72] = 0;
                pthread_mutex_lock(&group_lock);
                remember(line + 8);
                pthread_mutex_unlock(&group_lock);
            }
            line = end + 1;
        }
        kept = (size_t)(text + kept + n - line);
        memmove(text, line, kept);
    }
}

static void place(struct request **batch, int size) {
    static char text[batch_messages * (attachments_max + 1) * 700];
    size_t used = 0;
    if (flock(import_lock, LOCK_EX)) fail("flock import.lock");
    read_index();
    pthread_mutex_lock(&group_lock);
    for (int r = 0; r < size; r++) {  /* placed before, or earlier in this batch */
        batch[r]->duplicate = known(batch[r]->key);
        for (int e = 0; e < r && !batch[r]->duplicate; e++)
            batch[r]->duplicate = !strcmp(batch[e]->key, batch[r]->key);
    }
    pthread_mutex_unlock(&group_lock);
    for (int r = 0; r < size; r++)
        for (int f = 0; f < batch[r]->count && !batch[r]->duplicate; f++)
            used += (size_t)snprintf(text + used, sizeof text - used, "placing %s %d %s %lu\n", batch[r]->key, f,
                                     batch[r]->files[f].staging, (unsigned long)batch[r]->files[f].status.st_ino);
    write_all(index_log, text, used);
    if (fdatasync(index_log)) fail("fdatasync index.log");
    index_read += (off_t)used;
    if (flock(events_lock, LOCK_EX)) fail("flock events.lock");
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    used = 0;
    for (int r = 0; r < size; r++) {
        struct request *q = batch[r];
        for (int f = 0; f < q->count; f++) {
            struct staged *s = &q->files[f];
            if (q->duplicate) {
                unlinkat(inbox, s->staging, 0);
                continue;
            }
            char final[300];
            snprintf(final, sizeof final, "%s", s->name);
            for (int n = 2; renameat2(inbox, s->staging, inbox, final, RENAME_NOREPLACE); n++) {
                if (errno != EEXIST) fail("rename");
                snprintf(final, sizeof final, "%s %d", s->name, n);
            }
            used += (size_t)snprintf(text + used, sizeof text - used,
                                     "{\"seq\":%llu,\"time\":\"%s\",\"event\":\"delivered\",\"path\":\"Documents/"
                                     "Inbox/%s\",\"size\":%lld,\"id\":\"%lu:%lu\",\"message_sha256\":\"%s\","
                                     "\"ordinal\":%d}\n",
                                     (unsigned long long)++seq, now, final, (long long)s->status.st_size,
                                     (unsigned long)s->status.st_dev, (unsigned long)s->status.st_ino, q->key, f);
        }
        used += (size_t)snprintf(text + used, sizeof text - used,
                                 "{\"seq\":%llu,\"time\":\"%s\",\"event\":\"imported\",\"message_sha256\":\"%s\","
                                 "\"source\":\"lmtp\",\"attachments\":%d,\"duplicate\":%s}\n",
                                 (unsigned long long)++seq, now, q->key, q->duplicate ? 0 : q->count,
                                 q->duplicate ? "true" : "false");
    }
    if (fsync(inbox)) fail("fsync the Inbox");
    write_all(events_log, text, used);
    if (fsync(events_log)) fail("fsync events.jsonl");
    flock(events_lock, LOCK_UN);
    used = 0;
    for (int r = 0; r < size; r++)
        if (!batch[r]->duplicate)
            used += (size_t)snprintf(text + used, sizeof text - used, "settled %s\n", batch[r]->key);
    write_all(index_log, text, used);
    index_read += (off_t)used;
    pthread_mutex_lock(&group_lock);
    for (int r = 0; r < size; r++) remember(batch[r]->key);
    pthread_mutex_unlock(&group_lock);
    flock(import_lock, LOCK_UN);
}

/* Places the request with every other waiting meanwhile; returns once it is placed. */
static void group_place(struct request *request) {
    pthread_mutex_lock(&group_lock);
    request->next = NULL;
    if (waiting_last) waiting_last->next = request;
    else waiting = request;
    waiting_last = request;
    if (leading) {
        while (!request->done && !request->leads) pthread_cond_wait(&group_moved, &group_lock);
        if (request->done) {
            pthread_mutex_unlock(&group_lock);
            return;
        }
    }
    leading = 1;
    struct request *batch[batch_messages];
    int size = 0;
    while (waiting && size < batch_messages) {
        batch[size++] = waiting;
        waiting = waiting->next;
    }
    if (!waiting) waiting_last = NULL;
    pthread_mutex_unlock(&group_lock);
    place(batch, size);
    pthread_mutex_lock(&group_lock);
    for (int i = 0; i < size; i++) batch[i]->done = 1;
    if (waiting) waiting->leads = 1;
    else leading = 0;
    pthread_cond_broadcast(&group_moved);
    pthread_mutex_unlock(&group_lock);
}

/* ------------------------------------------------------------------------------------------- a message */

/* Each byte's 6 bits, or -1 outside the base64 alphabet. */
static signed char sextets[256];

static void make_sextets(void) {
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    memset(sextets, -1, sizeof sextets);
    for (int i = 0; i < 64; i++) sextets[(unsigned char)alphabet[i]] = (signed char)i;
}

/* Decodes the base64 from `from` to the first line that starts with "--"; returns the bytes put in `out`. A line at a
   time, four characters of the alphabet a step (a table lookup each), as a careful decoder in C would. */
static size_t decode(const char *from, const char *end, unsigned char *out) {
    size_t n = 0;
    unsigned bits = 0, count = 0;
    const unsigned char *p = (const unsigned char *)from, *stop = (const unsigned char *)end;
    while (p < stop) {
        const unsigned char *newline = memchr(p, '\n', (size_t)(stop - p));
        const unsigned char *line_end = newline ? newline : stop;
        if (line_end - p >= 2 && p[0] == '-' && p[1] == '-') break;
        while (p < line_end) {
            if (count == 0 && line_end - p >= 4) {
                int a = sextets[p[0]], b = sextets[p[1]], c = sextets[p[2]], d = sextets[p[3]];
                if ((a | b | c | d) >= 0) {
                    unsigned word = (unsigned)a << 18 | (unsigned)b << 12 | (unsigned)c << 6 | (unsigned)d;
                    out[n] = (unsigned char)(word >> 16);
                    out[n + 1] = (unsigned char)(word >> 8);
                    out[n + 2] = (unsigned char)word;
                    n += 3;
                    p += 4;
                    continue;
                }
            }
            int v = sextets[*p++];
            if (v < 0) continue;
            bits = bits << 6 | (unsigned)v;
            if (++count == 4) {
                out[n++] = (unsigned char)(bits >> 16);
                out[n++] = (unsigned char)(bits >> 8);
                out[n++] = (unsigned char)bits;
                count = bits = 0;
            }
        }
        p = line_end + 1;
    }
    if (count == 3) {
        out[n++] = (unsigned char)(bits >> 10);
        out[n++] = (unsigned char)(bits >> 2);
    } else if (count == 2) {
        out[n++] = (unsigned char)(bits >> 4);
    }
    return n;
}

struct session {
    int socket, spool;
    char buffer[chunk];
    size_t start, end;
    char *message, *pending;
    size_t capacity;
    unsigned char *decoded;
};

/* Stages the attachments of the message in the spool (length bytes) and places them; 0 when delivered. */
static int import(struct session *s, size_t length) {
    if (length + 1 > s->capacity) {
        s->capacity = length + 1;
        s->message = realloc(s->message, s->capacity);
        s->decoded = realloc(s->decoded, s->capacity);
    }
    char *text = s->message;
    if (pread(s->spool, text, length, 0) != (ssize_t)length) return -1;
    text[length] = 0;
    struct request request = {.count = 0};
    struct sha256_ctx hash;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&hash);
    sha256_update(&hash, length, (const uint8_t *)text);
    sha256_digest(&hash, sizeof digest, digest);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) sprintf(request.key + 2 * i, "%02x", digest[i]);
    pthread_mutex_lock(&group_lock);
    int duplicate = known(request.key);
    pthread_mutex_unlock(&group_lock);
    const char *end = text + length;
    for (const char *p = strstr(text, "filename=\""); p && !duplicate && request.count < attachments_max;
         p = strstr(p, "filename=\"")) {
        p += strlen("filename=\"");
        const char *quote = strchr(p, '"'), *body = strstr(p, "\r\n\r\n");
        struct staged *f = &request.files[request.count];
        if (!quote || !body || (size_t)(quote - p) >= sizeof f->name || memchr(p, '/', (size_t)(quote - p))) break;
        memcpy(f->name, p, (size_t)(quote - p));
        f->name[quote - p] = 0;
        size_t n = decode(body + 4, end, s->decoded);
        int fd = openat(inbox, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0444);
        if (fd < 0) return -1;
        write_all(fd, (const char *)s->decoded, n);
        snprintf(f->staging, sizeof f->staging, ".inbox-import.%d.%lx", getpid(), (unsigned long)random());
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, path, inbox, f->staging, AT_SYMLINK_FOLLOW)) return -1;
        sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        if (fstat(fd, &f->status) || fsync(fd) || close(fd)) return -1;
        request.count++;
        p = body;
    }
    if (!duplicate) group_place(&request);
    return 0;
}

static int reply(struct session *s, const char *text) {
    for (size_t length = strlen(text); length;) {
        ssize_t n = send(s->socket, text, length, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        text += n;
        length -= (size_t)n;
    }
    return 0;
}

/* The next line, its line end kept, into `line`; its length, or -1 at the end (or past line_max). */
static ssize_t read_line(struct session *s, char *line) {
    size_t used = 0;
    for (;;) {
        if (s->start == s->end) {
            ssize_t n = recv(s->socket, s->buffer, sizeof s->buffer, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return -1;
            s->start = 0;
            s->end = (size_t)n;
        }
        char *newline = memchr(s->buffer + s->start, '\n', s->end - s->start);
        size_t take = (newline ? (size_t)(newline - s->buffer) + 1 : s->end) - s->start;
        if (used + take > line_max) return -1;
        memcpy(line + used, s->buffer + s->start, take);
        used += take;
        s->start += take;
        if (newline) return (ssize_t)used;
    }
}

/* The data after DATA into the spool, dot-unstuffed, up to the final dot; its length, or -1. */
static ssize_t receive(struct session *s, char *line) {
    off_t written = 0;
    size_t used = 0;
    for (;;) {
        ssize_t n = read_line(s, line);
        if (n < 0) return -1;
        if ((n == 3 && !memcmp(line, ".\r\n", 3)) || (n == 2 && !memcmp(line, ".\n", 2))) break;
        const char *from = line[0] == '.' ? line + 1 : line;
        size_t length = (size_t)n - (size_t)(from - line);
        if (used + length > chunk) {
            if (pwrite(s->spool, s->pending, used, written) != (ssize_t)used) fail("write the spool");
            written += (off_t)used;
            used = 0;
        }
        memcpy(s->pending + used, from, length);
        used += length;
    }
    if (used && pwrite(s->spool, s->pending, used, written) != (ssize_t)used) fail("write the spool");
    written += (off_t)used;
    if (ftruncate(s->spool, written)) fail("cut the spool");
    return (ssize_t)written;
}

static void *serve(void *argument) {
    struct session *s = argument;
    char *line = malloc(line_max);
    s->pending = malloc(chunk);
    s->spool = open(spool_folder, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (s->spool < 0) fail("make the spool");
    if (reply(s, "220 lmtp-floor LMTP\r\n")) goto done;
    for (;;) {
        const char *answer = "250 2.0.0 OK\r\n";
        if (read_line(s, line) < 0) break;
        if (!strncasecmp(line, "LHLO", 4))
            answer = "250-lmtp-floor\r\n250-PIPELINING\r\n250-ENHANCEDSTATUSCODES\r\n250 8BITMIME\r\n";
        else if (!strncasecmp(line, "QUIT", 4)) {
            reply(s, "221 2.0.0 bye\r\n");
            break;
        } else if (!strncasecmp(line, "DATA", 4)) {
            if (reply(s, "354 end with <CR><LF>.<CR><LF>\r\n")) break;
            ssize_t length = receive(s, line);
            if (length < 0) break;
            answer = import(s, (size_t)length) ? "451 4.3.0 not delivered\r\n" : "250 2.0.0 delivered\r\n";
        }
        if (reply(s, answer)) break;
    }
done:
    close(s->socket);
    close(s->spool);
    free(s->message);
    free(s->decoded);
    free(s->pending);
    free(line);
    free(s);
    return NULL;
}

static volatile sig_atomic_t stopping;
static void on_term(int signal) {
    (void)signal;
    stopping = 1;
}

static int state_file(int state, const char *name, int flags) {
    int fd = openat(state, name, flags | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) fail(name);
    return fd;
}

int main(int argc, char **argv) {
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if (argc != 4 || strlen(argv[1]) >= sizeof address.sun_path) {
        fprintf(stderr, "usage: lmtp-floor SOCKET INBOX STATE\n");
        return 64;
    }
    const char *tmp = getenv("TMPDIR");
    spool_folder = tmp && *tmp ? tmp : "/tmp";
    inbox = open(argv[2], O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    int state = open(argv[3], O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (inbox < 0 || state < 0) fail("open INBOX or STATE");
    import_lock = state_file(state, "import.lock", O_RDWR);
    events_lock = state_file(state, "events.lock", O_RDWR);
    index_log = state_file(state, "index.log", O_RDWR | O_APPEND);
    events_log = state_file(state, "events.jsonl", O_WRONLY | O_APPEND);
    keys = calloc(keys_max, sizeof *keys);
    make_sextets();
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    struct sigaction term = {.sa_handler = on_term};
    sigaction(SIGTERM, &term, NULL);
    sigset_t term_only;
    sigemptyset(&term_only);
    sigaddset(&term_only, SIGTERM);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    strcpy(address.sun_path, argv[1]);
    unlink(argv[1]);
    mode_t was = umask(0177);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) || listen(listener, 64)) fail("listen");
    umask(was);
    pthread_attr_t detached;
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    while (!stopping) {
        int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) continue;
            fail("accept");
        }
        struct session *s = calloc(1, sizeof *s);
        s->socket = fd;
        /* A session starts with SIGTERM blocked: it is the accepting thread's, whose accept4 it interrupts. */
        sigset_t was_blocked;
        pthread_sigmask(SIG_BLOCK, &term_only, &was_blocked);
        pthread_t thread;
        if (pthread_create(&thread, &detached, serve, s)) fail("start a session");
        pthread_sigmask(SIG_SETMASK, &was_blocked, NULL);
    }
    return 0;
}
