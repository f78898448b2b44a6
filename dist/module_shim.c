/* dist/module_shim.c — built into the transport modules (never into the core): what their
 * sources call beyond eager/'s functions (eager/module_shim.c): the rendezvous store and MPI
 * through the core (dist/comm.c provides them), and the CUDA module's streams and memory
 * (asked for as "cuda:NAME", so the NCCL module never links the CUDA module itself). */
#include "dist_internal.h"


int dg_store_set(dg_store *s, const char *key, const void *value, size_t len) {
    DG_MODULE_FN(int (*)(dg_store *, const char *, const void *, size_t), "dg_store_set");
    return fn ? fn(s, key, value, len) : DG_EUNSUPPORTED;
}
int dg_store_get(dg_store *s, const char *key, void **value, size_t *len) {
    DG_MODULE_FN(int (*)(dg_store *, const char *, void **, size_t *), "dg_store_get");
    return fn ? fn(s, key, value, len) : DG_EUNSUPPORTED;
}
int dg_mpi_broadcast_bytes(void *buf, size_t n, int root) {
    DG_MODULE_FN(int (*)(void *, size_t, int), "dg_mpi_broadcast_bytes");
    return fn ? fn(buf, n, root) : DG_EUNSUPPORTED;
}
int dg_comm_timed_out(dg_comm *c, const char *transport, const char *what, const char *detail, bool aborted) {
    DG_MODULE_FN(int (*)(dg_comm *, const char *, const char *, const char *, bool), "dg_comm_timed_out");
    if (fn) return fn(c, transport, what, detail, aborted);
    if (!c->abandoned && c->be && c->be->abandon) c->be->abandon(c);
    c->abandoned = true;
    return DG_ETIMEOUT;
}
bool dg_comm_mpi_built(void) { DG_MODULE_FN(bool (*)(void), "dg_comm_mpi_built"); return fn && fn(); }
