/* The floor under the quiet container's row (README.md, "Benchmark"): one file renamed between two folders of its
 * own every 10 ms, each rename timed, beside whatever else runs (a burst moved by `inbox watch` or the C mover).
 * No inotify and no watcher on its path: only the kernel's rename and the scheduler's wake.
 *
 *   quiet-rename A B COUNT    A and B folders on the burst's filesystem; prints the p50, p99 and max of the
 *                             renames and of how late each 10 ms sleep woke, in ms */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int ascending(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *values, int count) {
    qsort(values, count, sizeof *values, ascending);
    printf("%s p50 %.3f p99 %.3f max %.3f ms", what, values[count / 2] * 1e3, values[count * 99 / 100] * 1e3,
           values[count - 1] * 1e3);
}

int main(int argc, char **argv) {
    if (argc != 4 || atoi(argv[3]) < 1) { fprintf(stderr, "usage: quiet-rename A B COUNT\n"); return 64; }
    int a = open(argv[1], O_RDONLY | O_DIRECTORY), b = open(argv[2], O_RDONLY | O_DIRECTORY);
    int count = atoi(argv[3]);
    int file = a < 0 ? -1 : openat(a, "quiet", O_CREAT | O_WRONLY, 0644);
    if (b < 0 || file < 0) { perror("quiet-rename"); return 1; }
    close(file);
    double *renames = malloc(count * sizeof(double)), *late = malloc(count * sizeof(double));
    for (int i = 0; i < count; i++) {
        double due = now() + 0.010;
        struct timespec pause = {0, 10000000};
        nanosleep(&pause, NULL);
        double start = now();
        late[i] = start - due;
        if (renameat(i % 2 ? b : a, "quiet", i % 2 ? a : b, "quiet") != 0) { perror("rename"); return 1; }
        renames[i] = now() - start;
    }
    report("rename", renames, count);
    printf("; ");
    report("wake late", late, count);
    printf("\n");
    return 0;
}
