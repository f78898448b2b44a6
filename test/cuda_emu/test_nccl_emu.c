/* test/cuda_emu/test_nccl_emu.c — the emulated NCCL (test/cuda_emu/nccl.c) across processes:
 * the parent makes a unique id, forks one child per rank (each on emulated device
 * rank % dgemu_device_count()) and every child checks its side; main returns non-zero when any
 * check of any rank fails or a rank hangs.
 *
 * Scenarios, for 2 and 3 ranks:
 *   collectives — non-blocking init (the last rank joins late: nobody may be ready before it
 *     called init, and every rank sees ncclInProgress at least twice), the communicator queries,
 *     all-reduce sum/avg/max/min/prod of f32/f64/i64 in and out of place (bit-exact against the
 *     rank-order result, so every rank holds the same bits), a multi-chunk and a 64 MB
 *     all-reduce, broadcast from root 1, all-gather in and out of place, argument errors,
 *     non-blocking finalize and destroy;
 *   abort — the last rank queues an all-reduce and aborts; the others, waiting in that
 *     all-reduce, must see an error within a few seconds (rank 0 by polling cudaStreamQuery and
 *     ncclCommGetAsyncError, the others by ncclCommGetAsyncError alone), and the aborter's own
 *     stream must drain;
 *   exit (2 ranks) — the last rank exits without destroying its communicator: same for the others;
 *   reduce and split (1, 3, 4 ranks) — ncclReduce to the last rank (every op, f64/i64, in and out
 *     of place, bit-exact on the root, non-roots' buffers untouched), ncclCommSplit by parity with
 *     reversed keys (sizes, ranks, an all-reduce over each part), with NCCL_SPLIT_NOCOLOR and a
 *     non-blocking config, bad arguments refused, and the parent still working after its splits;
 * and a communicator of one rank. At the end no shared-memory file of ours may be left.
 *
 * Build: gcc -std=c11 -D_GNU_SOURCE -O2 -Itest/cuda_emu/include -Itest/cuda_emu test/cuda_emu/test_nccl_emu.c
 *        -Lbuild/emu/lib -Wl,-rpath,$PWD/build/emu/lib -ldgemu -lrt -lpthread -o build/emu/test_nccl_emu */
#include <nccl.h>
#include "emu_internal.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;

#define FAIL(...) do { fprintf(stderr, "test_nccl_emu rank %d: FAIL at line %d: ", g_rank, __LINE__); \
                       fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); return 1; } while (0)
#define CHECK(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)
#define NCCL_OK(call) do { ncclResult_t r_ = (call); \
    CHECK(r_ == ncclSuccess, "%s returned %d (%s): %s", #call, (int)r_, ncclGetErrorString(r_), ncclGetLastError(NULL)); } while (0)
#define CUDA_OK(call) do { cudaError_t e_ = (call); CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_)); } while (0)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* What the ranks of one group share (an anonymous shared page made before the fork). */
typedef struct shared { double init_called[8]; double ready_at[8]; } shared;

/* ---- collectives ---- */

/* Rank q's value at i, per type (varied signs and magnitudes so that order matters for floats). */
static double fval(int q, size_t i) { return (double)((i * 37 + (size_t)q * 11) % 101) * 0.37 - 17.0 + q * 1.13; }
static int64_t ival(int q, size_t i) { return (int64_t)((i * 7919 + (size_t)q * 104729) % 1000003) - 500000; }

typedef enum { T_F32, T_F64, T_I64 } ttype;
static const ncclDataType_t NT[] = { ncclFloat32, ncclFloat64, ncclInt64 };
static const size_t TS[] = { 4, 8, 8 };
static const char *const TN[] = { "f32", "f64", "i64" };

static void fill(ttype t, int q, void *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (t == T_F32) ((float *)buf)[i] = (float)fval(q, i);
        else if (t == T_F64) ((double *)buf)[i] = fval(q, i);
        else ((int64_t *)buf)[i] = ival(q, i);
    }
}

/* The rank-order result, computed the way the emulator must (same operations, same order). */
static void expect(ttype t, ncclRedOp_t op, int n, void *out, size_t count) {
    for (size_t i = 0; i < count; i++) {
        if (t == T_F32) {
            float a = (float)fval(0, i);
            for (int q = 1; q < n; q++) {
                float b = (float)fval(q, i);
                a = op == ncclProd ? a * b : op == ncclMax ? (b > a ? b : a) : op == ncclMin ? (b < a ? b : a) : a + b;
            }
            ((float *)out)[i] = op == ncclAvg ? a / (float)n : a;
        } else if (t == T_F64) {
            double a = fval(0, i);
            for (int q = 1; q < n; q++) {
                double b = fval(q, i);
                a = op == ncclProd ? a * b : op == ncclMax ? (b > a ? b : a) : op == ncclMin ? (b < a ? b : a) : a + b;
            }
            ((double *)out)[i] = op == ncclAvg ? a / n : a;
        } else {
            uint64_t a = (uint64_t)ival(0, i);
            for (int q = 1; q < n; q++) {
                int64_t b = ival(q, i), x = (int64_t)a;
                a = op == ncclProd ? a * (uint64_t)b : op == ncclMax ? (uint64_t)(b > x ? b : x)
                  : op == ncclMin ? (uint64_t)(b < x ? b : x) : a + (uint64_t)b;
            }
            ((int64_t *)out)[i] = op == ncclAvg ? (int64_t)a / n : (int64_t)a;
        }
    }
}

/* Waits for the stream, failing (instead of hanging) when the communicator reports an error. */
static int sync_stream(ncclComm_t comm, cudaStream_t st, double limit_s) {
    double deadline = now_s() + limit_s;
    for (;;) {
        cudaError_t e = cudaStreamQuery(st);
        ncclResult_t r = ncclSuccess;
        NCCL_OK(ncclCommGetAsyncError(comm, &r));
        CHECK(r == ncclSuccess || r == ncclInProgress, "async error %s: %s", ncclGetErrorString(r), ncclGetLastError(comm));
        if (e == cudaSuccess) return 0;
        CHECK(e == cudaErrorNotReady, "cudaStreamQuery: %s", cudaGetErrorString(e));
        CHECK(now_s() < deadline, "the stream did not finish within %.0f s", limit_s);
        usleep(100);
    }
}

static int one_all_reduce(ncclComm_t comm, cudaStream_t st, int rank, int n, ttype t, ncclRedOp_t op, size_t count,
                          bool in_place, const char *opname) {
    size_t nb = count * TS[t];
    void *h = malloc(nb), *want = malloc(nb), *dsend = NULL, *drecv = NULL;
    CHECK(h && want, "out of memory");
    fill(t, rank, h, count);
    expect(t, op, n, want, count);
    CUDA_OK(cudaMalloc(&dsend, nb));
    if (!in_place) CUDA_OK(cudaMalloc(&drecv, nb));
    else drecv = dsend;
    CUDA_OK(cudaMemcpy(dsend, h, nb, cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllReduce(dsend, drecv, count, NT[t], op, comm, st));
    if (sync_stream(comm, st, 60)) return 1;
    memset(h, 0, nb);
    CUDA_OK(cudaMemcpy(h, drecv, nb, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++)
        if (memcmp((char *)h + i * TS[t], (char *)want + i * TS[t], TS[t]) != 0)
            FAIL("all-reduce %s %s of %zu (%s): element %zu differs from the rank-order result", opname, TN[t], count,
                 in_place ? "in place" : "out of place", i);
    if (!in_place) {   /* the send buffer is left alone */
        CUDA_OK(cudaMemcpy(h, dsend, nb, cudaMemcpyDeviceToHost));
        fill(t, rank, want, count);
        CHECK(memcmp(h, want, nb) == 0, "out-of-place all-reduce changed its send buffer");
        cudaFree(drecv);
    }
    cudaFree(dsend);
    free(h);
    free(want);
    return 0;
}

/* 64 MB of f32 in one all-reduce (many chunks). */
static int big_all_reduce(ncclComm_t comm, cudaStream_t st, int rank, int n) {
    size_t count = (size_t)16 << 20, nb = count * 4;
    float *h = malloc(nb);
    void *d = NULL;
    CHECK(h, "out of memory");
    for (size_t i = 0; i < count; i++) h[i] = (float)(i % 1024) + (float)rank;
    CUDA_OK(cudaMalloc(&d, nb));
    CUDA_OK(cudaMemcpy(d, h, nb, cudaMemcpyHostToDevice));
    double t0 = now_s();
    NCCL_OK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, st));
    if (sync_stream(comm, st, 120)) return 1;
    double dt = now_s() - t0;
    CUDA_OK(cudaMemcpy(h, d, nb, cudaMemcpyDeviceToHost));
    float base = (float)(n * (n - 1) / 2);
    for (size_t i = 0; i < count; i++)
        CHECK(h[i] == (float)(i % 1024) * (float)n + base, "64 MB all-reduce: element %zu is %g, want %g", i, h[i],
              (float)(i % 1024) * (float)n + base);
    if (rank == 0) printf("  64 MB f32 all-reduce over %d ranks: %.2f s\n", n, dt);
    cudaFree(d);
    free(h);
    return 0;
}

static int broadcast_checks(ncclComm_t comm, cudaStream_t st, int rank) {
    const int root = 1;
    size_t count = 300001;   /* bytes: several chunks */
    unsigned char *h = malloc(count), *d = NULL, *d2 = NULL;
    CHECK(h, "out of memory");
    for (size_t i = 0; i < count; i++) h[i] = (unsigned char)(rank == root ? (i * 13 + 7) : 0xee);
    CUDA_OK(cudaMalloc((void **)&d, count));
    CUDA_OK(cudaMalloc((void **)&d2, count));
    CUDA_OK(cudaMemcpy(d, h, count, cudaMemcpyHostToDevice));
    /* in place, then out of place from the same source */
    NCCL_OK(ncclBroadcast(d, d, count, ncclUint8, root, comm, st));
    NCCL_OK(ncclBroadcast(d, d2, count, ncclUint8, root, comm, st));
    if (sync_stream(comm, st, 60)) return 1;
    for (int k = 0; k < 2; k++) {
        CUDA_OK(cudaMemcpy(h, k ? d2 : d, count, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i++)
            CHECK(h[i] == (unsigned char)(i * 13 + 7), "broadcast (%s) from root %d: byte %zu is %u", k ? "out of place" : "in place",
                  root, i, h[i]);
    }
    cudaFree(d);
    cudaFree(d2);
    free(h);
    return 0;
}

static int all_gather_checks(ncclComm_t comm, cudaStream_t st, int rank, int n) {
    size_t count = 70001;    /* f32 per rank: several chunks */
    size_t nb = count * 4;
    float *h = malloc(nb * (size_t)n);
    void *dsend = NULL, *drecv = NULL;
    CHECK(h, "out of memory");
    for (size_t i = 0; i < count; i++) h[i] = (float)fval(rank, i);
    CUDA_OK(cudaMalloc(&dsend, nb));
    CUDA_OK(cudaMalloc(&drecv, nb * (size_t)n));
    CUDA_OK(cudaMemcpy(dsend, h, nb, cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllGather(dsend, drecv, count, ncclFloat32, comm, st));
    if (sync_stream(comm, st, 60)) return 1;
    CUDA_OK(cudaMemcpy(h, drecv, nb * (size_t)n, cudaMemcpyDeviceToHost));
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++)
            CHECK(h[(size_t)q * count + i] == (float)fval(q, i), "all-gather: rank %d's element %zu wrong", q, i);
    /* in place: this rank's part already sits at its offset of the receive buffer */
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++) h[(size_t)q * count + i] = q == rank ? (float)fval(rank, i) + 1000.0f : -1.0f;
    CUDA_OK(cudaMemcpy(drecv, h, nb * (size_t)n, cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllGather((char *)drecv + (size_t)rank * nb, drecv, count, ncclFloat32, comm, st));
    if (sync_stream(comm, st, 60)) return 1;
    CUDA_OK(cudaMemcpy(h, drecv, nb * (size_t)n, cudaMemcpyDeviceToHost));
    for (int q = 0; q < n; q++)
        for (size_t i = 0; i < count; i++)
            CHECK(h[(size_t)q * count + i] == (float)fval(q, i) + 1000.0f, "in-place all-gather: rank %d's element %zu wrong", q, i);
    cudaFree(dsend);
    cudaFree(drecv);
    free(h);
    return 0;
}

/* Argument errors come back at call time, queue nothing, and leave a message. */
static int error_checks(ncclComm_t comm, cudaStream_t st, int n) {
    float host[4] = { 0 };
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, 64));
    CHECK(ncclAllReduce(host, host, 4, ncclFloat32, ncclSum, comm, st) == ncclInvalidArgument, "a host buffer was accepted");
    CHECK(strstr(ncclGetLastError(comm), "device memory"), "the message for a host buffer is '%s'", ncclGetLastError(comm));
    CHECK(ncclAllReduce(d, d, 1000, ncclFloat32, ncclSum, comm, st) == ncclInvalidArgument, "a too-short device buffer was accepted");
    CHECK(ncclBroadcast(d, d, 4, ncclFloat32, n, comm, st) == ncclInvalidArgument, "root %d was accepted", n);
    CHECK(ncclBroadcast(d, d, 4, ncclFloat32, -1, comm, st) == ncclInvalidArgument, "root -1 was accepted");
    CHECK(ncclAllReduce(d, d, 4, ncclFloat32, ncclSum, NULL, st) == ncclInvalidArgument, "a NULL comm was accepted");
    CHECK(ncclAllReduce(d, d, 4, ncclFloat32, (ncclRedOp_t)17, comm, st) == ncclInvalidArgument, "op 17 was accepted");
    CHECK(ncclAllReduce(d, d, 4, (ncclDataType_t)42, ncclSum, comm, st) == ncclInvalidArgument, "type 42 was accepted");
    CHECK(ncclAllReduce(d, d, 4, ncclFloat8e4m3, ncclSum, comm, st) == ncclInvalidArgument, "an fp8 reduction was accepted");
    CHECK(ncclAllGather(d, d, (size_t)(16 / n + 1), ncclFloat32, comm, st) == ncclInvalidArgument,
          "an all-gather into a short buffer was accepted");
    NCCL_OK(ncclAllReduce(NULL, NULL, 0, ncclFloat32, ncclSum, comm, st));   /* count 0: nothing to do */
    ncclResult_t r = ncclSuccess;
    NCCL_OK(ncclCommGetAsyncError(comm, &r));
    CHECK(r == ncclSuccess, "argument errors changed the async error to %d", (int)r);
    CHECK(ncclCommGetAsyncError(NULL, &r) == ncclInvalidArgument, "GetAsyncError(NULL) accepted");
    cudaFree(d);
    return 0;
}

static int scenario_collectives(int rank, int n, ncclUniqueId id, shared *sh) {
    int ndev = dgemu_device_count();
    CUDA_OK(cudaSetDevice(rank % ndev));
    if (rank == n - 1 && n > 1) usleep(300000);   /* the last rank comes late */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t comm = NULL;
    sh->init_called[rank] = now_s();
    ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &cfg);
    CHECK(r == ncclInProgress, "non-blocking ncclCommInitRankConfig returned %d (%s), want ncclInProgress", (int)r, ncclGetErrorString(r));
    CHECK(comm, "non-blocking init gave no communicator to poll");
    int polls = 0;
    double deadline = now_s() + 30;
    for (;;) {
        NCCL_OK(ncclCommGetAsyncError(comm, &r));
        if (r != ncclInProgress) break;
        polls++;
        CHECK(now_s() < deadline, "init still in progress after 30 s");
        usleep(1000);
    }
    CHECK(r == ncclSuccess, "init ended with %s: %s", ncclGetErrorString(r), ncclGetLastError(comm));
    sh->ready_at[rank] = now_s();
    CHECK(polls >= 2, "init reported ncclInProgress %d times, want at least 2", polls);
    CHECK(n == 1 || sh->ready_at[rank] >= sh->init_called[n - 1],
          "the communicator was ready before rank %d called init", n - 1);

    int v = 0, dev = -1;
    NCCL_OK(ncclCommCount(comm, &v));
    CHECK(v == n, "ncclCommCount %d", v);
    NCCL_OK(ncclCommUserRank(comm, &v));
    CHECK(v == rank, "ncclCommUserRank %d", v);
    NCCL_OK(ncclCommCuDevice(comm, &dev));
    CHECK(dev == rank % ndev, "ncclCommCuDevice %d", dev);
    NCCL_OK(ncclGetVersion(&v));
    CHECK(v == NCCL_VERSION_CODE && v >= 22800, "ncclGetVersion %d", v);

    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));
    const ncclRedOp_t ops[] = { ncclSum, ncclAvg, ncclMax, ncclMin, ncclProd };
    const char *const opn[] = { "sum", "avg", "max", "min", "prod" };
    const size_t sizes[] = { 1, 1000, 100003 };
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 5; k++)
            for (int s = 0; s < 3; s++) {
                if (ops[k] == ncclProd && t == T_F32 && sizes[s] > 1000) continue;   /* enough: keeps the test short */
                if (one_all_reduce(comm, st, rank, n, (ttype)t, ops[k], sizes[s], (s + k) % 2 == 0, opn[k])) return 1;
            }
    if (big_all_reduce(comm, st, rank, n)) return 1;
    if (n > 1 && broadcast_checks(comm, st, rank)) return 1;
    if (all_gather_checks(comm, st, rank, n)) return 1;
    if (error_checks(comm, st, n)) return 1;
    /* the communicator still works after the refused calls (no sequence number was lost) */
    if (one_all_reduce(comm, st, rank, n, T_F64, ncclSum, 5000, true, "sum")) return 1;

    /* finalize: in progress, then success; then destroy */
    r = ncclCommFinalize(comm);
    CHECK(r == ncclInProgress || r == ncclSuccess, "non-blocking ncclCommFinalize returned %s", ncclGetErrorString(r));
    deadline = now_s() + 30;
    do {
        NCCL_OK(ncclCommGetAsyncError(comm, &r));
        CHECK(now_s() < deadline, "finalize still in progress after 30 s");
    } while (r == ncclInProgress);
    CHECK(r == ncclSuccess, "finalize ended with %s: %s", ncclGetErrorString(r), ncclGetLastError(comm));
    NCCL_OK(ncclCommDestroy(comm));
    CUDA_OK(cudaStreamDestroy(st));
    return 0;
}

/* ---- ncclReduce and ncclCommSplit ---- */

/* i64 values of the ranks in `members` (parent ranks), summed in member order */
static int64_t member_sum(const int *members, int m, size_t i) {
    uint64_t a = 0;
    for (int j = 0; j < m; j++) a += (uint64_t)ival(members[j], i);
    return (int64_t)a;
}

/* An i64 SUM all-reduce on comm of this rank's ival(rank), equal to the sum over members. */
static int split_all_reduce(ncclComm_t comm, cudaStream_t st, int rank, const int *members, int m, const char *what) {
    size_t count = 5003, nb = count * 8;
    int64_t *h = malloc(nb);
    void *d = NULL;
    CHECK(h, "out of memory");
    for (size_t i = 0; i < count; i++) h[i] = ival(rank, i);
    CUDA_OK(cudaMalloc(&d, nb));
    CUDA_OK(cudaMemcpy(d, h, nb, cudaMemcpyHostToDevice));
    NCCL_OK(ncclAllReduce(d, d, count, ncclInt64, ncclSum, comm, st));
    if (sync_stream(comm, st, 60)) return 1;
    CUDA_OK(cudaMemcpy(h, d, nb, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i++)
        CHECK(h[i] == member_sum(members, m, i), "%s: all-reduce element %zu is %lld, want %lld", what, i, (long long)h[i],
              (long long)member_sum(members, m, i));
    cudaFree(d);
    free(h);
    return 0;
}

static int scenario_split(int rank, int n, ncclUniqueId id) {
    CUDA_OK(cudaSetDevice(rank % dgemu_device_count()));
    ncclComm_t comm = NULL;
    NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));

    /* ncclReduce to the last rank: f64 and i64 with every op, in and out of place; the others'
     * recvbuff is NULL (allowed off the root) or left alone */
    const int root = n - 1;
    const ncclRedOp_t ops[] = { ncclSum, ncclAvg, ncclMax, ncclMin, ncclProd };
    size_t count = 70001;   /* several slots */
    for (int t = T_F64; t <= T_I64; t++)
        for (int k = 0; k < 5; k++) {
            size_t nb = count * TS[t];
            void *h = malloc(nb), *want = malloc(nb), *d = NULL, *r = NULL;
            CHECK(h && want, "out of memory");
            fill((ttype)t, rank, h, count);
            CUDA_OK(cudaMalloc(&d, nb));
            CUDA_OK(cudaMemcpy(d, h, nb, cudaMemcpyHostToDevice));
            bool in_place = k % 2 == 0;
            if (rank == root && !in_place) CUDA_OK(cudaMalloc(&r, nb));
            else if (rank == root) r = d;
            NCCL_OK(ncclReduce(d, r, count, NT[t], ops[k], root, comm, st));
            if (sync_stream(comm, st, 60)) return 1;
            if (rank == root) {
                expect((ttype)t, ops[k], n, want, count);
                CUDA_OK(cudaMemcpy(h, r, nb, cudaMemcpyDeviceToHost));
                CHECK(memcmp(h, want, nb) == 0, "ncclReduce %s op %d (%s): the root's result differs from the rank-order one",
                      TN[t], (int)ops[k], in_place ? "in place" : "out of place");
                if (r != d) cudaFree(r);
            } else {   /* a non-root's send buffer is its own */
                CUDA_OK(cudaMemcpy(h, d, nb, cudaMemcpyDeviceToHost));
                fill((ttype)t, rank, want, count);
                CHECK(memcmp(h, want, nb) == 0, "ncclReduce changed a non-root's send buffer");
            }
            cudaFree(d);
            free(h);
            free(want);
        }
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, 64));
    CHECK(ncclReduce(d, d, 4, ncclFloat32, ncclSum, n, comm, st) == ncclInvalidArgument, "ncclReduce to root %d accepted", n);
    ncclComm_t bad = NULL;
    CHECK(ncclCommSplit(comm, -5, 0, &bad, NULL) == ncclInvalidArgument && !bad, "ncclCommSplit with color -5 accepted");
    CHECK(ncclCommSplit(comm, 0, 0, NULL, NULL) == ncclInvalidArgument, "ncclCommSplit into NULL accepted");
    cudaFree(d);

    /* by parity, keys reversed: the child's ranks run against the parent's order */
    ncclComm_t par = NULL;
    NCCL_OK(ncclCommSplit(comm, rank % 2, -rank, &par, NULL));
    CHECK(par, "the parity split gave no communicator");
    int members[8], m = 0, v = -1;
    for (int q = n - 1; q >= 0; q--) if (q % 2 == rank % 2) members[m++] = q;
    NCCL_OK(ncclCommCount(par, &v));
    CHECK(v == m, "parity communicator of %d ranks, want %d", v, m);
    NCCL_OK(ncclCommUserRank(par, &v));
    int want_rank = 0;
    while (members[want_rank] != rank) want_rank++;
    CHECK(v == want_rank, "rank %d in the parity communicator, want %d (keys reversed)", v, want_rank);
    if (split_all_reduce(par, st, rank, members, m, "parity split")) return 1;

    /* rank 0 left out; the others non-blocking (config), a duplicate of the rest */
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclComm_t rest = NULL;
    ncclResult_t r = ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 7, rank, &rest, &cfg);
    if (rank == 0) {
        CHECK(r == ncclSuccess && rest == NULL, "NCCL_SPLIT_NOCOLOR gave %s and %p, want ncclSuccess and NULL",
              ncclGetErrorString(r), (void *)rest);
    } else {
        CHECK(r == ncclInProgress && rest, "a non-blocking split returned %s", ncclGetErrorString(r));
        double deadline = now_s() + 30;
        do {
            NCCL_OK(ncclCommGetAsyncError(rest, &r));
            CHECK(now_s() < deadline, "the non-blocking split still in progress after 30 s");
        } while (r == ncclInProgress);
        CHECK(r == ncclSuccess, "the non-blocking split ended with %s", ncclGetErrorString(r));
        m = 0;
        for (int q = 1; q < n; q++) members[m++] = q;
        if (split_all_reduce(rest, st, rank, members, m, "split without rank 0")) return 1;
    }
    /* the parent still works after its splits, and with its children alive */
    for (int q = 0; q < n; q++) members[q] = q;
    if (split_all_reduce(comm, st, rank, members, n, "the parent after splitting")) return 1;
    if (rest) NCCL_OK(ncclCommDestroy(rest));
    NCCL_OK(ncclCommDestroy(par));
    NCCL_OK(ncclCommDestroy(comm));
    CUDA_OK(cudaStreamDestroy(st));
    return 0;
}

/* ---- failures: a peer that aborts, or exits ---- */

enum { PEER_ABORTS, PEER_EXITS };

static int scenario_failure(int rank, int n, ncclUniqueId id, int mode) {
    CUDA_OK(cudaSetDevice(rank % dgemu_device_count()));
    ncclComm_t comm = NULL;
    NCCL_OK(ncclCommInitRank(&comm, n, id, rank));   /* blocking init */
    cudaStream_t st;
    CUDA_OK(cudaStreamCreate(&st));
    void *d = NULL;
    size_t count = 100000;
    CUDA_OK(cudaMalloc(&d, count * 4));
    CUDA_OK(cudaMemset(d, 0, count * 4));
    if (rank == n - 1) {
        usleep(200000);   /* the others are waiting in their all-reduce by now */
        if (mode == PEER_EXITS) _exit(0);   /* no destroy, no abort: the process is just gone */
        /* queue the matching all-reduce, then abort before it ran: it must end, with an error */
        NCCL_OK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, st));
        NCCL_OK(ncclCommAbort(comm));
        double t0 = now_s();
        CUDA_OK(cudaStreamSynchronize(st));
        CHECK(now_s() - t0 < 5, "the aborted rank's stream took %.1f s to drain", now_s() - t0);
        return 0;
    }
    NCCL_OK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, st));
    double t0 = now_s();
    ncclResult_t r = ncclSuccess;
    bool query_stream = rank == 0;   /* rank 0 runs its work by querying; the others poll NCCL alone */
    for (;;) {
        if (query_stream) {
            cudaError_t e = cudaStreamQuery(st);
            CHECK(e == cudaSuccess || e == cudaErrorNotReady, "cudaStreamQuery: %s", cudaGetErrorString(e));
        }
        NCCL_OK(ncclCommGetAsyncError(comm, &r));
        if (r != ncclSuccess && r != ncclInProgress) break;
        CHECK(now_s() - t0 < 10, "no error 10 s after the peer %s (async error %d)", mode == PEER_EXITS ? "exited" : "aborted", (int)r);
        usleep(1000);
    }
    double dt = now_s() - t0;
    CHECK(r == ncclRemoteError, "the peer's %s gave %s, want ncclRemoteError", mode == PEER_EXITS ? "exit" : "abort", ncclGetErrorString(r));
    const char *msg = ncclGetLastError(comm);
    /* the cause, or (with 3 ranks) the abort of the other survivor, which aborts as soon as it
     * has seen the cause: the first to notice must have named it */
    CHECK(strstr(msg, mode == PEER_EXITS ? "exited" : "abort") || strstr(msg, "aborted the communicator"), "message '%s'", msg);
    if (rank == 0) printf("  %d ranks, last rank %s: rank 0 saw \"%s\" after %.2f s\n", n,
                          mode == PEER_EXITS ? "exits" : "aborts", msg, dt);
    /* the queued all-reduce must now end instead of waiting for the peer */
    double t1 = now_s();
    CUDA_OK(cudaStreamSynchronize(st));
    CHECK(now_s() - t1 < 5, "the stream took %.1f s to drain after the error", now_s() - t1);
    CHECK(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comm, st) == ncclRemoteError,
          "a collective on the failed communicator was accepted");
    NCCL_OK(ncclCommAbort(comm));
    cudaFree(d);
    CUDA_OK(cudaStreamDestroy(st));
    return 0;
}

/* ---- driver ---- */

enum { S_COLLECTIVES, S_ABORT, S_EXIT, S_SPLIT };

static int run_group(int scenario, int n, const char *name) {
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess) { fprintf(stderr, "ncclGetUniqueId failed\n"); return 1; }
    shared *sh = mmap(NULL, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) { perror("mmap"); return 1; }
    memset(sh, 0, sizeof *sh);
    fflush(stdout);
    pid_t pids[8];
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] < 0) { perror("fork"); return 1; }
        if (pids[r] == 0) {
            g_rank = r;
            int rc = scenario == S_COLLECTIVES ? scenario_collectives(r, n, id, sh)
                   : scenario == S_SPLIT ? scenario_split(r, n, id)
                   : scenario_failure(r, n, id, scenario == S_ABORT ? PEER_ABORTS : PEER_EXITS);
            fflush(stdout);
            _exit(rc);
        }
    }
    int failed = 0, left = n;
    double deadline = now_s() + 300;
    while (left > 0) {
        int status;
        pid_t p = waitpid(-1, &status, WNOHANG);
        if (p > 0) {
            left--;
            int r = 0;
            while (r < n && pids[r] != p) r++;
            if (r < n) pids[r] = 0;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                fprintf(stderr, "test_nccl_emu: %s with %d ranks: rank %d %s %d\n", name, n, r,
                        WIFEXITED(status) ? "exited with" : "was killed by signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                failed = 1;
            }
            continue;
        }
        if (now_s() > deadline) {
            fprintf(stderr, "test_nccl_emu: %s with %d ranks: hung; killing the ranks left\n", name, n);
            for (int r = 0; r < n; r++) if (pids[r] > 0) kill(pids[r], SIGKILL);
            failed = 1;
            deadline = now_s() + 1e9;
        }
        usleep(10000);
    }
    munmap(sh, sizeof *sh);
    printf("%s: %s with %d rank%s\n", failed ? "FAIL" : "PASS", name, n, n > 1 ? "s" : "");
    return failed;
}

/* Files of ours left in /dev/shm (names carry this process's pid: it made the ids). */
static int leftovers(void) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dgemu-nccl-%d-", (int)getpid());
    DIR *dir = opendir("/dev/shm");
    int n = 0;
    if (!dir) return 0;
    for (struct dirent *e; (e = readdir(dir));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) { fprintf(stderr, "test_nccl_emu: /dev/shm/%s was left behind\n", e->d_name); n++; }
    closedir(dir);
    return n;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* small slots so that every size above takes several chunks (the emulator's default is MBs) */
    setenv("DGEMU_NCCL_SLOT_BYTES", "131072", 0);
    setenv("DGEMU_NCCL_TIMEOUT_S", "60", 0);
    int failed = 0;
    failed |= run_group(S_COLLECTIVES, 1, "collectives");
    failed |= run_group(S_COLLECTIVES, 2, "collectives");
    failed |= run_group(S_COLLECTIVES, 3, "collectives");
    failed |= run_group(S_SPLIT, 1, "reduce and split");
    failed |= run_group(S_SPLIT, 3, "reduce and split");
    failed |= run_group(S_SPLIT, 4, "reduce and split");
    failed |= run_group(S_ABORT, 2, "abort");
    failed |= run_group(S_ABORT, 3, "abort");
    failed |= run_group(S_EXIT, 2, "exit without destroy");
    failed |= run_group(S_EXIT, 3, "exit without destroy");
    if (leftovers()) { fprintf(stderr, "FAIL: shared-memory files left behind\n"); failed = 1; }
    printf("test_nccl_emu: %s\n", failed ? "FAILED" : "all passed");
    return failed;
}
