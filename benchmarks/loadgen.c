/*
 * loadgen — tiny Kafka requests, pipelined over K connections, as fast as the server answers.
 *
 * Why C: the broker under test is one Python process; a Python client would be slower than
 * it and would measure itself. One thread with epoll drives every connection (loopback only).
 *
 * Each connection keeps `depth` identical requests in flight: one written for every response
 * read, so the server always has work queued in its socket buffer. A server that answers one
 * request at a time per connection (Kafka's mute, trikafka, the Trio ceiling) still answers
 * them strictly in order; the client only counts response frames (4-byte big-endian size).
 *
 * Phases: connect all K, run `--warmup` seconds uncounted, then count responses for
 * `--seconds` (and at least one) or until `--requests` responses, whichever comes first;
 * everything is bounded by a hard deadline. Prints one JSON line.
 *
 *   loadgen --port 9092 --api apiversions --connections 16 --depth 8 --seconds 5
 *   loadgen --port 9092 --api metadata --topic bench --connections 256
 *   loadgen --port 9092 --api metadata --topic bench --check   # one request, response as hex
 *
 * Frames are built here from the Kafka protocol spec: ApiVersions v3 (request header v2,
 * flexible) or v0-v2 (header v1), and Metadata v12 for one topic (flexible; v10+ carries a
 * zero topic id and a name).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME 512
#define READ_SIZE (256 * 1024)

struct conn {
    int fd;
    int open;
    unsigned char hdr[4];   /* the size prefix being read */
    int hdr_have;
    int64_t body_left;      /* bytes of the current response body still to skip */
    int64_t unsent;         /* request bytes owed to the socket */
    int64_t sent_total;     /* request bytes written so far (position in the frame cycle) */
    int want_out;
    int connecting;         /* a non-blocking connect is under way */
};

static unsigned char frame[MAX_FRAME];
static size_t frame_len;
static unsigned char *cycle;       /* the frame repeated, so one write can carry many */
static size_t cycle_frames, cycle_len;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(2);
}

static size_t put_i16(unsigned char *p, int v) { p[0] = (v >> 8) & 0xff; p[1] = v & 0xff; return 2; }
static size_t put_i32(unsigned char *p, int32_t v) {
    p[0] = (v >> 24) & 0xff; p[1] = (v >> 16) & 0xff; p[2] = (v >> 8) & 0xff; p[3] = v & 0xff;
    return 4;
}
static size_t put_uvarint(unsigned char *p, uint32_t v) {
    size_t n = 0;
    while (v >= 0x80) { p[n++] = (v & 0x7f) | 0x80; v >>= 7; }
    p[n++] = (unsigned char)v;
    return n;
}
static size_t put_compact_string(unsigned char *p, const char *s) {
    size_t len = strlen(s), n = put_uvarint(p, (uint32_t)len + 1);
    memcpy(p + n, s, len);
    return n + len;
}

/* Request header: v2 (flexible) adds an empty tagged-field buffer after the client id. */
static size_t put_header(unsigned char *p, int api_key, int version, int flexible) {
    static const char client_id[] = "loadgen";
    size_t n = 0;
    n += put_i16(p + n, api_key);
    n += put_i16(p + n, version);
    n += put_i32(p + n, 1);                          /* correlation id */
    n += put_i16(p + n, (int)strlen(client_id));     /* client id: a classic string */
    memcpy(p + n, client_id, strlen(client_id));
    n += strlen(client_id);
    if (flexible) p[n++] = 0;                        /* tagged fields */
    return n;
}

static void build_frame(const char *api, int version, const char *topic) {
    unsigned char *p = frame + 4;
    size_t n = 0;
    if (strcmp(api, "apiversions") == 0) {
        if (version < 0) version = 3;
        n += put_header(p, 18, version, version >= 3);
        if (version >= 3) {
            n += put_compact_string(p + n, "loadgen");   /* client_software_name */
            n += put_compact_string(p + n, "1.0");       /* client_software_version */
            p[n++] = 0;
        }
    } else if (strcmp(api, "metadata") == 0) {
        if (version < 0) version = 12;
        if (version != 12) { fprintf(stderr, "loadgen: only Metadata v12 is built\n"); exit(2); }
        if (strlen(topic) > 249) { fprintf(stderr, "loadgen: topic name too long\n"); exit(2); }
        n += put_header(p, 3, 12, 1);
        n += put_uvarint(p + n, 2);                      /* topics: one (compact array, N+1) */
        memset(p + n, 0, 16);                            /* topic_id: zero uuid */
        n += 16;
        n += put_compact_string(p + n, topic);           /* name */
        p[n++] = 0;                                      /* topic tagged fields */
        p[n++] = 0;                                      /* allow_auto_topic_creation */
        p[n++] = 0;                                      /* include_topic_authorized_operations */
        p[n++] = 0;                                      /* tagged fields */
    } else {
        fprintf(stderr, "loadgen: --api is apiversions or metadata\n");
        exit(2);
    }
    put_i32(frame, (int32_t)n);
    frame_len = n + 4;
}

/* Starts a non-blocking connect; completion is reported by epoll (EPOLLOUT). */
static int connect_loopback(const char *host, int port) {
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "loadgen: --host must be an IPv4 address\n");
        exit(2);
    }
    if ((ntohl(addr.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr, "loadgen: refusing %s: loopback (127.0.0.0/8) only\n", host);
        exit(2);
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS)
        die("connect");
    return fd;
}

/* Write what the connection owes; returns -1 when the connection broke. */
static int flush_conn(struct conn *c) {
    while (c->unsent > 0) {
        size_t offset = (size_t)(c->sent_total % (int64_t)frame_len);
        size_t room = cycle_len - offset;
        size_t want = (size_t)c->unsent < room ? (size_t)c->unsent : room;
        ssize_t w = send(c->fd, cycle + offset, want, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            if (errno == EINTR) continue;
            return -1;
        }
        c->unsent -= w;
        c->sent_total += w;
    }
    return 0;
}

static void set_interest(int ep, struct conn *c, int idx) {
    int want_out = c->unsent > 0 || c->connecting;
    if (want_out == c->want_out) return;
    struct epoll_event ev = {.events = EPOLLIN | (want_out ? EPOLLOUT : 0), .data.u32 = (uint32_t)idx};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = want_out;
}

/* Count whole response frames in `data`; returns how many completed. */
static int64_t consume_bytes(struct conn *c, const unsigned char *data, size_t len,
                             unsigned char *first, size_t *first_len) {
    int64_t done = 0;
    size_t i = 0;
    while (i < len) {
        if (c->hdr_have < 4) {
            c->hdr[c->hdr_have++] = data[i++];
            if (c->hdr_have == 4) {
                c->body_left = ((int64_t)c->hdr[0] << 24) | (c->hdr[1] << 16) | (c->hdr[2] << 8) | c->hdr[3];
                if (first && *first_len == 0) { memcpy(first, c->hdr, 4); *first_len = 4; }
                if (c->body_left == 0) { c->hdr_have = 0; done++; }
            }
            continue;
        }
        size_t take = (size_t)c->body_left < len - i ? (size_t)c->body_left : len - i;
        if (first && *first_len >= 4 && *first_len < 65536) {
            size_t copy = take < 65536 - *first_len ? take : 65536 - *first_len;
            memcpy(first + *first_len, data + i, copy);
            *first_len += copy;
        }
        i += take;
        c->body_left -= take;
        if (c->body_left == 0) { c->hdr_have = 0; done++; }
    }
    return done;
}

static void usage(void) {
    fprintf(stderr,
            "usage: loadgen --port P [--host 127.0.0.1] [--api apiversions|metadata] [--version V]\n"
            "               [--topic T] [--connections K] [--depth D] [--seconds S] [--warmup W]\n"
            "               [--requests N] [--check]\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *host = "127.0.0.1", *api = "apiversions", *topic = "bench";
    int port = 0, connections = 16, depth = 8, version = -1, check = 0;
    double seconds = 5, warmup = 0.5;
    int64_t max_requests = INT64_MAX;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--check") == 0) { check = 1; continue; }
        if (!v) usage();
        i++;
        if (strcmp(a, "--host") == 0) host = v;
        else if (strcmp(a, "--port") == 0) port = atoi(v);
        else if (strcmp(a, "--api") == 0) api = v;
        else if (strcmp(a, "--version") == 0) version = atoi(v);
        else if (strcmp(a, "--topic") == 0) topic = v;
        else if (strcmp(a, "--connections") == 0) connections = atoi(v);
        else if (strcmp(a, "--depth") == 0) depth = atoi(v);
        else if (strcmp(a, "--seconds") == 0) seconds = atof(v);
        else if (strcmp(a, "--warmup") == 0) warmup = atof(v);
        else if (strcmp(a, "--requests") == 0) max_requests = atoll(v);
        else usage();
    }
    if (port <= 0 || connections < 1 || depth < 1 || seconds <= 0 || seconds > 600 || warmup < 0) usage();
    build_frame(api, version, topic);
    if (check) { connections = 1; depth = 1; max_requests = 1; warmup = 0; }

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)connections + 16) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    cycle_frames = (size_t)depth + 1;
    cycle_len = frame_len * cycle_frames;
    cycle = malloc(cycle_len);
    for (size_t k = 0; k < cycle_frames; k++) memcpy(cycle + k * frame_len, frame, frame_len);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct conn *conns = calloc((size_t)connections, sizeof *conns);
    /* Every connect is started at once and completes inside the event loop, so connections
     * already up are served while the rest wait for the server to accept them (the mock
     * accepts slowly under load). Each starts its pipeline as soon as it is up. Counting
     * begins once all are connected and the warm-up has passed. */
    for (int k = 0; k < connections; k++) {
        struct conn *c = &conns[k];
        c->fd = connect_loopback(host, port);
        c->open = 1;
        c->connecting = 1;
        c->want_out = 1;
        c->unsent = (int64_t)frame_len * depth;
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = (uint32_t)k};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    }

    unsigned char *rbuf = malloc(READ_SIZE);
    unsigned char *first = check ? malloc(65536) : NULL;
    size_t first_len = 0;
    struct epoll_event events[256];
    double start = now(), measure_from = start + warmup, stop_at = measure_from + seconds;
    double connect_deadline = start + 15, hard_stop = connect_deadline + warmup + seconds + 5;
    int64_t counted = 0, errors = 0;
    int open = connections, connecting = connections, measuring = 0;

    while (open > 0) {
        double t = now();
        if (!measuring && t >= measure_from && (connecting == 0 || t >= connect_deadline)) {
            measuring = 1;
            measure_from = t;
            stop_at = t + seconds;
        }
        /* At least one response is counted, so a server stalled for the whole window by a
         * busy machine reports a slow rate rather than none (still bounded by hard_stop). */
        if (measuring && ((t >= stop_at && counted > 0) || counted >= max_requests)) break;
        if (t >= hard_stop) break;
        int n = epoll_wait(ep, events, 256, 50);
        if (n < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
        for (int e = 0; e < n; e++) {
            int k = (int)events[e].data.u32;
            struct conn *c = &conns[k];
            if (!c->open) continue;
            int broken = 0;
            if (c->connecting) {
                int err = 0;
                socklen_t len = sizeof err;
                if (!(events[e].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) continue;
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
                c->connecting = 0;
                connecting--;
                if (err) broken = 1;
            }
            if (!broken && (events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                for (;;) {
                    ssize_t r = recv(c->fd, rbuf, READ_SIZE, 0);
                    if (r > 0) {
                        int64_t done = consume_bytes(c, rbuf, (size_t)r, first, &first_len);
                        if (done) {
                            if (measuring) counted += done;
                            c->unsent += done * (int64_t)frame_len;
                        }
                        if (r < READ_SIZE) break;
                        continue;
                    }
                    if (r == 0) { broken = 1; break; }
                    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                    if (errno == EINTR) continue;
                    broken = 1;
                    break;
                }
            }
            if (!broken && flush_conn(c) < 0) broken = 1;
            if (broken) {
                errors++;
                c->open = 0;
                open--;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                continue;
            }
            set_interest(ep, c, k);
        }
    }
    double elapsed = now() - measure_from;
    if (!measuring || elapsed <= 0) elapsed = 1e-9;
    if (check) {
        if (first_len < 4) { fprintf(stderr, "loadgen: no response\n"); return 1; }
        for (size_t i = 0; i < first_len; i++) printf("%02x", first[i]);
        printf("\n");
        return 0;
    }
    printf("{\"api\": \"%s\", \"connections\": %d, \"connected\": %d, \"depth\": %d, "
           "\"requests\": %lld, \"seconds\": %.6f, \"rate\": %.1f, \"errors\": %lld, "
           "\"frame_bytes\": %zu}\n",
           api, connections, connections - connecting, depth, (long long)counted, elapsed,
           counted / elapsed, (long long)errors, frame_len);
    for (int k = 0; k < connections; k++) if (conns[k].open) close(conns[k].fd);
    return errors == connections ? 1 : 0;
}
