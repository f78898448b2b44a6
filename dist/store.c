/* dist/store.c — the rendezvous store: a key/value server in rank 0's process at its endpoint
 * (as Paddle's gen_nccl_id / torch's TCPStore), reached over TCP by every rank including rank 0.
 * It carries the NCCL unique id and the world check-in. Clients retry the connection until the
 * timeout (rank 0 may start last) and every wait is bounded, so a missing or misconfigured rank
 * is an error on every rank, never a hang.
 *
 * Wire format, both directions little-endian: request = u8 op, u32 key length, key, u64 value
 * length, value; reply = i64 status/number, u64 value length, value. One server thread per
 * client connection; GET and WAIT block on a condition variable until the key arrives. */
#include "dist_internal.h"
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { OP_SET = 1, OP_GET, OP_ADD, OP_WAIT_GE };
#define MAX_KEY 256
#define MAX_VALUE (64u << 20)

typedef struct kv { char *key; void *val; size_t len; } kv;

typedef struct server {
    int listen_fd;
    pthread_t accept_thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    kv *items; size_t n, cap;
    int *clients; pthread_t *threads; size_t nclients, capclients;
    bool stopping;
} server;

struct dg_store {
    int fd;
    double timeout_s;
    char where[DG_DIST_MAX_ENDPOINT + 8];
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

static void *serve_client(void *argp) {
    client_arg a = *(client_arg *)argp;
    free(argp);
    server *s = a.s;
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

static server *server_new(int port, const char *where) {
    server *s = calloc(1, sizeof *s);
    DG_CHECK(s, "store: out of memory");
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) { DG_ERR(DG_EIO, "store: socket(): %s", strerror(errno)); free(s); return NULL; }
    int one = 1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY) };
    if (bind(s->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(s->listen_fd, 128) != 0) {
        DG_ERR(DG_EIO, "store: rank 0 cannot listen on %s: %s (is another job using port %d?)", where, strerror(errno), port);
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
static int connect_until(const char *host, int port, double deadline, const char *where, double timeout) {
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int last = 0;
    for (;;) {
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res = NULL;
        int g = getaddrinfo(host, ps, &hints, &res);
        if (g != 0) {
            DG_ERR(DG_EINVAL, "store: cannot resolve rank 0's host in %s: %s", where, gai_strerror(g));
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
            DG_ERR(DG_ETIMEOUT, "store: rank 0 at %s not reachable within %.0f s (%s)", where, timeout, strerror(last));
            return -1;
        }
        usleep(100 * 1000);   /* rank 0 may still be starting */
    }
}

dg_store_params dg_store_default_params(void) {
    return (dg_store_params){ .host = NULL, .port = 0, .is_server = false, .timeout_s = DG_FROM_ENV };
}

dg_store *dg_store_new(dg_store_params p) {
    DG_CHECK(p.host && *p.host, "store: no host for rank 0");
    DG_CHECK(p.port > 0 && p.port < 65536, "store: port %d out of range", p.port);
    DG_CHECK((p.timeout_s > 0 && isfinite(p.timeout_s)) || p.timeout_s == DG_FROM_ENV,
             "store: timeout_s must be > 0 or DG_FROM_ENV, got %g", p.timeout_s);
    dg_store *st = calloc(1, sizeof *st);
    DG_CHECK(st, "store: out of memory");
    st->timeout_s = dg_dist_timeout(p.timeout_s);
    snprintf(st->where, sizeof st->where, "%s:%d", p.host, p.port);
    if (p.is_server && !(st->srv = server_new(p.port, st->where))) { free(st); return NULL; }
    st->fd = connect_until(p.host, p.port, now_s() + st->timeout_s, st->where, st->timeout_s);
    if (st->fd < 0) { server_free(st->srv); free(st); return NULL; }
    struct timeval tv = { .tv_sec = (time_t)st->timeout_s, .tv_usec = (suseconds_t)((st->timeout_s - (double)(time_t)st->timeout_s) * 1e6) };
    setsockopt(st->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(st->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
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
        DG_ERR(DG_EIO, "store: lost rank 0's store at %s while sending '%s': %s", s->where, key, strerror(errno));
        return DG_EIO;
    }
    int64_t status; uint64_t len;
    if (!read_all(s->fd, &status, 8) || !read_all(s->fd, &len, 8) || len > MAX_VALUE) {
        bool timeout = errno == EAGAIN || errno == EWOULDBLOCK;
        DG_ERR(timeout ? DG_ETIMEOUT : DG_EIO, "store: %s waiting for '%s' at %s%s", timeout ? "timed out" : "connection lost",
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
int dg_store_wait_at_least(dg_store *s, const char *key, int64_t target) {
    return request(s, OP_WAIT_GE, key, &target, sizeof target, NULL, NULL, NULL);
}
