/* dist/zmq/transport_zmq.c — the parameter server's ZeroMQ transport (ps_internal.h's
 * dg_ps_transport), built as the module libdygraph-zmq.so.0 so that neither libdygraph.so nor a
 * program linked with libdygraph.a depends on libzmq: the core opens it on first use with
 * dg_module_symbol("zmq", "dg_ps_zmq_new"), as it opens the MPI transport.
 *
 * Worker side: one DEALER socket per server. Every request carries an 8-byte sequence number
 * that the server echoes, so a late reply to a request that already timed out is recognised and
 * dropped instead of being taken for the answer to the next one. Server side: one ROUTER socket
 * bound to the endpoint's own address (never 0.0.0.0: a server is reachable only where the job
 * said it is), answering one request at a time on the calling thread.
 *
 * Wire: worker -> server [seq (8 bytes)][job token][payload]; the ROUTER adds the peer's identity
 * in front, and the reply goes back as [identity][seq][status (1 byte)][reply]. The job token
 * (DG_JOB_TOKEN, as the rendezvous store checks it) keeps a worker of another job that reached
 * this port from touching our tables: its request is answered with status REFUSED and never
 * reaches the handler. ZMQ_MAXMSGSIZE bounds what either side accepts, so a peer cannot make
 * the other allocate without limit (zmq drops its connection). */
#include <dygraph.h>
#include <dygraph/extension.h>
#include <dygraph/module.h>
#include "../ps/transport.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define ENDPOINT_MAX 256
#define POLL_MS 100        /* the server looks at *stop at least this often (ps_internal.h) */
#define TOKEN_MAX 128      /* the store's DG_STORE_MAX_TOKEN */
enum { REPLY_OK = 0, REPLY_REFUSED = 1 };

typedef struct zmq_peer {
    void *sock;
    char endpoint[ENDPOINT_MAX];
    pthread_mutex_t lock;  /* a zmq socket is not thread-safe: one request at a time per server */
    uint64_t seq;
} zmq_peer;

typedef struct zmq_impl {
    void *ctx;
    int64_t max_msg;
    zmq_peer *peers;
    int n_peers;
    void *server;          /* the ROUTER, after bind */
    char bound[ENDPOINT_MAX];
    char token[TOKEN_MAX + 1];
    size_t token_len;
} zmq_impl;

/* "ip:port" -> "tcp://ip:port"; the ip must be given (a server binds to its own address). */
static int tcp_address(const char *endpoint, char *out, size_t len) {
    const char *colon = endpoint ? strrchr(endpoint, ':') : NULL;
    DG_CHECK_INT(colon && colon != endpoint && colon[1], "zmq: endpoint '%s' is not ip:port", endpoint ? endpoint : "(null)");
    char *end;
    long port = strtol(colon + 1, &end, 10);
    DG_CHECK_INT(!*end && port >= 1 && port <= 65535, "zmq: endpoint '%s': port '%s' is not 1..65535", endpoint, colon + 1);
    int n = snprintf(out, len, "tcp://%s", endpoint);
    DG_CHECK_INT(n > 0 && (size_t)n < len, "zmq: endpoint '%.64s...' is too long", endpoint);
    return 0;
}

static int zmq_fail(const char *what, const char *endpoint) {
    DG_RAISE(DG_ECOMM, "zmq: %s %s: %s", what, endpoint, zmq_strerror(zmq_errno()));
    return DG_ECOMM;
}

/* The options every socket gets: no lingering on close (a transport being destroyed must not
 * wait for a dead peer), the size bound, and a short reconnect interval. */
static int socket_options(zmq_impl *z, void *s, const char *endpoint) {
    int zero = 0, ivl = 100;
    if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &z->max_msg, sizeof z->max_msg) != 0 ||
        zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl) != 0)
        return zmq_fail("setting socket options for", endpoint);
    return 0;
}

static int zt_connect(dg_ps_transport *t, int n_servers, const char *const *endpoints) {
    zmq_impl *z = t->impl;
    DG_CHECK_INT(!z->peers, "zmq: connect called twice");
    DG_CHECK_INT(n_servers > 0 && endpoints, "zmq: connect needs at least one server endpoint (got %d)", n_servers);
    z->peers = calloc((size_t)n_servers, sizeof *z->peers);
    if (!z->peers) { DG_RAISE(DG_ENOMEM, "zmq: out of memory for %d servers", n_servers); return DG_ENOMEM; }
    for (int i = 0; i < n_servers; i++) {
        zmq_peer *p = &z->peers[i];
        char addr[ENDPOINT_MAX + 8];
        int rc = tcp_address(endpoints[i], addr, sizeof addr);
        if (rc) return rc;
        snprintf(p->endpoint, sizeof p->endpoint, "%s", endpoints[i]);
        pthread_mutex_init(&p->lock, NULL);
        z->n_peers = i + 1;  /* from here destroy() closes it */
        p->sock = zmq_socket(z->ctx, ZMQ_DEALER);
        if (!p->sock) return zmq_fail("creating the DEALER socket for server", endpoints[i]);
        rc = socket_options(z, p->sock, endpoints[i]);
        if (rc) return rc;
        /* connect is asynchronous: a server not up yet is retried by zmq, and a request to it
         * waits in the socket's queue until it is, or until the request's timeout */
        if (zmq_connect(p->sock, addr) != 0) return zmq_fail("connecting to server", endpoints[i]);
    }
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void free_buffer(void *data, void *hint) { (void)hint; free(data); }

/* Reads the rest of a multipart message that is being dropped. */
static void drain(void *sock) {
    int more = 0;
    size_t sz = sizeof more;
    while (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        int rc = zmq_msg_recv(&m, sock, ZMQ_DONTWAIT);
        zmq_msg_close(&m);
        if (rc < 0) break;
    }
}

static bool has_more(void *sock) {
    int more = 0;
    size_t sz = sizeof more;
    return zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) == 0 && more;
}

/* Waits for the reply tagged seq; stale replies (to requests that timed out) are dropped. */
static int await_reply(zmq_impl *z, zmq_peer *p, uint64_t seq, void **reply, size_t *reply_len, double timeout_s) {
    double deadline = now_s() + timeout_s;
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) {
            DG_RAISE(DG_ETIMEOUT, "zmq: no reply from server %s within %.3g s (is it running, and is that its address?)",
                     p->endpoint, timeout_s);
            return DG_ETIMEOUT;
        }
        zmq_pollitem_t it = {.socket = p->sock, .events = ZMQ_POLLIN};
        int r = zmq_poll(&it, 1, (long)(left * 1000) + 1);
        if (r < 0 && zmq_errno() == EINTR) continue;
        if (r < 0) return zmq_fail("polling for the reply of server", p->endpoint);
        if (r == 0) continue;
        zmq_msg_t head, body;
        zmq_msg_init(&head);
        if (zmq_msg_recv(&head, p->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&head);
            if (zmq_errno() == EAGAIN || zmq_errno() == EINTR) continue;
            return zmq_fail("receiving the reply of server", p->endpoint);
        }
        uint64_t got = 0;
        bool ok = zmq_msg_size(&head) == sizeof got && has_more(p->sock);
        if (ok) memcpy(&got, zmq_msg_data(&head), sizeof got);
        zmq_msg_close(&head);
        if (!ok || got != seq) { drain(p->sock); continue; }
        zmq_msg_t status;
        zmq_msg_init(&status);
        if (zmq_msg_recv(&status, p->sock, ZMQ_DONTWAIT) < 0) {   /* the parts of a message arrive together */
            zmq_msg_close(&status);
            return zmq_fail("receiving the reply status of server", p->endpoint);
        }
        int st = zmq_msg_size(&status) == 1 && has_more(p->sock) ? *(unsigned char *)zmq_msg_data(&status) : -1;
        zmq_msg_close(&status);
        if (st != REPLY_OK) {
            drain(p->sock);
            if (st == REPLY_REFUSED) {
                DG_RAISE(DG_ECOMM, "zmq: server %s refused the request: it belongs to another job (its DG_JOB_TOKEN differs "
                         "from this process's)", p->endpoint);
                return DG_ECOMM;
            }
            continue;   /* not a reply of ours */
        }
        zmq_msg_init(&body);
        if (zmq_msg_recv(&body, p->sock, ZMQ_DONTWAIT) < 0) {   /* the parts of a message arrive together */
            zmq_msg_close(&body);
            return zmq_fail("receiving the reply body of server", p->endpoint);
        }
        if (has_more(p->sock)) { zmq_msg_close(&body); drain(p->sock); continue; }
        size_t n = zmq_msg_size(&body);
        void *buf = malloc(n ? n : 1);
        if (!buf) {
            zmq_msg_close(&body);
            DG_RAISE(DG_ENOMEM, "zmq: out of memory for a %zu-byte reply of server %s", n, p->endpoint);
            return DG_ENOMEM;
        }
        memcpy(buf, zmq_msg_data(&body), n);
        zmq_msg_close(&body);
        *reply = buf;
        *reply_len = n;
        (void)z;
        return 0;
    }
}

static int zt_request(dg_ps_transport *t, int server, const void *msg, size_t len, void **reply, size_t *reply_len,
                      double timeout_s) {
    zmq_impl *z = t->impl;
    DG_CHECK_INT(reply && reply_len && (msg || !len), "zmq: request needs a message and somewhere to put the reply");
    DG_CHECK_INT(server >= 0 && server < z->n_peers, "zmq: server %d out of range [0, %d): connect first", server, z->n_peers);
    zmq_peer *p = &z->peers[server];
    /* the server would drop the connection on it: say so here, with the sizes */
    DG_CHECK_INT(len <= (size_t)z->max_msg, "zmq: a %zu-byte request to server %s exceeds the %lld-byte message limit",
                 len, p->endpoint, (long long)z->max_msg);
    DG_CHECK_INT(timeout_s > 0, "zmq: request timeout %g s to server %s is not positive", timeout_s, p->endpoint);
    *reply = NULL;
    *reply_len = 0;
    pthread_mutex_lock(&p->lock);
    uint64_t seq = ++p->seq;
    int rc = 0;
    /* a DEALER with a pipe to the server queues the message even before the connection is up,
     * so send does not block; the timeout is the reply's */
    if (zmq_send(p->sock, &seq, sizeof seq, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(p->sock, z->token, z->token_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(p->sock, msg, len, ZMQ_DONTWAIT) < 0)
        rc = zmq_errno() == EAGAIN ? (DG_RAISE(DG_ETIMEOUT, "zmq: server %s is not taking requests (its queue is full)",
                                               p->endpoint), DG_ETIMEOUT)
                                   : zmq_fail("sending a request to server", p->endpoint);
    if (!rc) rc = await_reply(z, p, seq, reply, reply_len, timeout_s);
    pthread_mutex_unlock(&p->lock);
    return rc;
}

static int zt_bind(dg_ps_transport *t, const char *endpoint) {
    zmq_impl *z = t->impl;
    DG_CHECK_INT(!z->server, "zmq: already bound to %s", z->bound);
    char addr[ENDPOINT_MAX + 8];
    int rc = tcp_address(endpoint, addr, sizeof addr);
    if (rc) return rc;
    snprintf(z->bound, sizeof z->bound, "%s", endpoint);
    z->server = zmq_socket(z->ctx, ZMQ_ROUTER);
    if (!z->server) return zmq_fail("creating the ROUTER socket for", endpoint);
    rc = socket_options(z, z->server, endpoint);
    if (!rc && zmq_bind(z->server, addr) != 0) rc = zmq_fail("binding to", endpoint);
    if (rc) {
        zmq_close(z->server);
        z->server = NULL;
    }
    return rc;
}

/* One request: [identity][seq][token][payload]. Anything else is not from a worker of ours and is
 * dropped; a wrong token is answered REFUSED, so that worker fails at once naming the reason. */
static int serve_one(zmq_impl *z, dg_ps_handler handler, void *ctx) {
    zmq_msg_t part[4];
    int n = 0;
    bool ok = true;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, z->server, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            int e = zmq_errno();
            for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
            if (e == EAGAIN || e == EINTR) return 0;
            return zmq_fail("receiving a request on", z->bound);
        }
        if (n < 4) part[n++] = m;
        else { zmq_msg_close(&m); ok = false; }
        if (!has_more(z->server)) break;
    }
    int rc = 0;
    if (ok && n == 4 && zmq_msg_size(&part[1]) == sizeof(uint64_t)) {
        void *reply = NULL;
        size_t reply_len = 0;
        unsigned char st = zmq_msg_size(&part[2]) == z->token_len && !memcmp(zmq_msg_data(&part[2]), z->token, z->token_len)
                               ? REPLY_OK : REPLY_REFUSED;
        if (st == REPLY_OK) rc = handler(ctx, zmq_msg_data(&part[3]), zmq_msg_size(&part[3]), &reply, &reply_len);
        if (!rc) {
            zmq_msg_t out;
            /* the reply's buffer goes to zmq, which frees it once sent; a vanished worker's
             * reply is dropped by the ROUTER */
            if (zmq_msg_init_data(&out, reply ? reply : malloc(1), reply_len, free_buffer, NULL) != 0) {
                free(reply);
                rc = zmq_fail("wrapping a reply on", z->bound);
            } else if (zmq_msg_send(&part[0], z->server, ZMQ_SNDMORE) < 0 ||
                       zmq_msg_send(&part[1], z->server, ZMQ_SNDMORE) < 0 || zmq_send(z->server, &st, 1, ZMQ_SNDMORE) < 0 ||
                       zmq_msg_send(&out, z->server, 0) < 0) {
                zmq_msg_close(&out);
                /* EHOSTUNREACH never comes without ROUTER_MANDATORY; anything else is ours */
                rc = zmq_fail("sending a reply on", z->bound);
            }
        }
    }
    for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
    return rc;
}

static int zt_serve(dg_ps_transport *t, dg_ps_handler handler, void *ctx, volatile bool *stop) {
    zmq_impl *z = t->impl;
    DG_CHECK_INT(z->server, "zmq: serve before bind");
    DG_CHECK_INT(handler && stop, "zmq: serve needs a handler and a stop flag");
    while (!*stop) {
        zmq_pollitem_t it = {.socket = z->server, .events = ZMQ_POLLIN};
        int r = zmq_poll(&it, 1, POLL_MS);
        if (r < 0 && zmq_errno() == EINTR) continue;
        if (r < 0) return zmq_fail("polling for requests on", z->bound);
        if (r == 0) continue;
        int rc = serve_one(z, handler, ctx);
        if (rc) return rc;
    }
    return 0;
}

static void zt_destroy(dg_ps_transport *t) {
    if (!t) return;
    zmq_impl *z = t->impl;
    if (z) {
        for (int i = 0; i < z->n_peers; i++) {
            if (z->peers[i].sock) zmq_close(z->peers[i].sock);
            pthread_mutex_destroy(&z->peers[i].lock);
        }
        free(z->peers);
        if (z->server) zmq_close(z->server);
        if (z->ctx) zmq_ctx_term(z->ctx);
        free(z);
    }
    free(t);
}

static const dg_ps_transport_ops zmq_ops = {
    .name = "zmq",
    .connect = zt_connect,
    .request = zt_request,
    .bind = zt_bind,
    .serve = zt_serve,
    .destroy = zt_destroy,
};

/* The module's entry: a transport whose sockets accept messages up to max_msg_bytes (> 0), for
 * the job job_token names (DG_JOB_TOKEN as dg_dist_job_token read it; NULL = "", no token):
 * a server answers only requests carrying the same token. */
DG_MODULE_EXPORT dg_ps_transport *dg_ps_zmq_new(int64_t max_msg_bytes, const char *job_token) {
    if (max_msg_bytes <= 0) {
        DG_RAISE(DG_EINVAL, "zmq: the message size limit %lld is not positive", (long long)max_msg_bytes);
        return NULL;
    }
    if (!job_token) job_token = "";
    if (strlen(job_token) > TOKEN_MAX) {
        DG_RAISE(DG_EINVAL, "zmq: the job token has %zu characters; at most %d", strlen(job_token), TOKEN_MAX);
        return NULL;
    }
    dg_ps_transport *t = calloc(1, sizeof *t);
    zmq_impl *z = calloc(1, sizeof *z);
    if (!t || !z) {
        free(t);
        free(z);
        DG_RAISE(DG_ENOMEM, "zmq: out of memory for a transport");
        return NULL;
    }
    t->ops = &zmq_ops;
    t->impl = z;
    z->max_msg = max_msg_bytes;
    z->token_len = strlen(job_token);
    memcpy(z->token, job_token, z->token_len + 1);
    z->ctx = zmq_ctx_new();
    /* one I/O thread: a worker talks to a handful of servers, a server to its workers; the
     * handler's work runs on the caller's thread anyway */
    if (!z->ctx || zmq_ctx_set(z->ctx, ZMQ_IO_THREADS, 1) != 0) {
        DG_RAISE(DG_ECOMM, "zmq: creating a context: %s", zmq_strerror(zmq_errno()));
        zt_destroy(t);
        return NULL;
    }
    return t;
}
/* the entry's type is the one dist/ps/transport.c calls it by */
_Static_assert(__builtin_types_compatible_p(__typeof__(&dg_ps_zmq_new), dg_ps_zmq_new_fn), "dg_ps_zmq_new's type");
