/* The speed ceiling of run-bench: inotify and rename(2) in a loop, nothing else (no log, no fsync, no
 * checks). At start (once watching) it lists each Inbox and moves what is already there, the baseline of
 * "start-up with files waiting"; on IN_Q_OVERFLOW it lists them all again, so that it loses nothing.
 *
 *   cmover [-g | -t] [-d] INBOX DOCUMENTS [INBOX DOCUMENTS ...]
 *       prints "ready" once every Inbox is watched (one inotify instance, one watch per Inbox); stops on SIGTERM
 *
 * -d (durable): the same moves made as durable as inbox makes them, and nothing else. After each read of events
 * (and each listing), every pair that moved a file has its Documents and its Inbox fsynced, then one line appended
 * to a log of its own (cmover.log beside Documents) and fsynced: the fsyncs inbox does for a batch, on one thread,
 * with no batch lingering for others. The price of durability on this machine, measured beside the rest.
 *
 * -g (guarded): each file moved with the system calls inbox's guarantees cost it, and none of inbox's own work:
 * looked at by name (statx: a regular file, its identity), opened read-only (O_NOFOLLOW, O_NONBLOCK), looked at
 * again through the descriptor, a read lease taken, sealed 0444, read and hashed (SHA-256, nettle), the lease
 * checked and let go; then looked at by name once more (the checked rename), renamed with RENAME_NOREPLACE, its
 * write bit given back, closed. Two lines a file (its arrival with the hash, its move) go to the log with one
 * write a batch: at most 256 files, or one read of events. With -d, the batch's fsyncs as above. The floor, on this
 * machine, of what a mover keeping inbox's guarantees can do, measured beside the ceiling.
 *
 * -t (two threads): -g in inbox's shape. The thread that reads events and lists prepares each file (up to the
 * lease let go) and hands it on; a second thread renames, logs and makes a batch durable when it is full or when
 * nothing more waits. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nettle/sha2.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t stopping = 0;
static void on_term(int signal) { (void)signal; stopping = 1; }

enum { batch_files = 256, line_bytes = 128 };

struct pair {
    const char *path;
    int inbox, documents, log;
    int moved;   /* files moved since its last fsyncs (-d) */
    char *lines; /* -g: the log lines of those files */
    size_t line_length;
};
static int durable, guarded, threaded;
static struct pair *pairs;
static int count;
static int *pair_of_watch; /* watch descriptor -> index in pairs */
static int watches;

static void make_durable(void);

static int same_file(const struct statx *a, const struct statx *b) {
    return a->stx_ino == b->stx_ino && a->stx_dev_major == b->stx_dev_major && a->stx_dev_minor == b->stx_dev_minor;
}

/* -g: one file looked at, opened, leased, sealed and hashed, ready to move; 0 when it is not. */
struct prepared {
    struct pair *pair;
    int file;
    struct statx opened;
    unsigned char digest[SHA256_DIGEST_SIZE];
    char name[256];
};
static const unsigned status_mask =
    STATX_TYPE | STATX_MODE | STATX_NLINK | STATX_INO | STATX_SIZE | STATX_MTIME | STATX_BTIME;

static int prepare(struct pair *pair, const char *name, struct prepared *out) {
    struct statx seen;
    if (strlen(name) >= sizeof out->name) return 0;
    if (statx(pair->inbox, name, AT_SYMLINK_NOFOLLOW, status_mask, &seen) != 0 || !S_ISREG(seen.stx_mode)) return 0;
    int file = openat(pair->inbox, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (file < 0) return 0;
    if (statx(file, "", AT_EMPTY_PATH, status_mask, &out->opened) != 0 || !same_file(&out->opened, &seen) ||
        fcntl(file, F_SETLEASE, F_RDLCK) != 0) {
        close(file);
        return 0;
    }
    int sealed = fchmod(file, 0444) == 0;
    struct sha256_ctx hash;
    sha256_init(&hash);
    static _Thread_local unsigned char chunk[1 << 16];
    off_t offset = 0;
    ssize_t got = 0;
    while (offset < (off_t)out->opened.stx_size && (got = pread(file, chunk, sizeof chunk, offset)) > 0) {
        sha256_update(&hash, got, chunk);
        offset += got;
    }
    sha256_digest(&hash, sizeof out->digest, out->digest);
    int held = fcntl(file, F_GETLEASE) == F_RDLCK;
    fcntl(file, F_SETLEASE, F_UNLCK);
    if (!sealed || got < 0 || !held) {
        close(file);
        return 0;
    }
    out->pair = pair;
    out->file = file;
    strcpy(out->name, name);
    return 1;
}

/* -g: a prepared file looked at by name once more, renamed, its write bit given back, closed; its two log lines
 * kept for the batch's write, which comes once the batch is full. */
static void finish(struct prepared *ready) {
    struct pair *pair = ready->pair;
    struct statx again;
    if (statx(pair->inbox, ready->name, AT_SYMLINK_NOFOLLOW, status_mask, &again) == 0 &&
        same_file(&again, &ready->opened) &&
        renameat2(pair->inbox, ready->name, pair->documents, ready->name, RENAME_NOREPLACE) == 0) {
        if (fchmod(ready->file, 0644) != 0) perror("cmover: fchmod");
        char hex[2 * SHA256_DIGEST_SIZE + 1];
        for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(hex + 2 * i, 3, "%02x", ready->digest[i]);
        pair->line_length += snprintf(pair->lines + pair->line_length, 2 * line_bytes,
                                      "arrived %.40s %s\nmoved %.40s\n", ready->name, hex, ready->name);
        pair->moved++;
    }
    close(ready->file);
    if (pair->moved == batch_files) make_durable();
}

/* -t: prepared files handed from the thread that reads events to the one that renames, in order. The renaming
 * thread takes all that wait at once, and either side is woken only when it sleeps. */
enum { queue_size = 4096 };
static struct prepared queue[queue_size];
static unsigned long pushed, popped;
static int renamer_sleeps, preparer_sleeps;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_changed = PTHREAD_COND_INITIALIZER;

static void push(const struct prepared *ready) {
    pthread_mutex_lock(&queue_lock);
    while (pushed - popped == queue_size) {
        preparer_sleeps = 1;
        pthread_cond_wait(&queue_changed, &queue_lock);
    }
    preparer_sleeps = 0;
    queue[pushed++ % queue_size] = *ready;
    if (renamer_sleeps) pthread_cond_broadcast(&queue_changed);
    pthread_mutex_unlock(&queue_lock);
}

/* The renaming thread: every file handed over is finished; a batch is made durable when it is full or when
 * nothing more waits. */
static void *renaming_thread(void *unused) {
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&queue_lock);
        if (pushed == popped) {
            pthread_mutex_unlock(&queue_lock);
            make_durable();
            pthread_mutex_lock(&queue_lock);
            while (pushed == popped) {
                renamer_sleeps = 1;
                pthread_cond_wait(&queue_changed, &queue_lock);
            }
            renamer_sleeps = 0;
        }
        unsigned long end = pushed;
        pthread_mutex_unlock(&queue_lock);
        for (unsigned long next = popped; next != end; next++) finish(&queue[next % queue_size]);
        pthread_mutex_lock(&queue_lock);
        popped = end;
        if (preparer_sleeps) pthread_cond_broadcast(&queue_changed);
        pthread_mutex_unlock(&queue_lock);
    }
    return NULL;
}

static void move(struct pair *pair, const char *name) {
    if (name[0] == '.') return;
    if (!guarded) {
        /* ENOENT: moved already (a scan and an event both saw it) */
        if (renameat(pair->inbox, name, pair->documents, name) == 0) pair->moved++;
        return;
    }
    struct prepared ready;
    if (!prepare(pair, name, &ready)) return;
    if (threaded) push(&ready);
    else finish(&ready);
}

/* -d: the fsyncs of every pair that moved something, then its log lines (-g) or line and the log's fsync; -g
 * alone: the log lines. */
static void make_durable(void) {
    if (!durable && !guarded) return;
    for (int k = 0; k < count; k++) {
        struct pair *pair = &pairs[k];
        if (pair->moved == 0) continue;
        char line[32];
        const char *text = pair->lines;
        size_t length = pair->line_length;
        if (!guarded) {
            text = line;
            length = snprintf(line, sizeof line, "moved %d\n", pair->moved);
        }
        if ((durable && (fsync(pair->documents) != 0 || fsync(pair->inbox) != 0)) ||
            write(pair->log, text, length) != (ssize_t)length || (durable && fsync(pair->log) != 0)) {
            perror("cmover: log");
            exit(1);
        }
        pair->moved = 0;
        pair->line_length = 0;
    }
}

static void scan(struct pair *pair) {
    DIR *dir = opendir(pair->path);
    if (!dir) return;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_type == DT_REG || entry->d_type == DT_UNKNOWN) move(pair, entry->d_name);
    }
    closedir(dir);
}

int main(int argc, char **argv) {
    for (; argc > 1 && argv[1][0] == '-' && argv[1][1] && strchr("dgt", argv[1][1]) && !argv[1][2]; argv++, argc--) {
        if (argv[1][1] == 'd') durable = 1;
        if (argv[1][1] == 'g') guarded = 1;
        if (argv[1][1] == 't') threaded = guarded = 1;
    }
    if (argc < 3 || argc % 2 != 1) {
        fprintf(stderr, "usage: cmover [-g | -t] [-d] INBOX DOCUMENTS [INBOX DOCUMENTS ...]\n");
        return 64;
    }
    struct sigaction action = {0};
    action.sa_handler = on_term;
    sigaction(SIGTERM, &action, NULL);
    count = (argc - 1) / 2;
    pairs = calloc(count, sizeof *pairs);
    int fd = inotify_init1(0);
    if (fd < 0) { perror("cmover: inotify_init1"); return 1; }
    for (int k = 0; k < count; k++) {
        pairs[k].path = argv[1 + 2 * k];
        pairs[k].inbox = open(argv[1 + 2 * k], O_RDONLY | O_DIRECTORY);
        pairs[k].documents = open(argv[2 + 2 * k], O_RDONLY | O_DIRECTORY);
        pairs[k].lines = guarded ? malloc(batch_files * 2 * line_bytes) : NULL;
        pairs[k].log = durable || guarded ? openat(pairs[k].documents, "../cmover.log", O_WRONLY | O_APPEND | O_CREAT, 0644) : -1;
        if ((durable || guarded) && pairs[k].log < 0) { perror("cmover: cmover.log"); return 1; }
        int wd = pairs[k].inbox < 0 || pairs[k].documents < 0
                     ? -1 : inotify_add_watch(fd, argv[1 + 2 * k], IN_CLOSE_WRITE | IN_MOVED_TO);
        if (wd < 0) { perror(argv[1 + 2 * k]); return 1; }
        if (wd >= watches) {
            int grown = wd * 2 + 16;
            pair_of_watch = realloc(pair_of_watch, grown * sizeof(int));
            for (int w = watches; w < grown; w++) pair_of_watch[w] = -1;
            watches = grown;
        }
        pair_of_watch[wd] = k;
    }
    pthread_t renamer;
    if (threaded && pthread_create(&renamer, NULL, renaming_thread, NULL) != 0) {
        perror("cmover: pthread_create");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (int k = 0; k < count; k++) scan(&pairs[k]);
    if (!threaded) make_durable();
    static char buffer[1 << 16] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (!stopping) {
        ssize_t length = read(fd, buffer, sizeof buffer);
        if (length < 0) {
            if (errno == EINTR) continue;
            perror("read");
            return 1;
        }
        for (char *p = buffer; p < buffer + length;) {
            struct inotify_event *event = (struct inotify_event *)p;
            if (event->mask & IN_Q_OVERFLOW) {
                for (int k = 0; k < count; k++) scan(&pairs[k]);
            } else if (event->len > 0 && event->wd >= 0 && event->wd < watches && pair_of_watch[event->wd] >= 0) {
                move(&pairs[pair_of_watch[event->wd]], event->name);
            }
            p += sizeof(struct inotify_event) + event->len;
        }
        if (!threaded) make_durable();
    }
    return 0;
}
