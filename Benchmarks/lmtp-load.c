// The load driver of the LMTP row of Benchmarks/run-mail-bench (Benchmarks/lmtp_bench.py): sends a list of messages
// to an LMTP server (RFC 2033) over N concurrent sessions, the same bytes whatever the server, and says how it went.
//
// Usage: lmtp-load ADDRESS SESSIONS RECIPIENT LIST
//   ADDRESS    unix:PATH or inet:HOST:PORT (an IPv4 address)
//   SESSIONS   how many connections at once (threads, one a session)
//   RECIPIENT  the RCPT TO address of every message
//   LIST       one message file a line; each is read before the clock starts, its line ends made CRLF and its
//              lines starting with '.' dot-stuffed
// Each session connects, reads the greeting, sends LHLO, then takes the next message not yet taken (one counter for
// all sessions) and sends MAIL FROM, RCPT TO, DATA, the data and the final dot, each command waiting for its reply
// (no PIPELINING: one request, one response), until none is left; then QUIT. A session whose connection breaks
// stops; its message counts as failed.
// Prints one JSON line: {"sessions", "messages", "sent" (data answered), "accepted" (2xx after the data),
// "seconds" (from before the first connect to the last QUIT answered), "replies" ({code after the data: count}),
// "latency_ms" ({p50, p99, max}: MAIL FROM sent to the reply after the data), "first_error"}.
// Exit status 0 when it ran (whatever the server answered), 64 usage, 66 a message unreadable, 69 no connection.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char *data;  // CRLF line ends, dot-stuffed, ending with "\r\n.\r\n"
    size_t length;
} Message;

static Message *messages;
static size_t message_count;
static atomic_size_t next_message;
static const char *address, *recipient;
static double *latency;  // per message, in ms; -1 when not answered
static int *final_code;  // per message: the reply after the data, 0 when none
static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char first_error[640];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void note_error(const char *format, const char *detail) {
    pthread_mutex_lock(&error_lock);
    if (!first_error[0])
        snprintf(first_error, sizeof first_error, format, detail);
    pthread_mutex_unlock(&error_lock);
}

// Reads a message file into the wire form: every line ended by CRLF (a bare LF becomes CRLF), a line starting with
// '.' given another, then the end of the data.
static int load(const char *path, Message *out) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t capacity = 1 << 15, length = 0;
    char *data = malloc(capacity);
    int c, at_line_start = 1, previous = 0;
    while ((c = getc(f)) != EOF) {
        if (length + 8 > capacity)
            data = realloc(data, capacity *= 2);
        if (at_line_start && c == '.')
            data[length++] = '.';
        if (c == '\n' && previous != '\r')
            data[length++] = '\r';
        data[length++] = (char)c;
        at_line_start = c == '\n';
        previous = c;
    }
    fclose(f);
    if (length + 8 > capacity)
        data = realloc(data, capacity + 8);
    if (!at_line_start) {
        data[length++] = '\r';
        data[length++] = '\n';
    }
    memcpy(data + length, ".\r\n", 3);
    out->data = data;
    out->length = length + 3;
    return 0;
}

typedef struct {
    int fd;
    char buffer[4096];
    size_t start, end;
} Session;

static int connect_to(const char *where) {
    if (strncmp(where, "unix:", 5) == 0) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        if (strlen(where + 5) >= sizeof sun.sun_path)
            return -1;
        strcpy(sun.sun_path, where + 5);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0)
            return fd;
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (strncmp(where, "inet:", 5) == 0) {
        char host[64];
        const char *colon = strrchr(where + 5, ':');
        if (!colon || (size_t)(colon - where - 5) >= sizeof host)
            return -1;
        memcpy(host, where + 5, colon - where - 5);
        host[colon - where - 5] = 0;
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(colon + 1))};
        if (inet_pton(AF_INET, host, &sin.sin_addr) != 1)
            return -1;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
        if (fd < 0)
            return -1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0)
            return fd;
        close(fd);
    }
    return -1;
}

static int send_all(Session *s, const char *data, size_t length) {
    while (length) {
        ssize_t n = send(s->fd, data, length, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        length -= (size_t)n;
    }
    return 0;
}

// Reads one reply (its continuation lines "250-..." too) and returns its code, or -1 when the connection ended.
// The last line goes to `line` for an error message.
static int read_reply(Session *s, char *line, size_t line_size) {
    for (;;) {
        size_t used = 0;
        for (;;) {
            if (s->start == s->end) {
                ssize_t n = recv(s->fd, s->buffer, sizeof s->buffer, 0);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0)
                    return -1;
                s->start = 0;
                s->end = (size_t)n;
            }
            char c = s->buffer[s->start++];
            if (c == '\n')
                break;
            if (c != '\r' && used + 1 < line_size)
                line[used++] = c;
        }
        line[used] = 0;
        if (used < 3)
            return -1;
        if (used == 3 || line[3] == ' ')
            return atoi(line);
        // "250-PIPELINING": more lines follow
    }
}

// Sends a command and reads its reply; returns the reply's code, or -1.
static int command(Session *s, const char *text, char *line, size_t line_size) {
    if (send_all(s, text, strlen(text)) != 0)
        return -1;
    return read_reply(s, line, line_size);
}

static void *session(void *unused) {
    (void)unused;
    Session s = {.fd = connect_to(address)};
    char line[512] = "", text[600];
    if (s.fd < 0) {
        note_error("connect: %s", strerror(errno));
        return NULL;
    }
    if (read_reply(&s, line, sizeof line) != 220 || command(&s, "LHLO bench.example.net\r\n", line, sizeof line) != 250) {
        note_error("greeting or LHLO: %s", line);
        close(s.fd);
        return NULL;
    }
    for (;;) {
        size_t i = atomic_fetch_add(&next_message, 1);
        if (i >= message_count)
            break;
        double began = now();
        int code = command(&s, "MAIL FROM:<sender@example.org>\r\n", line, sizeof line);
        if (code == 250) {
            snprintf(text, sizeof text, "RCPT TO:<%s>\r\n", recipient);
            code = command(&s, text, line, sizeof line);
        }
        if (code == 250)
            code = command(&s, "DATA\r\n", line, sizeof line);
        if (code == 354) {
            if (send_all(&s, messages[i].data, messages[i].length) != 0)
                code = -1;
            else
                final_code[i] = code = read_reply(&s, line, sizeof line);
            latency[i] = (now() - began) * 1e3;
            if (code < 200 || code > 299)
                note_error("after the data: %s", code < 0 ? "connection lost" : line);
        } else if (code > 0) {
            note_error("before the data: %s", line);
            if (command(&s, "RSET\r\n", line, sizeof line) != 250)
                code = -1;
        }
        if (code < 0) {
            note_error("%s", "connection lost");
            close(s.fd);
            return NULL;
        }
    }
    command(&s, "QUIT\r\n", line, sizeof line);
    close(s.fd);
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 5 || atoi(argv[2]) < 1) {
        fprintf(stderr, "usage: lmtp-load unix:PATH|inet:HOST:PORT SESSIONS RECIPIENT LIST\n");
        return 64;
    }
    address = argv[1];
    recipient = argv[3];
    int sessions = atoi(argv[2]);
    FILE *list = fopen(argv[4], "r");
    if (!list) {
        perror(argv[4]);
        return 66;
    }
    size_t capacity = 1024;
    messages = malloc(capacity * sizeof *messages);
    char *line = NULL;
    size_t line_capacity = 0;
    ssize_t length;
    while ((length = getline(&line, &line_capacity, list)) > 0) {
        if (line[length - 1] == '\n')
            line[--length] = 0;
        if (!length)
            continue;
        if (message_count == capacity)
            messages = realloc(messages, (capacity *= 2) * sizeof *messages);
        if (load(line, &messages[message_count++]) != 0) {
            perror(line);
            return 66;
        }
    }
    fclose(list);
    latency = malloc(message_count * sizeof *latency);
    final_code = calloc(message_count, sizeof *final_code);
    for (size_t i = 0; i < message_count; i++)
        latency[i] = -1;

    pthread_t *threads = malloc(sessions * sizeof *threads);
    double start = now();
    for (int i = 0; i < sessions; i++)
        if (pthread_create(&threads[i], NULL, session, NULL) != 0) {
            perror("pthread_create");
            return 71;
        }
    for (int i = 0; i < sessions; i++)
        pthread_join(threads[i], NULL);
    double seconds = now() - start;

    // What came back: the code after each message's data, and the latencies of those answered.
    static long codes[600];
    size_t sent = 0, accepted = 0;
    double *answered = malloc((message_count + 1) * sizeof *answered);
    for (size_t i = 0; i < message_count; i++) {
        if (final_code[i] > 0 && final_code[i] < 600) {
            codes[final_code[i]]++;
            accepted += final_code[i] >= 200 && final_code[i] < 300;
            answered[sent++] = latency[i];
        }
    }
    qsort(answered, sent, sizeof *answered, by_value);
    double p50 = sent ? answered[sent / 2] : 0, p99 = sent ? answered[sent * 99 / 100] : 0,
           max = sent ? answered[sent - 1] : 0;
    printf("{\"sessions\": %d, \"messages\": %zu, \"sent\": %zu, \"accepted\": %zu, \"seconds\": %.6f, \"replies\": {",
           sessions, message_count, sent, accepted, seconds);
    const char *comma = "";
    for (int c = 1; c < 600; c++)
        if (codes[c]) {
            printf("%s\"%d\": %ld", comma, c, codes[c]);
            comma = ", ";
        }
    printf("}, \"latency_ms\": {\"p50\": %.3f, \"p99\": %.3f, \"max\": %.3f}, \"first_error\": ", p50, p99, max);
    if (first_error[0]) {
        putchar('"');
        for (const char *p = first_error; *p; p++)
            if (*p == '"' || *p == '\\')
                printf("\\%c", *p);
            else if ((unsigned char)*p >= 0x20)
                putchar(*p);
        putchar('"');
    } else {
        printf("null");
    }
    printf("}\n");
    return sent == 0 && message_count > 0 ? 69 : 0;
}
