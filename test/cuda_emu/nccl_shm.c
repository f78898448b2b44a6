/* test/cuda_emu/nccl_shm.c — the emulated NCCL's plumbing (see nccl.c): time and settings,
 * messages and the communicator's error record, reductions in rank order (f16/bf16 through
 * float), the shared segment's layout, attaching to it, and whether peers are alive. */
#include "nccl_internal.h"

/* ------------------------------------------------------------------------------------------ */
/* Small helpers: time, settings, messages                                                    */
/* ------------------------------------------------------------------------------------------ */

int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
double now_s(void) { return (double)now_ns() * 1e-9; }

/* How long blocking calls (init, destroy's flush) wait for peers before failing: real NCCL's
 * bootstrap also gives up eventually, and a test must end. DGEMU_NCCL_TIMEOUT_S overrides. */
double timeout_s(void) {
    const char *e = getenv("DGEMU_NCCL_TIMEOUT_S");
    double v = e ? atof(e) : 0;
    return v > 0 ? v : 120.0;
}

/* Slot size, chosen by the rank that creates the segment (the others read it from the header):
 * a few MB keeps the per-step synchronisation rare without reserving much of /dev/shm.
 * DGEMU_NCCL_SLOT_BYTES overrides (tests use small slots to exercise chunking). */
uint64_t slot_bytes_for(int nranks) {
    const char *e = getenv("DGEMU_NCCL_SLOT_BYTES");
    uint64_t v;
    if (e && atoll(e) > 0) v = (uint64_t)atoll(e);
    else {
        v = ((uint64_t)32 << 20) / (uint64_t)nranks;
        if (v > ((uint64_t)8 << 20)) v = (uint64_t)8 << 20;
        if (v < ((uint64_t)256 << 10)) v = (uint64_t)256 << 10;
    }
    v &= ~(uint64_t)63;
    return v < 64 ? 64 : v;
}

pthread_mutex_t g_msg_mu = PTHREAD_MUTEX_INITIALIZER;
char g_last_error[512];

bool debug_warn(void) {
    const char *e = getenv("NCCL_DEBUG");
    return e && (!strcasecmp(e, "WARN") || !strcasecmp(e, "INFO") || !strcasecmp(e, "TRACE"));
}

/* Records a message for ncclGetLastError (the comm's and the process's), NCCL_DEBUG=WARN prints it. */
void vnote(ncclComm_t c, const char *fmt, va_list ap) {
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    pthread_mutex_lock(&g_msg_mu);
    snprintf(g_last_error, sizeof g_last_error, "%s", buf);
    if (c) snprintf(c->last_error, sizeof c->last_error, "%s", buf);
    pthread_mutex_unlock(&g_msg_mu);
    if (debug_warn()) fprintf(stderr, "[%d] NCCL WARN (emulated) %s\n", (int)getpid(), buf);
}

ncclResult_t note(ncclComm_t c, ncclResult_t r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vnote(c, fmt, ap);
    va_end(ap);
    return r;
}

/* The communicator's first asynchronous error wins and stays (NCCL's async error is sticky: the
 * communicator must be aborted). */
ncclResult_t comm_fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...) {
    int expect = ncclSuccess;
    if (atomic_compare_exchange_strong(&c->async_error, &expect, (int)r)) {
        va_list ap;
        va_start(ap, fmt);
        vnote(c, fmt, ap);
        va_end(ap);
        pthread_mutex_lock(&g_msg_mu);
        memcpy(c->async_msg, c->last_error, sizeof c->async_msg);
        pthread_mutex_unlock(&g_msg_mu);
    }
    return (ncclResult_t)atomic_load(&c->async_error);
}

const char *type_name(ncclDataType_t dt) {
    static const char *const n[] = { "ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                                     "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3",
                                     "ncclFloat8e5m2" };
    return (int)dt >= 0 && (int)dt < ncclNumTypes ? n[dt] : "an unknown type";
}
const char *op_name(ncclRedOp_t op) {
    static const char *const n[] = { "ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg" };
    return (int)op >= 0 && (int)op < ncclNumOps ? n[op] : "an unknown op";
}
size_t type_size(ncclDataType_t dt) {
    switch (dt) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
    }
}

/* A handle that is not one of ours (never made, or destroyed and freed: best effort). */
bool comm_ok(const struct ncclComm *c) { return c && c->magic == COMM_MAGIC; }

/* ------------------------------------------------------------------------------------------ */
/* Reductions (in rank order, so every rank computes the same bits)                           */
/* ------------------------------------------------------------------------------------------ */

float h2f(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
    if (e == 0) {
        if (!m) x = sign;
        else {                                      /* subnormal: normalise */
            e = 113;
            while (!(m & 0x400)) { m <<= 1; e--; }
            x = sign | (e << 23) | ((m & 0x3ff) << 13);
        }
    } else if (e == 31) x = sign | 0x7f800000u | (m << 13);
    else x = sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}
uint16_t f2h(float f) {                       /* round to nearest even */
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (a > 0x7f800000u ? 0x200 : 0));
    if (a >= 0x47800000u) return (uint16_t)(sign | 0x7c00);     /* 65536 and up: infinity */
    int e = (int)(a >> 23);
    if (e < 113) {                                  /* a half subnormal (or zero) */
        if (e < 102) return (uint16_t)sign;
        uint32_t m = (a & 0x7fffff) | 0x800000;
        int shift = 126 - e;
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t h = ((uint32_t)(e - 112) << 10) | ((a & 0x7fffff) >> 13), rem = a & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* a carry into the exponent is right */
    return (uint16_t)(sign | h);
}
float bf2f(uint16_t b) { uint32_t x = (uint32_t)b << 16; float f; memcpy(&f, &x, 4); return f; }
uint16_t f2bf(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);   /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* acc[i] = acc[i] op in[i]. Signed integers wrap (computed unsigned, as the GPU does). */
#define RED_LOOP(T, EXPR) do { T *a_ = acc; const T *b_ = in; \
    for (size_t i = 0; i < n; i++) { T x = a_[i], y = b_[i]; a_[i] = (EXPR); } } while (0)
#define RED_INT(T, UT) do { switch (op) { \
    case ncclSum: case ncclAvg: RED_LOOP(T, (T)(UT)((UT)x + (UT)y)); break; \
    case ncclProd: RED_LOOP(T, (T)(UT)((UT)x * (UT)y)); break; \
    case ncclMax: RED_LOOP(T, y > x ? y : x); break; \
    case ncclMin: RED_LOOP(T, y < x ? y : x); break; \
    default: break; } } while (0)
#define RED_FLT(T) do { switch (op) { \
    case ncclSum: case ncclAvg: RED_LOOP(T, x + y); break; \
    case ncclProd: RED_LOOP(T, x * y); break; \
    case ncclMax: RED_LOOP(T, y > x ? y : x); break; \
    case ncclMin: RED_LOOP(T, y < x ? y : x); break; \
    default: break; } } while (0)
#define RED_16(TO_F, FROM_F) do { uint16_t *a_ = acc; const uint16_t *b_ = in; \
    for (size_t i = 0; i < n; i++) { float x = TO_F(a_[i]), y = TO_F(b_[i]), z; \
        switch (op) { case ncclProd: z = x * y; break; case ncclMax: z = y > x ? y : x; break; \
                      case ncclMin: z = y < x ? y : x; break; default: z = x + y; } \
        a_[i] = FROM_F(z); } } while (0)

void reduce_into(void *acc, const void *in, size_t n, ncclDataType_t dt, ncclRedOp_t op) {
    switch (dt) {
    case ncclInt8: RED_INT(int8_t, uint8_t); break;
    case ncclUint8: RED_INT(uint8_t, unsigned); break;
    case ncclInt32: RED_INT(int32_t, uint32_t); break;
    case ncclUint32: RED_INT(uint32_t, uint32_t); break;
    case ncclInt64: RED_INT(int64_t, uint64_t); break;
    case ncclUint64: RED_INT(uint64_t, uint64_t); break;
    case ncclFloat32: RED_FLT(float); break;
    case ncclFloat64: RED_FLT(double); break;
    case ncclFloat16: RED_16(h2f, f2h); break;
    case ncclBfloat16: RED_16(bf2f, f2bf); break;
    default: break;   /* fp8 reductions are refused at call time */
    }
}

/* ncclAvg: the rank-order sum divided by the rank count (integers: C division, towards zero). */
void divide_by(void *acc, size_t n, ncclDataType_t dt, int nranks) {
#define DIV_LOOP(T) do { T *a_ = acc; for (size_t i = 0; i < n; i++) a_[i] = (T)(a_[i] / (T)nranks); } while (0)
    switch (dt) {
    case ncclInt8: DIV_LOOP(int8_t); break;
    case ncclUint8: DIV_LOOP(uint8_t); break;
    case ncclInt32: DIV_LOOP(int32_t); break;
    case ncclUint32: DIV_LOOP(uint32_t); break;
    case ncclInt64: DIV_LOOP(int64_t); break;
    case ncclUint64: DIV_LOOP(uint64_t); break;
    case ncclFloat32: DIV_LOOP(float); break;
    case ncclFloat64: DIV_LOOP(double); break;
    case ncclFloat16: { uint16_t *a_ = acc; for (size_t i = 0; i < n; i++) a_[i] = f2h(h2f(a_[i]) / (float)nranks); } break;
    case ncclBfloat16: { uint16_t *a_ = acc; for (size_t i = 0; i < n; i++) a_[i] = f2bf(bf2f(a_[i]) / (float)nranks); } break;
    default: break;
    }
#undef DIV_LOOP
}

/* ------------------------------------------------------------------------------------------ */
/* Attaching to the segment, liveness                                                         */
/* ------------------------------------------------------------------------------------------ */

size_t head_bytes(int nranks) {
    size_t b = sizeof(shm_head) + sizeof(shm_rank) * (size_t)nranks;
    return (b + 4095) & ~(size_t)4095;
}
slot_hdr *slot_of(const ncclComm_t c, int q) {
    return (slot_hdr *)((char *)c->h + c->h->slots_off + (size_t)q * (sizeof(slot_hdr) + c->h->slot_bytes));
}
char *slot_data(const ncclComm_t c, int q) { return (char *)(slot_of(c, q) + 1); }

int lock_byte(int fd, int cmd, short type, int q, struct flock *out) {
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = LOCK_BASE + q, .l_len = 1, .l_pid = 0 };
    int rc = fcntl(fd, cmd, &fl);
    if (out) *out = fl;
    return rc;
}

/* Takes this rank's liveness lock: an open-file-description lock (held by this descriptor, gone
 * when the process is), or a classic POSIX lock where the kernel lacks those. */
ncclResult_t take_rank_lock(ncclComm_t c) {
    if (lock_byte(c->fd, F_OFD_SETLK, F_WRLCK, c->rank, NULL) == 0) return ncclSuccess;
    if (errno == EINVAL && lock_byte(c->fd, F_SETLK, F_WRLCK, c->rank, NULL) == 0) return ncclSuccess;
    if (errno == EAGAIN || errno == EACCES)
        return comm_fail(c, ncclInvalidUsage, "ncclCommInitRank: rank %d of %d is already taken by a live process "
                         "(the same rank given twice?)", c->rank, c->nranks);
    return comm_fail(c, ncclSystemError, "ncclCommInitRank: locking %s: %s", c->name, strerror(errno));
}

/* Whether rank q's process still holds its lock (i.e. still exists). */
bool peer_alive(ncclComm_t c, int q) {
    struct flock fl;
    if (lock_byte(c->fd, F_OFD_GETLK, F_WRLCK, q, &fl) != 0 &&
        (errno != EINVAL || lock_byte(c->fd, F_GETLK, F_WRLCK, q, &fl) != 0))
        return true;   /* cannot tell: assume alive rather than fail a healthy job */
    return fl.l_type != F_UNLCK;
}

void unlink_once(ncclComm_t c) {
    int expect = 0;
    if (c->h && c->header_ok && atomic_compare_exchange_strong(&c->h->unlinked, &expect, 1)) shm_unlink(c->name);
}

/* Creates the segment (first rank to come) or opens it. Under c->mu. Returns ncclInProgress
 * while the creator has not finished it. */
ncclResult_t attach(ncclComm_t c) {
    if (!c->h) {
        int fd = shm_open(c->name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            uint64_t slot = slot_bytes_for(c->nranks);
            size_t hb = head_bytes(c->nranks), total = hb + (size_t)c->nranks * (sizeof(slot_hdr) + slot);
            int err = ftruncate(fd, (off_t)total) ? errno : 0;
            /* reserve the pages now: a full /dev/shm is then an error here, not a SIGBUS later */
            if (!err) err = posix_fallocate(fd, 0, (off_t)total);
            void *p = err ? MAP_FAILED : mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) {
                if (!err) err = errno;
                close(fd);
                shm_unlink(c->name);
                return comm_fail(c, ncclSystemError, "ncclCommInitRank: cannot make %zu bytes of shared memory /dev/shm%s: %s",
                                 total, c->name, strerror(err));
            }
            shm_head *h = p;
            h->nranks = c->nranks;
            h->slot_bytes = slot;
            h->slots_off = hb;
            h->seg_bytes = total;
            c->fd = fd;
            c->h = h;
            c->map_bytes = total;
            atomic_store_explicit(&h->magic, SHM_MAGIC, memory_order_release);
        } else if (errno == EEXIST) {
            fd = shm_open(c->name, O_RDWR, 0600);
            if (fd < 0) return errno == ENOENT ? ncclInProgress : comm_fail(c, ncclSystemError, "ncclCommInitRank: opening /dev/shm%s: %s", c->name, strerror(errno));
            struct stat st;
            if (fstat(fd, &st) != 0 || st.st_size == 0) { close(fd); return ncclInProgress; }   /* creator not done yet */
            void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) {
                int err = errno;
                close(fd);
                return comm_fail(c, ncclSystemError, "ncclCommInitRank: mapping /dev/shm%s: %s", c->name, strerror(err));
            }
            c->fd = fd;
            c->h = p;
            c->map_bytes = (size_t)st.st_size;
        } else {
            return comm_fail(c, ncclSystemError, "ncclCommInitRank: creating /dev/shm%s: %s", c->name, strerror(errno));
        }
    }
    if (!c->header_ok) {
        if (atomic_load_explicit(&c->h->magic, memory_order_acquire) != SHM_MAGIC) return ncclInProgress;
        if (c->h->nranks != c->nranks)
            return comm_fail(c, ncclInvalidUsage, "ncclCommInitRank: rank %d was given nranks=%d but the communicator of this id "
                             "was made with nranks=%d", c->rank, c->nranks, c->h->nranks);
        if (c->h->seg_bytes > c->map_bytes)
            return comm_fail(c, ncclInternalError, "ncclCommInitRank: /dev/shm%s is smaller than its header says", c->name);
        c->header_ok = true;
    }
    if (!c->joined_self) {
        ncclResult_t r = take_rank_lock(c);
        if (r != ncclSuccess) return r;
        shm_rank *me = &c->h->ranks[c->rank];
        int32_t expect = 0;
        if (!atomic_compare_exchange_strong(&me->joined, &expect, 1))
            return comm_fail(c, ncclInvalidUsage, "ncclCommInitRank: rank %d of %d joined this communicator twice "
                             "(the same rank given to two processes?)", c->rank, c->nranks);
        atomic_store(&me->pid, (int32_t)getpid());
        me->device = c->device;
        c->joined_self = true;
        /* the last rank in removes the name: every rank has it mapped, nobody needs to open it again */
        if (atomic_fetch_add(&c->h->joined, 1) + 1 == c->nranks) unlink_once(c);
    }
    return ncclSuccess;
}

/* The abort flag, once some rank has set it (and written its reason: the few microseconds while
 * it is being written count as not yet, so the reason is never lost): ncclRemoteError. This
 * rank's own abort is handled before this is asked. */
ncclResult_t check_abort_flag(ncclComm_t c) {
    if (atomic_load_explicit(&c->h->aborted, memory_order_acquire) != 1) return ncclSuccess;
    return comm_fail(c, ncclRemoteError, "rank %d of %d: rank %d aborted the communicator (%s)", c->rank, c->nranks,
                     c->h->abort_rank, c->h->abort_reason);
}

/* While this rank needs `step` from every peer: an error when one never will provide it (it
 * aborted, left, or its process is gone). Liveness is checked at most every 10 ms. */
ncclResult_t check_peers(ncclComm_t c, uint64_t step, const char *what) {
    ncclResult_t r = check_abort_flag(c);
    if (r != ncclSuccess) return r;
    int64_t t = now_ns(), last = atomic_load(&c->last_live_check_ns);
    bool live_check = t - last > 10000000 && atomic_compare_exchange_strong(&c->last_live_check_ns, &last, t);
    for (int q = 0; q < c->nranks; q++) {
        if (q == c->rank) continue;
        shm_rank *p = &c->h->ranks[q];
        if (atomic_load_explicit(&p->posted, memory_order_acquire) >= step) continue;
        if (!atomic_load(&p->joined)) continue;   /* not there yet (init) */
        if (atomic_load(&p->left))
            return comm_fail(c, ncclRemoteError, "rank %d of %d: %s: rank %d destroyed its communicator before taking part",
                             c->rank, c->nranks, what, q);
        if (live_check && !peer_alive(c, q))
            return comm_fail(c, ncclRemoteError, "rank %d of %d: %s: rank %d (pid %d) exited without destroying or aborting "
                             "its communicator", c->rank, c->nranks, what, q, (int)atomic_load(&p->pid));
    }
    return ncclSuccess;
}

/* One step of communicator creation; ncclSuccess once every rank joined. Under c->mu. */
ncclResult_t init_progress(ncclComm_t c) {
    int e = atomic_load(&c->async_error);
    if (e != ncclSuccess) return (ncclResult_t)e;
    if (atomic_load(&c->formed)) return ncclSuccess;
    ncclResult_t r = attach(c);
    if (r == ncclSuccess) {
        if (atomic_load_explicit(&c->h->joined, memory_order_acquire) == c->nranks) {
            atomic_store(&c->formed, 1);
            return ncclSuccess;
        }
        r = check_peers(c, 1, "ncclCommInitRank");   /* a peer that joined and died */
        if (r == ncclSuccess) r = ncclInProgress;
    }
    if (r == ncclInProgress && now_s() - c->t_start > timeout_s()) {
        char missing[160] = "";
        size_t len = 0;
        for (int q = 0; c->header_ok && q < c->nranks && len + 12 < sizeof missing; q++)
            if (!atomic_load(&c->h->ranks[q].joined)) len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", len ? ", " : "", q);
        return comm_fail(c, ncclSystemError, "ncclCommInitRank: rank %d of %d waited %.0f s but %s%s never joined "
                         "(DGEMU_NCCL_TIMEOUT_S sets the limit)", c->rank, c->nranks, timeout_s(),
                         len ? "ranks " : "the communicator's creator", missing);
    }
    return r;
}

/* Drops a reference; the last one unmaps and frees. A rank is "left" only when nothing of its
 * communicator can run any more. */
void comm_release(ncclComm_t c) {
    if (atomic_fetch_sub(&c->refs, 1) != 1) return;
    if (c->h) {
        if (c->joined_self) atomic_store(&c->h->ranks[c->rank].left, 1);
        if (c->header_ok && atomic_load(&c->h->joined) < c->nranks) unlink_once(c);   /* a rank never came */
        munmap(c->h, c->map_bytes);
    }
    if (c->fd >= 0) close(c->fd);   /* releases the liveness lock */
    c->magic = 0;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

