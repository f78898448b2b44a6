/* dist/ps/request.c — one worker request to one server and its reply checked (request.h), the
 * bytes they moved, and the requests that are not a table's: save, evict, stop. */
#include "../dist_internal.h"
#include "client.h"
#include "proto.h"
#include "request.h"
#include "server.h"

/* What this process's requests moved (both threads of a worker: atomics). */
static uint64_t g_sent, g_received, g_requests;
void dg_ps_traffic(uint64_t *sent, uint64_t *received, uint64_t *requests) {
    *sent = __atomic_load_n(&g_sent, __ATOMIC_RELAXED);
    *received = __atomic_load_n(&g_received, __ATOMIC_RELAXED);
    *requests = __atomic_load_n(&g_requests, __ATOMIC_RELAXED);
}

/* One request to server s; the reply's status, version and payload (malloc'd, caller frees). */
int dg_ps_ask(dg_ps_transport *tr, double timeout_s, int s, const unsigned char *msg, size_t len, const char *what, int *status,
              uint64_t *version, unsigned char **payload, size_t *plen) {
    void *r = NULL;
    size_t rl = 0;
    int rc = tr->ops->request(tr, s, msg, len, &r, &rl, timeout_s);
    __atomic_add_fetch(&g_requests, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_sent, len, __ATOMIC_RELAXED);
    if (rc) return rc;   /* the transport named the server and what happened */
    __atomic_add_fetch(&g_received, rl, __ATOMIC_RELAXED);
    const unsigned char *b = r;
    if (rl < DG_PS_REPLY_HEADER || dg_ps_get32(b) != DG_PS_MAGIC || dg_ps_get16(b + 4) != DG_PS_VERSION) {
        free(r);
        DG_ERR(DG_ECOMM, "ps %s: server %d answered %zu bytes that are not a parameter-server reply", what, s, rl);
        return DG_ECOMM;
    }
    *status = dg_ps_get16(b + 6);
    *version = dg_ps_get64(b + 8);
    if (*status == DG_PS_ERROR) {
        DG_ERR(DG_ECOMM, "ps %s: server %d refused: %.*s", what, s, (int)(rl - DG_PS_REPLY_HEADER), (const char *)b + DG_PS_REPLY_HEADER);
        free(r);
        return DG_ECOMM;
    }
    if (payload) {
        *plen = rl - DG_PS_REPLY_HEADER;
        *payload = r;   /* the caller reads from DG_PS_REPLY_HEADER on */
    } else {
        free(r);
    }
    return 0;
}

/* A pull from server s that may have to wait for the table's version `want`: asked again, with
 * the peer backoff, while the server answers NOT_YET, until the timeout. The OK reply's payload
 * is the caller's (it reads from DG_PS_REPLY_HEADER on). */
int dg_ps_ask_when_ready(dg_ps_transport *tr, double timeout_s, int s, const unsigned char *msg, size_t len, const char *what,
                         uint32_t table, int worker, uint64_t want, uint64_t *version, unsigned char **payload, size_t *plen) {
    dg_peer_wait w = dg_peer_wait_begin();
    for (;;) {
        int status;
        int rc = dg_ps_ask(tr, timeout_s, s, msg, len, what, &status, version, payload, plen);
        if (rc || status == DG_PS_OK) return rc;
        free(*payload);
        *payload = NULL;
        if (!dg_peer_wait_pause(&w, timeout_s)) {
            DG_ERR(DG_ETIMEOUT, "ps %s: server %d has table %u at version %llu, worker %d needs %llu; waited %.0f s "
                   "(DG_DIST_TIMEOUT): a worker stopped pushing?", what, s, table, (unsigned long long)*version, worker,
                   (unsigned long long)want, timeout_s);
            return DG_ETIMEOUT;
        }
    }
}

int dg_ps_save(dg_ps_transport *tr, int n_servers, int worker, double timeout_s, const char *dir) {
    size_t n = strlen(dir);
    DG_CHECK_INT(n >= 1 && n <= 4000, "fleet_save_persistables: directory name of %zu bytes", n);
    unsigned char *msg = malloc(DG_PS_REQ_HEADER + 8 + n);
    if (!msg) return DG_ENOMEM;
    int rc = 0;
    for (int s = 0; s < n_servers && !rc; s++) {
        dg_ps_req_header(msg, DG_PS_OP_SAVE, 0, (uint32_t)worker, 0);
        dg_ps_put32(msg + DG_PS_REQ_HEADER, (uint32_t)s);
        dg_ps_put32(msg + DG_PS_REQ_HEADER + 4, (uint32_t)n_servers);
        memcpy(msg + DG_PS_REQ_HEADER + 8, dir, n);
        int status;
        uint64_t ver;
        rc = dg_ps_ask(tr, timeout_s, s, msg, DG_PS_REQ_HEADER + 8 + n, "save", &status, &ver, NULL, NULL);
    }
    free(msg);
    return rc ? rc : dg_ps_write_manifest(dir, n_servers);
}

int64_t dg_ps_evict(dg_ps_transport *tr, int server, int worker, double timeout_s, uint64_t max_age) {
    unsigned char h[DG_PS_REQ_HEADER];
    dg_ps_req_header(h, DG_PS_OP_EVICT, 0, (uint32_t)worker, max_age);
    int status;
    uint64_t ver;
    unsigned char *r = NULL;
    size_t rl = 0;
    int rc = dg_ps_ask(tr, timeout_s, server, h, sizeof h, "shrink", &status, &ver, &r, &rl);
    if (rc) return rc;
    int64_t n = rl == 8 ? (int64_t)dg_ps_get64(r + DG_PS_REPLY_HEADER) : -1;
    free(r);
    if (n < 0) { DG_ERR(DG_ECOMM, "fleet_shrink: server %d answered %zu bytes, not a count", server, rl); return DG_ECOMM; }
    return n;
}

int dg_ps_stop_worker(dg_ps_transport *tr, int n_servers, int worker, double timeout_s) {
    unsigned char h[DG_PS_REQ_HEADER];
    dg_ps_req_header(h, DG_PS_OP_STOP, 0, (uint32_t)worker, 0);
    int rc = 0;
    for (int s = 0; s < n_servers; s++) {
        void *r = NULL;
        size_t rl = 0;
        int e = tr->ops->request(tr, s, h, sizeof h, &r, &rl, timeout_s);
        free(r);
        if (e && !rc) rc = e;
    }
    return rc;
}

