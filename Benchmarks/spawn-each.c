// The driver of Benchmarks/run-mail-bench: runs commands one after another, as an MTA runs a delivery agent for
// each message, and says what they cost.
//
// Usage: spawn-each LIST STDOUT STDERR [TIMES]
//   LIST    one command a line, its arguments separated by tabs (the program a path); a last field `<PATH` is
//           not an argument but the file the command reads as its standard input (an MTA's message)
//   STDOUT  where every command's standard output goes (truncated first), /dev/null for none
//   STDERR  where every command's standard error is appended
//   TIMES   when given, one line a command is written there: "MICROSECONDS STATUS", the wall time on
//           CLOCK_MONOTONIC from just before its spawn to just after its reap (run-bench's command-line rows)
// Each command starts (posix_spawn, standard input /dev/null or its `<PATH`) once the one before has been reaped
// (wait4).
// Prints one JSON line: {"commands", "seconds" (from the first start to the last reap), "max_rss_kib" (the largest
// ru_maxrss of one command), "cpu_seconds" (user + system, summed), "exits" ({status: count} but 0; a signal
// is 128 + its number)}.
//
// Why C: Linux carries a process's peak RSS over exec (the hiwater of the memory it replaced, the parent's for a
// vfork), so a command started by python3 reports at least python3's own RSS. This driver stays near 1 MiB: it
// holds one line of LIST at a time.
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: spawn-each LIST STDOUT STDERR [TIMES]\n");
        return 64;
    }
    FILE *times = NULL;
    if (argc == 5 && !(times = fopen(argv[4], "w"))) {
        perror(argv[4]);
        return 73;
    }
    FILE *list = fopen(argv[1], "r");
    if (!list) {
        perror(argv[1]);
        return 66;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (strcmp(argv[2], "/dev/null") != 0) {
        int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            perror(argv[2]);
            return 73;
        }
        close(fd);
    }

    static long exits[128 + 65];
    long commands = 0, max_rss = 0;
    double cpu = 0, start = now();
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &capacity, list)) > 0) {
        if (line[length - 1] == '\n')
            line[--length] = 0;
        if (length == 0)
            continue;
        char *args[MAX_ARGS + 1];
        int n = 0;
        for (char *save = NULL, *arg = strtok_r(line, "\t", &save); arg && n < MAX_ARGS;
             arg = strtok_r(NULL, "\t", &save))
            args[n++] = arg;
        posix_spawn_file_actions_t fed, *used = &actions;
        if (n > 1 && args[n - 1][0] == '<') {
            posix_spawn_file_actions_init(&fed);
            posix_spawn_file_actions_addopen(&fed, 0, args[n - 1] + 1, O_RDONLY, 0);
            posix_spawn_file_actions_addopen(&fed, 1, argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
            posix_spawn_file_actions_addopen(&fed, 2, argv[3], O_WRONLY | O_CREAT | O_APPEND, 0644);
            used = &fed;
            n--;
        }
        args[n] = NULL;
        pid_t pid;
        double began = now();
        int error = posix_spawn(&pid, args[0], used, NULL, args, environ);
        if (used == &fed)
            posix_spawn_file_actions_destroy(&fed);
        if (error) {
            fprintf(stderr, "spawn-each: %s: %s\n", args[0], strerror(error));
            return 71;
        }
        int status;
        struct rusage usage;
        if (wait4(pid, &status, 0, &usage) != pid) {
            perror("spawn-each: wait4");
            return 71;
        }
        if (times)
            fprintf(times, "%.1f %d\n", (now() - began) * 1e6,
                    WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        commands++;
        if (usage.ru_maxrss > max_rss)
            max_rss = usage.ru_maxrss;
        cpu += usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
               usage.ru_stime.tv_usec / 1e6;
        if (WIFEXITED(status))
            exits[WEXITSTATUS(status)]++;
        else if (WIFSIGNALED(status) && WTERMSIG(status) <= 64)
            exits[128 + WTERMSIG(status)]++;
    }
    double seconds = now() - start;
    printf("{\"commands\": %ld, \"seconds\": %.6f, \"max_rss_kib\": %ld, \"cpu_seconds\": %.3f, \"exits\": {", commands,
           seconds, max_rss, cpu);
    const char *comma = "";
    for (int s = 1; s < 128 + 65; s++)
        if (exits[s]) {
            printf("%s\"%d\": %ld", comma, s, exits[s]);
            comma = ", ";
        }
    printf("}}\n");
    if (times && fclose(times) != 0) {
        perror(argv[4]);
        return 74;
    }
    return 0;
}
