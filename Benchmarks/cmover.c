/* The speed ceiling of run-bench: inotify and rename(2) in a loop, nothing else (no log, no fsync, no
 * checks). At start (once watching) it lists each Inbox and moves what is already there, the baseline of
 * "start-up with files waiting"; on IN_Q_OVERFLOW it lists them all again, so that it loses nothing.
 *
 *   cmover [-d] INBOX DOCUMENTS [INBOX DOCUMENTS ...]
 *       prints "ready" once every Inbox is watched (one inotify instance, one watch per Inbox); stops on SIGTERM
 *
 * -d (durable): the same moves made as durable as inbox makes them, and nothing else. After each read of events
 * (and each listing), every pair that moved a file has its Documents and its Inbox fsynced, then one line appended
 * to a log of its own (cmover.log beside Documents) and fsynced: the fsyncs inbox does for a batch, on one thread,
 * with no batch lingering for others. The price of durability on this machine, measured beside the rest. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

static volatile sig_atomic_t stopping = 0;
static void on_term(int signal) { (void)signal; stopping = 1; }

struct pair {
    const char *path;
    int inbox, documents, log;
    int moved; /* files moved since its last fsyncs (-d) */
};
static int durable;
static struct pair *pairs;
static int count;
static int *pair_of_watch; /* watch descriptor -> index in pairs */
static int watches;

static void move(struct pair *pair, const char *name) {
    if (name[0] == '.') return;
    /* ENOENT: moved already (a scan and an event both saw it) */
    if (renameat(pair->inbox, name, pair->documents, name) == 0) pair->moved++;
}

/* -d: the fsyncs of every pair that moved something, then its log line and the log's fsync. */
static void make_durable(void) {
    if (!durable) return;
    for (int k = 0; k < count; k++) {
        struct pair *pair = &pairs[k];
        if (pair->moved == 0) continue;
        char line[32];
        int length = snprintf(line, sizeof line, "moved %d\n", pair->moved);
        if (fsync(pair->documents) != 0 || fsync(pair->inbox) != 0 || write(pair->log, line, length) != length ||
            fsync(pair->log) != 0) {
            perror("cmover: fsync");
            exit(1);
        }
        pair->moved = 0;
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
    if (argc > 1 && strcmp(argv[1], "-d") == 0) {
        durable = 1;
        argv++;
        argc--;
    }
    if (argc < 3 || argc % 2 != 1) {
        fprintf(stderr, "usage: cmover [-d] INBOX DOCUMENTS [INBOX DOCUMENTS ...]\n");
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
        pairs[k].log = durable ? openat(pairs[k].documents, "../cmover.log", O_WRONLY | O_APPEND | O_CREAT, 0644) : -1;
        if (durable && pairs[k].log < 0) { perror("cmover: cmover.log"); return 1; }
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
    printf("ready\n");
    fflush(stdout);
    for (int k = 0; k < count; k++) scan(&pairs[k]);
    make_durable();
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
        make_durable();
    }
    return 0;
}
