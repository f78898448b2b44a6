/* test/cuda_emu/nccl_split.c — the emulated ncclCommSplit (NCCL 2.28's contract, nccl.h): a
 * collective over the parent's ranks; those passing the same colour form a new communicator, in
 * the order of their keys (ties: their order in the parent); NCCL_SPLIT_NOCOLOR leaves a rank out
 * with NULL; a NULL config inherits the parent's (so a non-blocking parent gives a non-blocking
 * child, ready when its ncclCommGetAsyncError says ncclSuccess).
 *
 * The colours and keys travel through the parent's segment, outside its collectives' slots (the
 * exchange is host work, as NCCL's bootstrap is, and does not wait for queued collectives): split
 * number k posts (colour, key) once every rank has read split k - 1's, then waits for every rank's
 * k. The child's segment name is derived from the parent's id, k and the colour, so the members
 * meet without anyone making a new id; it keeps the parent id's pid, and so the same cleanup. */
#include "nccl_internal.h"

/* Waits until every rank's counter (split_posted or split_read) reaches k, failing on a peer
 * that aborted, whose process is gone, or past the timeout. */
static ncclResult_t wait_all(ncclComm_t c, bool posted, uint64_t k) {
    double deadline = now_s() + timeout_s();
    for (int spins = 0;; spins++) {
        int behind = -1;
        for (int q = 0; q < c->nranks && behind < 0; q++) {
            shm_rank *p = &c->h->ranks[q];
            if (atomic_load_explicit(posted ? &p->split_posted : &p->split_read, memory_order_acquire) < k) behind = q;
        }
        if (behind < 0) return ncclSuccess;
        ncclResult_t r = check_abort_flag(c);
        if (r != ncclSuccess) return r;
        if (spins % 64 == 63 && !peer_alive(c, behind))
            return comm_fail(c, ncclRemoteError, "rank %d of %d: ncclCommSplit: rank %d (pid %d) exited before taking part",
                             c->rank, c->nranks, behind, (int)atomic_load(&c->h->ranks[behind].pid));
        if (now_s() > deadline)
            return comm_fail(c, ncclSystemError, "rank %d of %d: ncclCommSplit waited %.0f s for rank %d (DGEMU_NCCL_TIMEOUT_S "
                             "sets the limit)", c->rank, c->nranks, timeout_s(), behind);
        if (spins < 200) sched_yield(); else usleep(200);
    }
}

/* The child's 16 name bytes: FNV-1a of the parent's, the split number and the colour. */
static void child_rnd(const ncclComm_t c, uint64_t k, int color, uint8_t out[16]) {
    for (int half = 0; half < 2; half++) {
        uint64_t h = 1469598103934665603ull ^ (uint64_t)(half + 1);
        uint64_t parts[2] = { k, (uint64_t)(uint32_t)color };
        for (int i = 0; i < 16; i++) h = (h ^ c->id_rnd[i]) * 1099511628211ull;
        for (int i = 0; i < 16; i++) h = (h ^ ((const uint8_t *)parts)[i]) * 1099511628211ull;
        memcpy(out + 8 * half, &h, 8);
    }
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config) {
    DGEMU_API();
    if (!comm_ok(comm)) return note(NULL, ncclInvalidArgument, "ncclCommSplit: comm is NULL or not a communicator");
    if (!newcomm) return note(comm, ncclInvalidArgument, "ncclCommSplit: newcomm is NULL");
    *newcomm = NULL;
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
        return note(comm, ncclInvalidArgument, "ncclCommSplit: color %d is negative and not NCCL_SPLIT_NOCOLOR", color);
    if (atomic_load(&comm->user_gone)) return note(comm, ncclInvalidUsage, "ncclCommSplit: the communicator was destroyed or aborted");
    int e = atomic_load(&comm->async_error);
    if (e != ncclSuccess) return note(comm, (ncclResult_t)e, "ncclCommSplit: the communicator failed before (abort it)");
    if (!atomic_load(&comm->formed) || comm->state != ST_READY)
        return note(comm, ncclInvalidUsage, "ncclCommSplit: the communicator is not ready yet (poll ncclCommGetAsyncError "
                    "until ncclSuccess first)");
    bool blocking = comm->blocking;
    if (config) {
        ncclResult_t r = config_blocking("ncclCommSplit", comm, config, &blocking);
        if (r != ncclSuccess) return r;
    }
    pthread_mutex_lock(&comm->mu);
    uint64_t k = ++comm->splits;
    pthread_mutex_unlock(&comm->mu);
    shm_rank *me = &comm->h->ranks[comm->rank];
    ncclResult_t r = wait_all(comm, false, k - 1);   /* everyone has read split k - 1 */
    if (r != ncclSuccess) return r;
    me->split_color = color;
    me->split_key = key;
    atomic_store_explicit(&me->split_posted, k, memory_order_release);
    if ((r = wait_all(comm, true, k)) != ncclSuccess) return r;
    int n = 0, rank = 0;
    for (int q = 0; q < comm->nranks; q++) {
        const shm_rank *p = &comm->h->ranks[q];
        if (color == NCCL_SPLIT_NOCOLOR || p->split_color != color) continue;
        n++;
        if (p->split_key < key || (p->split_key == key && q < comm->rank)) rank++;
    }
    atomic_store_explicit(&me->split_read, k, memory_order_release);
    if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
    uint8_t rnd[16];
    child_rnd(comm, k, color, rnd);
    return init_named("ncclCommSplit", newcomm, n, comm->id_pid, rnd, rank, blocking, comm->device);
}
