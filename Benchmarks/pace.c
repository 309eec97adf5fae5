/* The paced generator of run-bench: latency from arrival in an Inbox to the file's appearance in Documents.
 *
 *   pace INTERVAL_US COUNT PREFIX STAGING SIZE SETTLE INBOX...
 *
 * Makes COUNT files of SIZE bytes, PREFIX-000000.txt ..., in STAGING (on the Inboxes' filesystem, so that each
 * arrival is one rename(2)); watches the Documents folder of every INBOX (its parent: CONTAINER/Documents/Inbox)
 * with one inotify instance; prints "ready" and waits for a line on standard input ("go"). Then it renames file i
 * into INBOX number i % (number of Inboxes) at start + i * INTERVAL_US (an absolute schedule on CLOCK_MONOTONIC:
 * a late rename does not push the later ones back), taking the time right before each rename. A second thread
 * reads the Documents events (IN_MOVED_TO, IN_CREATE) and takes the time each file appears there. SIGUSR1 stops
 * the generation early (the files already renamed are still waited for). Once every renamed file has appeared, or
 * none has for SETTLE seconds, prints
 *
 *   SENT ARRIVED GENERATION-SECONDS MAX-SLIP-US OVERFLOWED
 *   then one line per renamed file: its latency in microseconds, or -1 when it never appeared
 *
 * GENERATION-SECONDS runs from the first rename to the last, MAX-SLIP-US is the most a rename came after its
 * scheduled time (the generator's own lateness), OVERFLOWED is 1 when this program's inotify queue overflowed
 * (then the files that appeared meanwhile count as never seen: their times are unknown). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static volatile sig_atomic_t stopping = 0;
static void on_usr1(int signal) { (void)signal; stopping = 1; }

static long count;
static const char *prefix;
static size_t prefix_length;
static double *sent_at, *arrived_at;
static atomic_long sent = 0, arrived = 0;
static atomic_int generating = 1, overflowed = 0;
static double settle;
static int notify;

static void name(char *out, size_t size, long i) { snprintf(out, size, "%s-%06ld.txt", prefix, i); }

/* PREFIX-NNNNNN.txt (or a clash name such as "PREFIX-NNNNNN 2.txt") -> NNNNNN, else -1. */
static long index_of(const char *file) {
    if (strncmp(file, prefix, prefix_length) != 0 || file[prefix_length] != '-') return -1;
    char *end;
    long i = strtol(file + prefix_length + 1, &end, 10);
    return end == file + prefix_length + 1 || i < 0 || i >= count ? -1 : i;
}

static void *receive(void *unused) {
    (void)unused;
    static char buffer[1 << 16] __attribute__((aligned(__alignof__(struct inotify_event))));
    double progress = now();
    while (1) {
        long done = atomic_load(&arrived);
        if (!atomic_load(&generating) && done >= atomic_load(&sent)) break;
        if (!atomic_load(&generating) && now() - progress >= settle) break;
        struct pollfd ready = {.fd = notify, .events = POLLIN};
        if (poll(&ready, 1, 50) <= 0) continue;
        ssize_t length = read(notify, buffer, sizeof buffer);
        if (length < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            perror("read");
            break;
        }
        double t = now();
        for (char *p = buffer; p < buffer + length;) {
            struct inotify_event *event = (struct inotify_event *)p;
            if (event->mask & IN_Q_OVERFLOW) atomic_store(&overflowed, 1);
            else if (event->len > 0) {
                long i = index_of(event->name);
                if (i >= 0 && arrived_at[i] == 0) {
                    arrived_at[i] = t;
                    atomic_fetch_add(&arrived, 1);
                    progress = t;
                }
            }
            p += sizeof(struct inotify_event) + event->len;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: pace INTERVAL_US COUNT PREFIX STAGING SIZE SETTLE INBOX...\n");
        return 64;
    }
    long interval = atol(argv[1]);
    count = atol(argv[2]);
    prefix = argv[3];
    prefix_length = strlen(prefix);
    long size = atol(argv[5]);
    settle = atof(argv[6]);
    int inboxes = argc - 7;
    int staging = open(argv[4], O_RDONLY | O_DIRECTORY);
    if (staging < 0) { perror(argv[4]); return 1; }
    int *targets = malloc(sizeof(int) * inboxes);
    notify = inotify_init1(IN_NONBLOCK);
    if (notify < 0) { perror("inotify_init1"); return 1; }
    for (int k = 0; k < inboxes; k++) {
        targets[k] = open(argv[7 + k], O_RDONLY | O_DIRECTORY);
        char *copy = strdup(argv[7 + k]);
        const char *documents = dirname(copy);
        if (targets[k] < 0 || inotify_add_watch(notify, documents, IN_MOVED_TO | IN_CREATE) < 0) {
            perror(argv[7 + k]);
            return 1;
        }
        free(copy);
    }
    char *body = malloc(size + 1);
    for (long i = 0; i < count; i++) {
        char file[256];
        name(file, sizeof file, i);
        long n = snprintf(body, size + 1, "Paced file %06ld of %ld\n", i, count);
        for (long j = n; j < size; j++) body[j] = (j % 64 == 63) ? '\n' : 'a' + (int)((i + j) % 26);
        int fd = openat(staging, file, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || write(fd, body, size) != size || close(fd) != 0) { perror(file); return 1; }
    }
    sent_at = calloc(count, sizeof(double));
    arrived_at = calloc(count, sizeof(double));
    struct sigaction action = {0};
    action.sa_handler = on_usr1;
    sigaction(SIGUSR1, &action, NULL);
    prctl(PR_SET_TIMERSLACK, 1UL);  /* wake at the scheduled time, not up to 50 µs later */
    pthread_t receiver;
    pthread_create(&receiver, NULL, receive, NULL);
    printf("ready\n");
    fflush(stdout);
    char go[16];
    if (!fgets(go, sizeof go, stdin)) return 1; /* the caller had its say: "go" */

    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    double max_slip = 0;
    for (long i = 0; i < count && !stopping; i++) {
        long long at = (long long)start.tv_nsec + 1000000LL + (long long)i * interval * 1000LL;
        struct timespec due = {.tv_sec = start.tv_sec + at / 1000000000LL, .tv_nsec = at % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR && !stopping) {}
        if (stopping) break;
        char file[256];
        name(file, sizeof file, i);
        double t = now();
        double slip = t - (due.tv_sec + due.tv_nsec / 1e9);
        if (slip > max_slip) max_slip = slip;
        sent_at[i] = t;
        if (renameat(staging, file, targets[i % inboxes], file) != 0) { perror(file); return 1; }
        atomic_store(&sent, i + 1);
    }
    atomic_store(&generating, 0);
    pthread_join(receiver, NULL);

    long total = atomic_load(&sent);
    double seconds = total > 1 ? sent_at[total - 1] - sent_at[0] : 0;
    printf("%ld %ld %.6f %.0f %d\n", total, atomic_load(&arrived), seconds, max_slip * 1e6, atomic_load(&overflowed));
    for (long i = 0; i < total; i++) {
        if (arrived_at[i] > 0) printf("%.1f\n", (arrived_at[i] - sent_at[i]) * 1e6);
        else printf("-1\n");
    }
    return 0;
}
