/* dist/ps/ps_internal.h — the parameter server's pieces and the seams between them.
 *
 * A parameter-server job (Paddle's launch_ps) has server processes that hold the tables and
 * apply the optimizer, and worker processes that pull parameters and push gradients. The data
 * path is request -> reply between one worker and one server:
 *
 *   worker (dist/ps/client*.c) --encode (proto.c)-->  transport  -->  server handler (server.c)
 *                              <--decode (proto.c)--             <--  tables (table_*.c)
 *
 * The transport only moves whole messages: the ZeroMQ module (dist/zmq/, a shared object the
 * core opens on first use, as the MPI one) for real jobs, an in-process loopback for tests. The
 * server's handler is a pure function of (its state, the request bytes) -> reply bytes, so the
 * fuzzer drives it directly and nothing on the wire can reach a table unchecked.
 *
 * Waiting (sync mode's barrier, a pull that must see step k applied) is done by the worker
 * re-asking with the peer-wait backoff of dist_internal.h: a request is never held open on the
 * server, so a server serves its workers one message at a time on one thread. */
#ifndef DG_DIST_PS_INTERNAL_H
#define DG_DIST_PS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- transport: whole messages, request -> reply ---- */
typedef struct dg_ps_transport dg_ps_transport;

/* What the server does with one request: fills *reply (malloc'd, the transport frees it) and
 * *reply_len; returns 0, or a DG_E* code when no reply can be made at all (out of memory). A
 * malformed request is answered with an error reply, not a failure. */
typedef int (*dg_ps_handler)(void *ctx, const void *msg, size_t len, void **reply, size_t *reply_len);

typedef struct dg_ps_transport_ops {
    const char *name;
    /* worker side: endpoints[i] is server i ("ip:port"); request() sends msg to one server and
     * waits up to timeout_s for its reply (malloc'd into *reply; the caller frees it) */
    int (*connect)(dg_ps_transport *t, int n_servers, const char *const *endpoints);
    int (*request)(dg_ps_transport *t, int server, const void *msg, size_t len, void **reply, size_t *reply_len,
                   double timeout_s);
    /* server side: bind to the endpoint's own address, then answer requests one at a time with
     * handler until *stop becomes true (checked at least every 100 ms) */
    int (*bind)(dg_ps_transport *t, const char *endpoint);
    int (*serve)(dg_ps_transport *t, dg_ps_handler handler, void *ctx, volatile bool *stop);
    void (*destroy)(dg_ps_transport *t);
} dg_ps_transport_ops;

struct dg_ps_transport {
    const dg_ps_transport_ops *ops;
    void *impl;
};

/* The in-process transport (dist/ps/loopback.c): request() calls the handler of the server
 * registered under that endpoint directly, serialised by a lock per server. For tests and for a
 * single-process job. */
dg_ps_transport *dg_ps_loopback_new(void);
/* Registers a handler for an endpoint in this process (what bind + serve do for loopback). */
int dg_ps_loopback_register(const char *endpoint, dg_ps_handler handler, void *ctx);
void dg_ps_loopback_unregister(const char *endpoint);

#ifdef __cplusplus
}
#endif
#endif
