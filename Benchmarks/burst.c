/* The burst generator of run-bench, the same for every contestant.
 *
 *   burst make STAGING COUNT SIZE [text|png]   create COUNT files of SIZE bytes, att-000000.txt ..., in
 *                                              STAGING: plain text (the default) or a PNG signature and bytes
 *   burst rename STAGING INBOX COUNT           rename them into INBOX as fast as possible; prints the seconds
 *   burst await DOCUMENTS COUNT SETTLE DEADLINE   prints "ready" once DOCUMENTS is watched, then waits until
 *       it holds COUNT entries (not counting Inbox), or nothing came for SETTLE seconds, or DEADLINE seconds
 *       passed; prints "ENTRIES LAST-PROGRESS OVERFLOWED", LAST-PROGRESS on CLOCK_MONOTONIC in seconds.
 *
 * STAGING and INBOX must be on the same filesystem, so that each arrival is one rename(2): IN_MOVED_TO.
 *
 * Why `await` counts inotify events rather than listing the folder every 50 ms: a listing of 100,000
 * entries costs 25 ms of kernel time (100 ms in Python's os.scandir), which on a small machine would take
 * a core away from the contestant. Counting the entries as they come costs a microsecond each, and tells
 * the moment the last one came. The count is confirmed by a listing before it is believed, and if this
 * counter's own inotify queue overflows it falls back to a listing every 50 ms. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int counts(const char *name) { return name[0] != '.' && strcmp(name, "Inbox") != 0; }

/* The entries of a folder but ".", ".." and "Inbox", listed with getdents64. */
static long entries(const char *path) {
    static char buffer[1 << 20];
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    long count = 0, length;
    while ((length = syscall(SYS_getdents64, fd, buffer, sizeof buffer)) > 0) {
        for (long at = 0; at < length;) {
            struct dirent64 {
                unsigned long long d_ino;
                long long d_off;
                unsigned short d_reclen;
                unsigned char d_type;
                char d_name[];
            } *entry = (void *)(buffer + at);
            count += counts(entry->d_name);
            at += entry->d_reclen;
        }
    }
    close(fd);
    return count;
}

static int await(const char *documents, long goal, double settle, double deadline) {
    int fd = inotify_init1(IN_NONBLOCK);
    if (fd < 0 || inotify_add_watch(fd, documents, IN_MOVED_TO | IN_CREATE) < 0) { perror(documents); return 1; }
    printf("ready\n");
    fflush(stdout);
    double start = now(), progress = start;
    long count = entries(documents);
    int overflowed = 0;
    static char buffer[1 << 16] __attribute__((aligned(__alignof__(struct inotify_event))));
    while (1) {
        if (count >= goal) {
            long listed = entries(documents);
            if (listed >= goal) { count = listed; break; }
            count = listed;
        }
        struct pollfd ready = {.fd = fd, .events = POLLIN};
        poll(&ready, 1, 50);
        long before = count;
        ssize_t length;
        while ((length = read(fd, buffer, sizeof buffer)) > 0) {
            for (char *p = buffer; p < buffer + length;) {
                struct inotify_event *event = (struct inotify_event *)p;
                if (event->mask & IN_Q_OVERFLOW) overflowed = 1;
                else if (event->len > 0 && counts(event->name)) count++;
                p += sizeof(struct inotify_event) + event->len;
            }
        }
        if (length < 0 && errno != EAGAIN && errno != EINTR) { perror("read"); return 1; }
        if (overflowed) count = entries(documents); /* from now on, a listing every 50 ms */
        double t = now();
        if (count != before) progress = t;
        if (t - progress >= settle || t - start >= deadline) break;
    }
    printf("%ld %.6f %d\n", count, progress, overflowed);
    return 0;
}

static void name(char *out, size_t size, long i) { snprintf(out, size, "att-%06ld.txt", i); }

int main(int argc, char **argv) {
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "make") == 0) {
        int png = argc == 6 && strcmp(argv[5], "png") == 0;
        int dir = open(argv[2], O_RDONLY | O_DIRECTORY);
        if (dir < 0) { perror(argv[2]); return 1; }
        long count = atol(argv[3]), size = atol(argv[4]);
        char *body = malloc(size);
        for (long i = 0; i < count; i++) {
            char file[64];
            name(file, sizeof file, i);
            /* Different contents for every file: (a PNG signature,) a line with the index, then filler text. */
            long head = png && size >= 16 ? 16 : 0;
            if (head) memcpy(body, "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16);
            long n = head + snprintf(body + head, size - head, "Attachment %06ld of a burst of %ld\n", i, count);
            for (long j = n; j < size; j++) body[j] = (j % 64 == 63) ? '\n' : 'a' + (int)((i + j) % 26);
            int fd = openat(dir, file, O_WRONLY | O_CREAT | O_EXCL, 0644);
            if (fd < 0 || write(fd, body, size) != size || close(fd) != 0) { perror(file); return 1; }
        }
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "rename") == 0) {
        int from = open(argv[2], O_RDONLY | O_DIRECTORY), to = open(argv[3], O_RDONLY | O_DIRECTORY);
        if (from < 0 || to < 0) { perror("open"); return 1; }
        long count = atol(argv[4]);
        struct timespec start, end;
        clock_gettime(CLOCK_MONOTONIC, &start);
        for (long i = 0; i < count; i++) {
            char file[64];
            name(file, sizeof file, i);
            if (renameat(from, file, to, file) != 0) { perror(file); return 1; }
        }
        clock_gettime(CLOCK_MONOTONIC, &end);
        printf("%.6f\n", (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9);
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "await") == 0) return await(argv[2], atol(argv[3]), atof(argv[4]), atof(argv[5]));
    fprintf(stderr, "usage: burst make STAGING COUNT SIZE [text|png] | burst rename STAGING INBOX COUNT\n"
                    "       burst await DOCUMENTS COUNT SETTLE DEADLINE\n");
    return 64;
}
