/* dist/store.c — the rendezvous store: a key/value server in rank 0's process at its endpoint
 * (as Paddle's gen_nccl_id / torch's TCPStore), reached over TCP by every rank including rank 0.
 * It carries the NCCL unique id and the world check-in. Clients retry the connection until the
 * timeout (rank 0 may start last) and every wait is bounded, so a missing or misconfigured rank
 * is an error on every rank, never a hang.
 *
 * Job identity: a store serves one job. It listens on its endpoint's own address (not every
 * interface), and every connection starts with a hello carrying the client's job token (dgrun's
 * DG_JOB_TOKEN) and rank; the server compares the token before it reads anything else, so a rank
 * of another job started on the same ports is refused (a message on both sides) and can neither
 * read nor change this job's keys. The store keeps serving its own ranks.
 *
 * Wire format, both directions little-endian: hello = u32 magic, u32 token length, token, i32
 * rank; its reply and every reply = i64 status/number, u64 value length, value; request = u8 op,
 * u32 key length, key, u64 value length, value. One server thread per client connection; GET and
 * WAIT block on a condition variable until the key arrives; PEEK answers at once (status 1: absent),
 * for the watchdog, which must not wait on a key a stopped rank never wrote. */
#include "dist_internal.h"
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { OP_SET = 1, OP_GET, OP_ADD, OP_WAIT_GE, OP_PEEK };
#define MAX_KEY 256
#define MAX_VALUE (64u << 20)
#define HELLO_MAGIC 0x31534744u   /* "DGS1" */
#define HELLO_TIMEOUT_S 10        /* a client that connects and says nothing holds a thread this long at most */
enum { HELLO_WELCOME = 0, HELLO_OTHER_JOB = 1 };

typedef struct kv { char *key; void *val; size_t len; } kv;

typedef struct server {
    int listen_fd;
    pthread_t accept_thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    kv *items; size_t n, cap;
    int *clients; pthread_t *threads; size_t nclients, capclients;
    bool stopping;
    char token[DG_STORE_MAX_TOKEN + 1];
    char where[DG_DIST_MAX_ENDPOINT + 8];
    int rank;                   /* the serving rank, for messages */
} server;

struct dg_store {
    int fd;
    double timeout_s;
    char where[DG_DIST_MAX_ENDPOINT + 8];
    int rank;
    char who[32];               /* "rank 1" (or "this client" when the rank is not said), for messages */
    server *srv;
};

double dg_dist_timeout(double given) {
    if (given != DG_FROM_ENV) return given;
    const char *e = getenv("DG_DIST_TIMEOUT");
    double v = e ? atof(e) : 0;
    return v > 0 ? v : 300;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- framing (full reads/writes; false on EOF, error or timeout) ---- */
static bool write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        c += w; n -= (size_t)w;
    }
    return true;
}
static bool read_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n) {
        ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        c += r; n -= (size_t)r;
    }
    return true;
}

/* ---- server ---- */
static kv *find(server *s, const char *key) {
    for (size_t i = 0; i < s->n; i++) if (strcmp(s->items[i].key, key) == 0) return &s->items[i];
    return NULL;
}
static bool put(server *s, const char *key, void *val, size_t len) {
    kv *e = find(s, key);
    if (e) { free(e->val); e->val = val; e->len = len; return true; }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        kv *q = realloc(s->items, sizeof *q * cap);
        if (!q) return false;
        s->items = q; s->cap = cap;
    }
    char *k = strdup(key);
    if (!k) return false;
    s->items[s->n++] = (kv){ k, val, len };
    return true;
}
static int64_t as_int(const kv *e) {
    int64_t v = 0;
    if (e && e->len == sizeof v) memcpy(&v, e->val, sizeof v);
    return v;
}

static bool reply(int fd, int64_t status, const void *val, uint64_t len) {
    return write_all(fd, &status, sizeof status) && write_all(fd, &len, sizeof len) && (!len || write_all(fd, val, len));
}

typedef struct client_arg { server *s; int fd; } client_arg;

/* Equal tokens, in time that does not depend on where they differ. */
static bool same_token(const char *a, size_t alen, const char *b, size_t blen) {
    unsigned char d = alen != blen;
    for (size_t i = 0; i < alen && i < blen; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static void peer_name(int fd, char *buf, size_t len) {
    struct sockaddr_in a;
    socklen_t n = sizeof a;
    char ip[INET_ADDRSTRLEN];
    if (getpeername(fd, (struct sockaddr *)&a, &n) == 0 && inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip))
        snprintf(buf, len, "%s:%d", ip, ntohs(a.sin_port));
    else snprintf(buf, len, "an unknown address");
}

/* The hello: the job token before anything else. true when the client belongs to this job. The
 * refusal is printed here because no caller of this job waits on it: the server thread is the
 * only one that sees another job's rank, and its operator needs to know why its log shows one. */
static bool admit(server *s, int fd) {
    struct timeval tv = { .tv_sec = HELLO_TIMEOUT_S };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint32_t magic = 0, tlen = 0;
    int32_t rank = -1;
    char token[DG_STORE_MAX_TOKEN + 1], peer[64];
    bool ok = read_all(fd, &magic, 4) && magic == HELLO_MAGIC && read_all(fd, &tlen, 4) && tlen <= DG_STORE_MAX_TOKEN &&
              read_all(fd, token, tlen) && read_all(fd, &rank, 4);
    if (!ok) {
        peer_name(fd, peer, sizeof peer);
        fprintf(stderr, "dygraph: store at %s (rank %d) closed a connection from %s that did not introduce itself as a "
                "dygraph rank\n", s->where, s->rank, peer);
        return false;
    }
    if (!same_token(token, tlen, s->token, strlen(s->token))) {
        peer_name(fd, peer, sizeof peer);
        fprintf(stderr, "dygraph: store at %s (rank %d) refused a connection from %s (rank %d of another job: its job token "
                "differs from this job's DG_JOB_TOKEN; two jobs on the same ports?); this job goes on\n",
                s->where, s->rank, peer, (int)rank);
        reply(fd, HELLO_OTHER_JOB, NULL, 0);
        return false;
    }
    tv.tv_sec = 0;   /* from here on a GET or WAIT may block as long as its client allows */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return reply(fd, HELLO_WELCOME, NULL, 0);
}

static void *serve_client(void *argp) {
    client_arg a = *(client_arg *)argp;
    free(argp);
    server *s = a.s;
    if (!admit(s, a.fd)) {
        /* nothing more is read from it; the fd stays open until the server stops, as every client's */
        shutdown(a.fd, SHUT_RDWR);
        return NULL;
    }
    for (;;) {
        uint8_t op; uint32_t klen; uint64_t vlen;
        char key[MAX_KEY + 1];
        if (!read_all(a.fd, &op, 1) || !read_all(a.fd, &klen, 4) || klen > MAX_KEY || !read_all(a.fd, key, klen) ||
            !read_all(a.fd, &vlen, 8) || vlen > MAX_VALUE)
            break;
        key[klen] = 0;
        void *val = vlen ? malloc(vlen) : NULL;
        if ((vlen && !val) || (vlen && !read_all(a.fd, val, vlen))) { free(val); break; }
        bool ok = true;
        pthread_mutex_lock(&s->lock);
        if (op == OP_SET) {
            ok = put(s, key, val, vlen);
            if (!ok) free(val);
            pthread_cond_broadcast(&s->changed);
            pthread_mutex_unlock(&s->lock);
            ok = reply(a.fd, ok ? 0 : -1, NULL, 0);
        } else if (op == OP_ADD) {
            int64_t d = 0;
            if (vlen == sizeof d) memcpy(&d, val, sizeof d);
            free(val);
            int64_t v = as_int(find(s, key)) + d;
            int64_t *nv = malloc(sizeof *nv);
            if (nv) { *nv = v; ok = put(s, key, nv, sizeof *nv); if (!ok) free(nv); } else ok = false;
            pthread_cond_broadcast(&s->changed);
            pthread_mutex_unlock(&s->lock);
            ok = reply(a.fd, ok ? v : INT64_MIN, NULL, 0);
        } else if (op == OP_PEEK) {
            free(val);
            kv *e = find(s, key);
            size_t len = e ? e->len : 0;
            void *copy = len ? malloc(len) : NULL;
            if (copy) memcpy(copy, e->val, len);
            pthread_mutex_unlock(&s->lock);
            ok = (len && !copy) ? reply(a.fd, -1, NULL, 0) : reply(a.fd, e ? 0 : 1, copy, len);
            free(copy);
        } else if (op == OP_GET || op == OP_WAIT_GE) {
            int64_t target = 0;
            if (op == OP_WAIT_GE && vlen == sizeof target) memcpy(&target, val, sizeof target);
            free(val);
            kv *e;
            /* the client bounds the wait with its receive timeout and closes on expiry */
            while (!s->stopping && (!(e = find(s, key)) || (op == OP_WAIT_GE && as_int(e) < target)))
                pthread_cond_wait(&s->changed, &s->lock);
            if (s->stopping) { pthread_mutex_unlock(&s->lock); break; }
            void *copy = e->len ? malloc(e->len) : NULL;
            size_t len = e->len;
            if (copy) memcpy(copy, e->val, len);
            int64_t v = as_int(e);
            pthread_mutex_unlock(&s->lock);
            ok = (len && !copy) ? reply(a.fd, -1, NULL, 0) : reply(a.fd, op == OP_WAIT_GE ? v : 0, copy, len);
            free(copy);
        } else {
            pthread_mutex_unlock(&s->lock);
            free(val);
            break;
        }
        if (!ok) break;
    }
    return NULL;
}

static void *accept_loop(void *argp) {
    server *s = argp;
    for (;;) {
        int fd = accept(s->listen_fd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            break;   /* the listening socket was shut down: stop */
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pthread_mutex_lock(&s->lock);
        bool room = true;
        if (s->nclients == s->capclients) {
            size_t cap = s->capclients ? s->capclients * 2 : 16;
            int *c = realloc(s->clients, sizeof *c * cap);
            if (c) s->clients = c;
            pthread_t *t = c ? realloc(s->threads, sizeof *t * cap) : NULL;
            if (t) { s->threads = t; s->capclients = cap; }
            room = c && t;
        }
        client_arg *a = room && !s->stopping ? malloc(sizeof *a) : NULL;
        if (a) {
            *a = (client_arg){ s, fd };
            if (pthread_create(&s->threads[s->nclients], NULL, serve_client, a) == 0) s->clients[s->nclients++] = fd;
            else { free(a); a = NULL; }
        }
        pthread_mutex_unlock(&s->lock);
        if (!a) close(fd);
    }
    return NULL;
}

static void server_free(server *s) {
    if (!s) return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    shutdown(s->listen_fd, SHUT_RDWR);
    pthread_join(s->accept_thread, NULL);
    close(s->listen_fd);
    for (size_t i = 0; i < s->nclients; i++) shutdown(s->clients[i], SHUT_RDWR);
    for (size_t i = 0; i < s->nclients; i++) { pthread_join(s->threads[i], NULL); close(s->clients[i]); }
    for (size_t i = 0; i < s->n; i++) { free(s->items[i].key); free(s->items[i].val); }
    free(s->items); free(s->clients); free(s->threads);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->changed);
    free(s);
}

/* Listens on host's own address: the endpoint names the interface the job's ranks reach, and a
 * store on every interface would also take connections the job never meant to accept. */
static server *server_new(const char *host, int port, const char *where, const char *token, int rank) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
    int g = getaddrinfo(host, ps, &hints, &res);
    if (g != 0) {
        DG_ERR(DG_EINVAL, "store: rank %d cannot resolve its own endpoint %s: %s", rank, where, gai_strerror(g));
        return NULL;
    }
    server *s = calloc(1, sizeof *s);
    if (!s) { freeaddrinfo(res); DG_ERR(DG_ENOMEM, "store: out of memory"); return NULL; }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    snprintf(s->token, sizeof s->token, "%s", token);
    snprintf(s->where, sizeof s->where, "%s", where);
    s->rank = rank;
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) { DG_ERR(DG_EIO, "store: socket(): %s", strerror(errno)); freeaddrinfo(res); free(s); return NULL; }
    int one = 1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int bound = bind(s->listen_fd, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    if (bound != 0 || listen(s->listen_fd, 128) != 0) {
        int e = errno;
        if (e == EADDRNOTAVAIL)
            DG_ERR(DG_EIO, "store: rank %d cannot listen on %s: %s (the store's endpoint, rank 0's entry of "
                   "PADDLE_TRAINER_ENDPOINTS, must be an address of this machine)", rank, where, strerror(e));
        else
            DG_ERR(DG_EIO, "store: rank %d cannot listen on %s: %s (is another job using port %d?)", rank, where, strerror(e), port);
        close(s->listen_fd);
        free(s);
        return NULL;
    }
    if (pthread_create(&s->accept_thread, NULL, accept_loop, s) != 0) {
        DG_ERR(DG_EIO, "store: cannot start the server thread");
        close(s->listen_fd);
        free(s);
        return NULL;
    }
    return s;
}

/* ---- client ---- */
static int connect_until(const char *host, int port, double deadline, const char *where, double timeout, const char *who) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int last = 0;
    for (;;) {
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
        int g = getaddrinfo(host, ps, &hints, &res);
        if (g != 0) {
            DG_ERR(DG_EINVAL, "store: %s cannot resolve the store's host in %s: %s", who, where, gai_strerror(g));
            return -1;
        }
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            freeaddrinfo(res);
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            return fd;
        }
        last = errno;
        if (fd >= 0) close(fd);
        freeaddrinfo(res);
        if (now_s() >= deadline) {
            DG_ERR(DG_ETIMEOUT, "store: %s: rank 0 at %s not reachable within %.0f s (%s)", who, where, timeout, strerror(last));
            return -1;
        }
        usleep(100 * 1000);   /* rank 0 may still be starting */
    }
}

dg_store_params dg_store_default_params(void) {
    return (dg_store_params){ .params_tag = DG_PARAMS_TAG, .host = NULL, .port = 0, .is_server = false, .timeout_s = DG_FROM_ENV, .token = NULL, .rank = -1 };
}

/* The hello (after the connection's timeouts are set): 0, or an error naming the endpoint and
 * the rank. A refusal is final: the port is taken by another job's store, so retrying could only
 * reach that store again. */
static int hello(dg_store *st, const char *token) {
    uint32_t magic = HELLO_MAGIC, tlen = (uint32_t)strlen(token);
    int32_t rank = st->rank;
    int64_t status = -1;
    uint64_t len = 0;
    const char *who = st->who;
    bool sent = write_all(st->fd, &magic, 4) && write_all(st->fd, &tlen, 4) && write_all(st->fd, token, tlen) &&
                write_all(st->fd, &rank, 4);
    if (!sent || !read_all(st->fd, &status, 8) || !read_all(st->fd, &len, 8) || len != 0) {
        DG_ERR(DG_ECOMM, "store: %s: the store at %s closed the connection before it was admitted (not a dygraph "
               "store of this version, or it is stopping)", who, st->where);
        return DG_ECOMM;
    }
    if (status == HELLO_OTHER_JOB) {
        DG_ERR(DG_ECOMM, "store at %s belongs to another job: it refused %s (its job token differs from this job's "
               "DG_JOB_TOKEN%s). Two jobs on the same ports? Give this job other ports (dgrun --started_port, "
               "PADDLE_TRAINER_ENDPOINTS) or wait for the other job to end", st->where, who, *token ? "" : ", which is unset");
        return DG_ECOMM;
    }
    if (status != HELLO_WELCOME) {
        DG_ERR(DG_ECOMM, "store: %s: the store at %s answered the hello with %lld", who, st->where, (long long)status);
        return DG_ECOMM;
    }
    return 0;
}

dg_store *dg_store_new(dg_store_params p) {
    DG_CHECK_PARAMS("store_new", p, dg_store_default_params);
    DG_CHECK(p.host && *p.host, "store: no host for rank 0");
    DG_CHECK(p.port > 0 && p.port < 65536, "store: port %d out of range", p.port);
    DG_CHECK((p.timeout_s > 0 && isfinite(p.timeout_s)) || p.timeout_s == DG_FROM_ENV,
             "store: timeout_s must be > 0 or DG_FROM_ENV, got %g", p.timeout_s);
    const char *token = p.token ? p.token : "";
    DG_CHECK(strlen(token) <= DG_STORE_MAX_TOKEN, "store: job token of %zu characters; at most %d", strlen(token),
             DG_STORE_MAX_TOKEN);
    DG_CHECK(p.rank >= -1, "store: rank %d: a rank is >= 0, or -1 when not said", p.rank);
    dg_store *st = calloc(1, sizeof *st);
    DG_CHECK(st, "store: out of memory");
    st->timeout_s = dg_dist_timeout(p.timeout_s);
    st->rank = p.rank;
    if (p.rank >= 0) snprintf(st->who, sizeof st->who, "rank %d", p.rank);
    else snprintf(st->who, sizeof st->who, "this client");
    snprintf(st->where, sizeof st->where, "%s:%d", p.host, p.port);
    if (p.is_server && !(st->srv = server_new(p.host, p.port, st->where, token, p.rank < 0 ? 0 : p.rank))) { free(st); return NULL; }
    st->fd = connect_until(p.host, p.port, now_s() + st->timeout_s, st->where, st->timeout_s, st->who);
    if (st->fd < 0) { server_free(st->srv); free(st); return NULL; }
    struct timeval tv = { .tv_sec = (time_t)st->timeout_s, .tv_usec = (suseconds_t)((st->timeout_s - (double)(time_t)st->timeout_s) * 1e6) };
    setsockopt(st->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(st->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (hello(st, token) != 0) { close(st->fd); server_free(st->srv); free(st); return NULL; }
    return st;
}

void dg_store_free(dg_store *s) {
    if (!s) return;
    close(s->fd);
    server_free(s->srv);
    free(s);
}

static int request(dg_store *s, uint8_t op, const char *key, const void *val, uint64_t vlen, int64_t *num,
                   void **out, size_t *outlen) {
    DG_CHECK_INT(s && key, "store: NULL argument");
    uint32_t klen = (uint32_t)strlen(key);
    DG_CHECK_INT(klen > 0 && klen <= MAX_KEY, "store: key '%s' must have 1..%d characters", key, MAX_KEY);
    DG_CHECK_INT(vlen <= MAX_VALUE, "store: value of %llu bytes for '%s' exceeds %u", (unsigned long long)vlen, key, MAX_VALUE);
    if (!write_all(s->fd, &op, 1) || !write_all(s->fd, &klen, 4) || !write_all(s->fd, key, klen) ||
        !write_all(s->fd, &vlen, 8) || (vlen && !write_all(s->fd, val, vlen))) {
        DG_ERR(DG_EIO, "store: %s lost rank 0's store at %s while sending '%s': %s", s->who, s->where, key, strerror(errno));
        return DG_EIO;
    }
    int64_t status; uint64_t len;
    if (!read_all(s->fd, &status, 8) || !read_all(s->fd, &len, 8) || len > MAX_VALUE) {
        bool timeout = errno == EAGAIN || errno == EWOULDBLOCK;
        DG_ERR(timeout ? DG_ETIMEOUT : DG_EIO, "store: %s: %s waiting for '%s' at %s%s", s->who, timeout ? "timed out" : "connection lost",
               key, s->where, timeout ? " (a rank did not arrive: see its log)" : " (rank 0 exited?)");
        return timeout ? DG_ETIMEOUT : DG_EIO;
    }
    void *buf = len ? malloc(len) : NULL;
    if (len && (!buf || !read_all(s->fd, buf, len))) {
        free(buf);
        DG_ERR(DG_EIO, "store: short reply for '%s' from %s", key, s->where);
        return DG_EIO;
    }
    if (num) *num = status;
    if (out) { *out = buf; *outlen = len; } else free(buf);
    return 0;
}

int dg_store_set(dg_store *s, const char *key, const void *value, size_t len) {
    int64_t st = 0;
    int rc = request(s, OP_SET, key, value, len, &st, NULL, NULL);
    if (!rc && st != 0) { DG_ERR(DG_ENOMEM, "store: rank 0 could not keep '%s'", key); return DG_ENOMEM; }
    return rc;
}
int dg_store_get(dg_store *s, const char *key, void **value, size_t *len) {
    DG_CHECK_INT(value && len, "store_get: NULL output");
    *value = NULL; *len = 0;
    return request(s, OP_GET, key, NULL, 0, NULL, value, len);
}
int dg_store_add(dg_store *s, const char *key, int64_t delta, int64_t *out) {
    int64_t v = 0;
    int rc = request(s, OP_ADD, key, &delta, sizeof delta, &v, NULL, NULL);
    if (!rc && v == INT64_MIN) { DG_ERR(DG_ENOMEM, "store: rank 0 could not keep '%s'", key); return DG_ENOMEM; }
    if (!rc && out) *out = v;
    return rc;
}
int dg_store_peek(dg_store *s, const char *key, void **value, size_t *len, bool *found) {
    DG_CHECK_INT(value && len && found, "store_peek: NULL output");
    *value = NULL; *len = 0; *found = false;
    int64_t st = -1;
    int rc = request(s, OP_PEEK, key, NULL, 0, &st, value, len);
    if (!rc && st < 0) { DG_ERR(DG_ENOMEM, "store: rank 0 could not copy '%s'", key); return DG_ENOMEM; }
    if (!rc) *found = st == 0;
    return rc;
}
int dg_store_wait_at_least(dg_store *s, const char *key, int64_t target) {
    return request(s, OP_WAIT_GE, key, &target, sizeof target, NULL, NULL, NULL);
}
