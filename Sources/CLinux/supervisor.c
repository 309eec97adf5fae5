// The hook supervisor (ARCHITECTURE.md, "The hook sandbox"): a process between the runner and the hook that
// kills every descendant of the hook, however it detached, once the hook has exited or the runner has let go
// of the control socket (timed out, or died).
//
// It is forked from a process with other threads, whose locks (malloc's among them) may be held at that
// moment: from the fork to execve or _exit, only async-signal-safe calls, no malloc, no stdio.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "CLinux.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/// The soft limit on open descriptors before `inbox_raise_open_file_limit` raised it (0 while it has not): each
/// hook gets it back, as programs that use select() expect no descriptor past 1023.
static rlim_t children_open_file_limit;

int inbox_raise_open_file_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    // An unlimited hard limit cannot be the soft one: the kernel takes at most fs.nr_open (2^20 by default).
    rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : limit.rlim_max;
    if (limit.rlim_cur >= wanted) return 0;
    rlim_t before = limit.rlim_cur;
    limit.rlim_cur = wanted;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    rlim_t unset = 0;
    __atomic_compare_exchange_n(&children_open_file_limit, &unset, before, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return 0;
}

/// Gives the soft limit on open descriptors back what it was before this process raised it.
static void restore_open_file_limit(void) {
    rlim_t soft = __atomic_load_n(&children_open_file_limit, __ATOMIC_RELAXED);
    struct rlimit limit;
    if (soft == 0 || getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    limit.rlim_cur = soft;
    (void)setrlimit(RLIMIT_NOFILE, &limit);  // left higher, the hook still runs
}

/// Closes the descriptors from `low` to `high`: close_range, or one by one where the kernel lacks it (< 5.9).
static void close_between(unsigned int low, unsigned int high) {
    if (low > high || syscall(SYS_close_range, low, high, 0) == 0) return;
    struct rlimit limit;
    unsigned int end = 1u << 20;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < end) end = (unsigned int)limit.rlim_cur;
    for (unsigned int fd = low; fd <= high && fd < end; fd++) close((int)fd);
}

/// Closes every descriptor but the `count` in `keep` (distinct, at most 4).
static void close_all_but(const int keep[], int count) {
    int sorted[4];
    for (int i = 0; i < count; i++) {
        int j = i;
        for (; j > 0 && sorted[j - 1] > keep[i]; j--) sorted[j] = sorted[j - 1];
        sorted[j] = keep[i];
    }
    unsigned int low = 0;
    for (int i = 0; i < count; i++) {
        if ((unsigned int)sorted[i] > low) close_between(low, (unsigned int)sorted[i] - 1);
        low = (unsigned int)sorted[i] + 1;
    }
    close_between(low, ~0u);
}

/// The hook: its own process group, the three streams as 0, 1 and 2 and no other descriptor, default handlers
/// and an empty mask for every signal, then `/bin/sh -c CMD`.
static void run_hook(const char *path, char *const argv[], char *const envp[], const int streams[3]) {
    setpgid(0, 0);
    for (int fd = 0; fd < 3; fd++) {
        if (dup2(streams[fd], fd) == -1) _exit(127);
    }
    close_between(3, ~0u);
    restore_open_file_limit();
    // The raw call: glibc's sigaction refuses its own two signals (32, 33), which the runner may have ignored,
    // and an ignored signal stays ignored across execve. All zeros: SIG_DFL, no flags, an empty mask (the
    // kernel's struct sigaction, 8-byte sigset). SIGKILL and SIGSTOP are refused, and always default.
    const unsigned long standard[4] = {0};
    for (int number = 1; number < NSIG; number++) syscall(SYS_rt_sigaction, number, standard, NULL, 8);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(path, argv, envp);
    static const char message[] = "inbox: cannot run /bin/sh\n";
    (void)!write(2, message, sizeof message - 1);
    _exit(127);
}

/// Reaps the orphans of the hook that have exited (this process is their subreaper); whether the hook itself
/// has. The hook is left unreaped, so that its pid and group id stay its own.
static int hook_has_exited(pid_t hook) {
    for (;;) {
        siginfo_t info = {0};
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == -1 || info.si_pid == 0) return 0;
        if (info.si_pid == hook) return 1;
        waitpid(info.si_pid, NULL, 0);
    }
}

/// Waits until the hook has exited or the control socket has an event: end of file, as the runner shut it
/// down or died.
static void wait_for_hook_or_runner(pid_t hook, int control) {
    struct pollfd fds[2] = {
        {.fd = control, .events = POLLIN},
        {.fd = (int)syscall(SYS_pidfd_open, hook, 0), .events = POLLIN},
    };
    // Without a pidfd (Linux < 5.3) the hook's exit is looked for every 50 ms; with one, orphans are reaped
    // every second.
    while (!hook_has_exited(hook)) {
        if (poll(fds, 2, fds[1].fd >= 0 ? 1000 : 50) > 0 && fds[0].revents != 0) break;
    }
    if (fds[1].fd >= 0) close(fds[1].fd);
}

/// Sends SIGKILL to every child of this process (single-threaded: its thread's children are all of them);
/// -1 where the kernel keeps no children list (CONFIG_PROC_CHILDREN).
static int kill_children(void) {
    int fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
    if (fd == -1) return -1;
    char buffer[512];
    pid_t pid = 0;
    ssize_t count;
    while ((count = read(fd, buffer, sizeof buffer)) > 0) {
        for (ssize_t i = 0; i < count; i++) {
            if (buffer[i] >= '0' && buffer[i] <= '9') {
                pid = pid * 10 + (buffer[i] - '0');
            } else {
                if (pid > 0) kill(pid, SIGKILL);
                pid = 0;
            }
        }
    }
    if (pid > 0) kill(pid, SIGKILL);
    close(fd);
    return count == -1 ? -1 : 0;
}

/// Kills every descendant of this process and reaps it; the hook's wait status. The children of a killed
/// process re-parent here (the subreaper) before it can be reaped, so each reap is followed by a new round of
/// kills, and the loop ends once no process is left below this one.
static int kill_descendants(pid_t hook) {
    int status = 0;
    if (kill_children() == -1) {
        // No children list: the hook's process group at least, as before the supervisor.
        kill(-hook, SIGKILL);
        kill(hook, SIGKILL);
        waitpid(hook, &status, 0);
        return status;
    }
    for (;;) {
        int wait_status;
        pid_t pid = waitpid(-1, &wait_status, 0);
        if (pid == -1) return status;  // ECHILD: none left (every signal is blocked: no EINTR)
        if (pid == hook) status = wait_status;
        kill_children();
    }
}

/// Sends the runner 4 bytes; it may be gone (EPIPE, and no SIGPIPE).
static void report(int control, int32_t value) {
    (void)!send(control, &value, sizeof value, MSG_NOSIGNAL);
}

/// The supervisor process: every signal blocked (from the fork on), so that it ends only once its work is done.
static void supervise(const char *path, char *const argv[], char *const envp[], const int streams[3], int control) {
    const int keep[4] = {streams[0], streams[1], streams[2], control};
    close_all_but(keep, 4);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == -1) {
        report(control, -errno);
        _exit(0);
    }
    pid_t hook = _Fork();
    if (hook == -1) {
        report(control, -errno);
        _exit(0);
    }
    if (hook == 0) run_hook(path, argv, envp, streams);
    // Only the hook and what it starts hold its output pipes now.
    close_all_but(&control, 1);
    wait_for_hook_or_runner(hook, control);
    report(control, kill_descendants(hook));
    _exit(0);
}

pid_t inbox_spawn_supervised(const char *path, char *const argv[], char *const envp[], int stdin_fd, int stdout_fd,
                             int stderr_fd, int control_fd) {
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    // _Fork: the async-signal-safe fork, which runs no atfork handlers.
    pid_t pid = _Fork();
    if (pid == 0) {
        const int streams[3] = {stdin_fd, stdout_fd, stderr_fd};
        supervise(path, argv, envp, streams, control_fd);
    }
    int error = errno;
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    errno = error;
    return pid;
}
