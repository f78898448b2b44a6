/* test/dist/ps_zmq_test.c — the parameter server's ZeroMQ transport (dist/zmq/transport_zmq.c,
 * opened as a module like a real job does): a server thread answering with an echo-like handler
 * on tcp://127.0.0.1:<free port> and a client sending 1,000 requests of 0..1 MB, every reply
 * checked byte for byte; a request to an endpoint nobody serves times out naming it; an oversized
 * message is refused by the sender and, from a sender that does not know the limit, dropped by
 * the server without reaching the handler while the server keeps serving; a late reply to a
 * request that timed out is not taken for the next one's; a worker of another
 * job (another token) is refused at once without reaching the handler; a bind to an address
 * that is not this machine's fails naming it. Exit 0 when every check passes. */
#include <dygraph.h>
#include <dygraph/module.h>
#include "../../dist/ps/transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TOKEN "ps-zmq-test-job"

#define LIMIT (2 << 20)         /* the server's message limit in this test */
#define MAX_SIZE (1 << 20)

/* a failed assertion is counted and reported, and the test goes on to the next case; main exits 1
 * when any failed */
static int failures;
#define ZMQ_ASSERT(cond, ...) do { if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); \
                                             printf("\n"); } } while (0)

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("picking a free port");
        exit(1);
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static volatile int handled;   /* requests that reached the handler */

/* every byte XOR 0x5a, then the request's length as 8 bytes: a reply that depends on all of it */
static int echo(void *ctx, const void *msg, size_t len, void **reply, size_t *reply_len) {
    (void)ctx;
    if (len == 5 && !memcmp(msg, "sleep", 5)) usleep(300 * 1000);   /* a slow answer, for the stale-reply check */
    unsigned char *r = malloc(len + 8);
    if (!r) return DG_ENOMEM;
    for (size_t i = 0; i < len; i++) r[i] = ((const unsigned char *)msg)[i] ^ 0x5a;
    uint64_t n = len;
    memcpy(r + len, &n, 8);
    *reply = r;
    *reply_len = len + 8;
    __atomic_add_fetch(&handled, 1, __ATOMIC_SEQ_CST);
    return 0;
}

typedef struct { dg_ps_transport *t; volatile bool stop; int rc; } server_arg;
static void *server_main(void *p) {
    server_arg *a = p;
    a->rc = a->t->ops->serve(a->t, echo, NULL, &a->stop);
    if (a->rc) printf("server: %s\n", dg_last_error());
    return NULL;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

int main(void) {
    /* the server and the main client as a job opens them (dist/ps/transport.c: the token from
     * DG_JOB_TOKEN); the others through the entry itself, to give them other tokens */
    setenv("DG_JOB_TOKEN", TOKEN, 1);
    dg_ps_zmq_new_fn zmq_new = (dg_ps_zmq_new_fn)dg_module_symbol("zmq", DG_PS_ZMQ_ENTRY);
    if (!zmq_new) { printf("FAIL: cannot open the zmq module: %s\n", dg_last_error()); return 1; }

    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "127.0.0.1:%d", free_port());
    server_arg srv = {.t = dg_ps_zmq_transport(LIMIT)};
    if (!srv.t || srv.t->ops->bind(srv.t, endpoint) != 0) { printf("FAIL: bind %s: %s\n", endpoint, dg_last_error()); return 1; }
    pthread_t th;
    pthread_create(&th, NULL, server_main, &srv);

    /* 1,000 requests, sizes spread over 0..1 MB with both ends included */
    dg_ps_transport *c = dg_ps_zmq_transport(LIMIT);
    const char *eps[1] = {endpoint};
    ZMQ_ASSERT(c && c->ops->connect(c, 1, eps) == 0, "connect: %s", dg_last_error());
    unsigned char *msg = malloc(MAX_SIZE);
    size_t bytes = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ok = 0;
    for (int i = 0; i < 1000; i++) {
        size_t len = i == 0 ? 0 : i == 999 ? MAX_SIZE : (size_t)(next() % (MAX_SIZE + 1));
        if (i % 3 == 1) len %= 4096;   /* plenty of small ones too, as pulls and pushes of a few rows are */
        for (size_t k = 0; k < len; k++) msg[k] = (unsigned char)(next() >> 24);
        void *reply = NULL;
        size_t rlen = 0;
        int rc = c->ops->request(c, 0, msg, len, &reply, &rlen, 10.0);
        bool good = rc == 0 && rlen == len + 8;
        for (size_t k = 0; good && k < len; k++) good = ((unsigned char *)reply)[k] == (msg[k] ^ 0x5a);
        uint64_t n = 0;
        if (good) memcpy(&n, (unsigned char *)reply + len, 8);
        good = good && n == len;
        ZMQ_ASSERT(good, "request %d (%zu bytes): rc %d, reply %zu bytes: %s", i, len, rc, rlen, rc ? dg_last_error() : "wrong bytes");
        ok += good;
        bytes += len;
        free(reply);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("ps_zmq_test: %d/1000 requests of 0..%d bytes answered correctly (%.1f MB each way in %.2f s)\n", ok, MAX_SIZE,
           bytes / 1e6, s);

    /* a request to an endpoint nobody serves: a timeout naming it */
    char dead[64];
    snprintf(dead, sizeof dead, "127.0.0.1:%d", free_port());
    dg_ps_transport *d = zmq_new(LIMIT, TOKEN);
    const char *deps[1] = {dead};
    ZMQ_ASSERT(d && d->ops->connect(d, 1, deps) == 0, "connect to %s: %s", dead, dg_last_error());
    void *reply = NULL;
    size_t rlen = 0;
    int rc = d->ops->request(d, 0, "x", 1, &reply, &rlen, 0.3);
    ZMQ_ASSERT(rc == DG_ETIMEOUT && strstr(dg_last_error(), dead), "dead endpoint: rc %d, '%s'", rc, dg_last_error());
    printf("ps_zmq_test: dead endpoint: %s\n", dg_last_error());
    d->ops->destroy(d);

    /* oversized: the sender that knows the limit refuses it, naming the sizes */
    rc = c->ops->request(c, 0, msg, 1, &reply, &rlen, 1.0);   /* warm */
    free(reply);
    unsigned char *big = calloc(1, LIMIT + 1);
    rc = c->ops->request(c, 0, big, LIMIT + 1, &reply, &rlen, 1.0);
    ZMQ_ASSERT(rc == DG_EINVAL && strstr(dg_last_error(), "limit"), "oversized request: rc %d, '%s'", rc, dg_last_error());
    printf("ps_zmq_test: oversized (sender): %s\n", dg_last_error());
    /* ... and a sender with a larger limit gets its connection dropped by the server: the
     * handler never sees it, the request times out, and the server goes on serving */
    dg_ps_transport *g = zmq_new(64 << 20, TOKEN);
    ZMQ_ASSERT(g && g->ops->connect(g, 1, eps) == 0, "connect: %s", dg_last_error());
    int before = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);
    rc = g->ops->request(g, 0, big, LIMIT + 1, &reply, &rlen, 1.0);
    ZMQ_ASSERT(rc == DG_ETIMEOUT, "oversized request past the sender's check: rc %d (want a timeout), '%s'", rc, dg_last_error());
    ZMQ_ASSERT(__atomic_load_n(&handled, __ATOMIC_SEQ_CST) == before, "the server's handler saw an oversized message");
    printf("ps_zmq_test: oversized (receiver): dropped by the server, sender: %s\n", dg_last_error());
    g->ops->destroy(g);
    rc = c->ops->request(c, 0, msg, 100, &reply, &rlen, 5.0);
    ZMQ_ASSERT(rc == 0 && rlen == 108, "the server stopped answering after an oversized message: rc %d, '%s'", rc, dg_last_error());
    free(reply);
    free(big);

    /* a reply that comes after its request timed out is not taken for the next request's */
    rc = c->ops->request(c, 0, "sleep", 5, &reply, &rlen, 0.1);
    ZMQ_ASSERT(rc == DG_ETIMEOUT, "slow request: rc %d, want a timeout", rc);
    rc = c->ops->request(c, 0, "ab", 2, &reply, &rlen, 5.0);
    ZMQ_ASSERT(rc == 0 && rlen == 10 && ((unsigned char *)reply)[0] == ('a' ^ 0x5a), "the request after a timed-out one got "
          "%zu bytes (the stale reply has 13): rc %d", rlen, rc);
    free(reply);

    /* a worker of another job: refused with a message saying so, the handler untouched */
    dg_ps_transport *o = zmq_new(LIMIT, "another-job");
    ZMQ_ASSERT(o && o->ops->connect(o, 1, eps) == 0, "connect: %s", dg_last_error());
    before = __atomic_load_n(&handled, __ATOMIC_SEQ_CST);
    rc = o->ops->request(o, 0, msg, 10, &reply, &rlen, 5.0);
    ZMQ_ASSERT(rc == DG_ECOMM && strstr(dg_last_error(), "another job") && strstr(dg_last_error(), endpoint),
          "another job's request: rc %d, '%s'", rc, dg_last_error());
    ZMQ_ASSERT(__atomic_load_n(&handled, __ATOMIC_SEQ_CST) == before, "the handler saw another job's request");
    printf("ps_zmq_test: another job's worker: %s\n", dg_last_error());
    o->ops->destroy(o);

    /* the server binds to the endpoint's own address: one not on this machine is an error naming it */
    dg_ps_transport *b = zmq_new(LIMIT, TOKEN);
    rc = b->ops->bind(b, "192.0.2.1:7000");   /* TEST-NET-1: never a local address */
    ZMQ_ASSERT(rc != 0 && strstr(dg_last_error(), "192.0.2.1:7000"), "bind to a foreign address: rc %d, '%s'", rc, dg_last_error());
    printf("ps_zmq_test: foreign bind: %s\n", dg_last_error());
    rc = b->ops->bind(b, "127.0.0.1:http");
    ZMQ_ASSERT(rc == DG_EINVAL, "bind to a bad port: rc %d", rc);
    b->ops->destroy(b);

    srv.stop = true;
    pthread_join(th, NULL);
    ZMQ_ASSERT(srv.rc == 0, "serve returned %d", srv.rc);
    c->ops->destroy(c);
    srv.t->ops->destroy(srv.t);
    free(msg);
    printf("ps_zmq_test: %s\n", failures ? "FAILED" : "all checks passed");
    return failures ? 1 : 0;
}
