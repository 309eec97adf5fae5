/* The speed ceiling of run-bench: inotify and rename(2) in a loop, nothing else (no log, no fsync, no
 * checks). On IN_Q_OVERFLOW it lists the Inbox and moves what it finds, so that it loses nothing.
 *
 *   cmover INBOX DOCUMENTS    prints "ready" once the Inbox is watched; stops on SIGTERM */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

static volatile sig_atomic_t stopping = 0;
static void on_term(int signal) { (void)signal; stopping = 1; }

static int inbox, documents;

static void move(const char *name) {
    if (name[0] == '.') return;
    renameat(inbox, name, documents, name); /* ENOENT: moved already (a scan and an event both saw it) */
}

static void scan(const char *path) {
    DIR *dir = opendir(path);
    if (!dir) return;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_type == DT_REG || entry->d_type == DT_UNKNOWN) move(entry->d_name);
    }
    closedir(dir);
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: cmover INBOX DOCUMENTS\n"); return 64; }
    struct sigaction action = {0};
    action.sa_handler = on_term;
    sigaction(SIGTERM, &action, NULL);
    inbox = open(argv[1], O_RDONLY | O_DIRECTORY);
    documents = open(argv[2], O_RDONLY | O_DIRECTORY);
    int fd = inotify_init1(0);
    if (inbox < 0 || documents < 0 || fd < 0 || inotify_add_watch(fd, argv[1], IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
        perror("cmover");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    scan(argv[1]);
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
            if (event->mask & IN_Q_OVERFLOW) scan(argv[1]);
            else if (event->len > 0) move(event->name);
            p += sizeof(struct inotify_event) + event->len;
        }
    }
    return 0;
}
