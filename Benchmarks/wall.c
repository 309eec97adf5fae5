/* The command timer of run-bench: the wall time of each of a list of commands, run one after another.
 *
 *   wall LIST      LIST: one command a line, its arguments separated by tabs (the program a path)
 *
 * Each command is started with posix_spawn (standard input, output and error /dev/null) once the one before has
 * been reaped, and timed on CLOCK_MONOTONIC from just before the spawn to just after the reap. Prints one line per
 * command: "MICROSECONDS STATUS" (a signal is 128 + its number).
 *
 * Why C: a fork and exec from python3 costs about a millisecond of its own, as much as the commands measured. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_ARGS 64

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: wall LIST\n"); return 64; }
    FILE *list = fopen(argv[1], "r");
    if (!list) { perror(argv[1]); return 1; }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, list)) > 0) {
        if (line[length - 1] == '\n') line[length - 1] = '\0';
        if (line[0] == '\0') continue;
        char *args[MAX_ARGS + 1];
        int n = 0;
        for (char *field = strtok(line, "\t"); field && n < MAX_ARGS; field = strtok(NULL, "\t")) args[n++] = field;
        args[n] = NULL;
        pid_t pid;
        double start = now();
        if (posix_spawn(&pid, args[0], &actions, NULL, args, environ) != 0) { perror(args[0]); return 1; }
        int status;
        if (waitpid(pid, &status, 0) < 0) { perror("waitpid"); return 1; }
        double end = now();
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        printf("%.1f %d\n", (end - start) * 1e6, code);
    }
    return 0;
}
