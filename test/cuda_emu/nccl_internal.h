/* test/cuda_emu/nccl_internal.h — what the two files of the emulated NCCL share: the layout of the
 * unique id and of the shared segment, the communicator and queued-operation records, and the
 * helpers of nccl_shm.c (time and settings, messages, reductions in rank order, attaching to the
 * segment and peer liveness) that the entry points and queued work of nccl.c use. How the
 * emulation works is described in nccl.c. Everything here is hidden inside libdgemu.so. */
#ifndef DGEMU_NCCL_INTERNAL_H
#define DGEMU_NCCL_INTERNAL_H

#include <nccl.h>
#include "emu_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------------------------------------ */
/* Layout of the id and of the shared segment                                                 */
/* ------------------------------------------------------------------------------------------ */

static const char ID_TAG[8] = { 'd', 'g', 'e', 'm', 'u', 'I', 'D', '1' };
typedef struct id_layout { char tag[8]; uint8_t rnd[16]; int32_t pid; } id_layout;

#define SHM_MAGIC 0x4447454eu          /* written last by the creator: the header is complete */
#define ABORT_WRITING 2                 /* the abort flag while its reason is being written */
#define LOCK_BASE ((off_t)1 << 40)      /* liveness lock of rank r: byte LOCK_BASE + r (past EOF) */

typedef struct shm_rank {
    _Atomic uint64_t posted;            /* last step whose part this rank put in its slot */
    _Atomic uint64_t consumed;          /* last step this rank finished reading */
    _Atomic int32_t joined;
    _Atomic int32_t left;               /* the rank's communicator is gone (destroyed, aborted) */
    _Atomic int32_t pid;
    int32_t device;
    /* ncclCommSplit's exchange: split number `split_posted` carries this rank's colour and key;
     * `split_read` is the last split whose entries this rank has read */
    _Atomic uint64_t split_posted, split_read;
    int32_t split_color, split_key;
    char pad[8];
} shm_rank;

typedef struct shm_head {
    _Atomic uint32_t magic;
    int32_t nranks;
    uint64_t slot_bytes;                /* data bytes per slot (a multiple of 64) */
    uint64_t slots_off;                 /* offset of slot 0's header */
    uint64_t seg_bytes;
    _Atomic int32_t joined;             /* ranks attached so far */
    _Atomic int32_t unlinked;           /* the name was removed */
    _Atomic int32_t aborted;            /* 0, ABORT_WRITING, 1 */
    int32_t abort_rank;
    char abort_reason[448];
    shm_rank ranks[];
} shm_head;

typedef struct slot_hdr {               /* what the data in a slot belongs to */
    uint64_t step, seq, count;
    int32_t kind, dtype, redop, root;
    char pad[24];
} slot_hdr;

/* ------------------------------------------------------------------------------------------ */
/* The communicator (this process's side)                                                     */
/* ------------------------------------------------------------------------------------------ */

#define COMM_MAGIC 0x6e63636cu
enum { ST_INIT, ST_READY };
enum { K_ALLREDUCE, K_BROADCAST, K_ALLGATHER, K_REDUCE, K_NUM_KINDS };
static const char *const KIND_NAME[] = { "ncclAllReduce", "ncclBroadcast", "ncclAllGather", "ncclReduce" };
#define MAX_STREAMS 16

struct ncclComm {
    uint32_t magic;
    int rank, nranks, device;
    bool blocking;
    char name[96];                      /* shm name */
    pthread_mutex_t mu;                 /* attach, next_seq, streams */

    /* attach state (under mu) */
    int fd;
    shm_head *h;
    size_t map_bytes;
    bool header_ok, joined_self;
    _Atomic int formed;                 /* every rank joined: collectives may run */
    int state;                          /* ST_INIT until GetAsyncError / blocking init saw it formed */
    int init_polls;
    double t_start;

    _Atomic int refs;                   /* the user's handle + one per queued operation */
    _Atomic int inflight;               /* operations queued and not yet released */
    _Atomic int pending;                /* operations queued and not yet finished */
    _Atomic int aborted;                /* ncclCommAbort was called here */
    _Atomic int user_gone;              /* destroy/abort called: the handle is the user's no more */
    _Atomic int finalizing;
    _Atomic int async_error;            /* ncclResult_t; sticky once not ncclSuccess */
    _Atomic uint64_t exec_seq;          /* sequence number of the next operation allowed to run */
    _Atomic uint64_t done_step;         /* last step this rank completed */
    _Atomic int64_t last_live_check_ns;
    uint64_t next_seq;
    uint64_t splits;                    /* ncclCommSplit calls so far (under mu) */
    int32_t id_pid;                     /* the pid in the unique id: split segments carry it too */
    uint8_t id_rnd[16];

    struct { cudaStream_t s; int n; } streams[MAX_STREAMS];   /* streams holding our work */

    char last_error[512];               /* the last message (ncclGetLastError) */
    char async_msg[512];                /* the message of the async error (kept when later calls note others) */
};

typedef struct op_t {
    ncclComm_t c;
    int kind;
    ncclDataType_t dt;
    ncclRedOp_t red;
    int root;
    size_t count, es;
    const char *send;
    char *recv;
    uint64_t seq;
    cudaStream_t stream;
    /* progress, kept between calls of the work function */
    bool started, finished;
    int phase;                          /* 0: slot not yet written for this step; 1: posted */
    uint64_t first_step, nchunks, chunk, chunk_elems;
} op_t;


/* ---- nccl_shm.c ---- */
extern pthread_mutex_t g_msg_mu;   /* guards g_last_error, the message of the process's last failure */
extern char g_last_error[512];
int64_t now_ns(void);
double now_s(void);
double timeout_s(void);
uint64_t slot_bytes_for(int nranks);
bool debug_warn(void);
void vnote(ncclComm_t c, const char *fmt, va_list ap);
ncclResult_t note(ncclComm_t c, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
ncclResult_t comm_fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *type_name(ncclDataType_t dt);
const char *op_name(ncclRedOp_t op);
size_t type_size(ncclDataType_t dt);
bool comm_ok(const struct ncclComm *c);
float h2f(uint16_t h);
uint16_t f2h(float f);
float bf2f(uint16_t b);
uint16_t f2bf(float f);
void reduce_into(void *acc, const void *in, size_t n, ncclDataType_t dt, ncclRedOp_t op);
void divide_by(void *acc, size_t n, ncclDataType_t dt, int nranks);
size_t head_bytes(int nranks);
slot_hdr *slot_of(const ncclComm_t c, int q);
char *slot_data(const ncclComm_t c, int q);
int lock_byte(int fd, int cmd, short type, int q, struct flock *out);
ncclResult_t take_rank_lock(ncclComm_t c);
bool peer_alive(ncclComm_t c, int q);
void unlink_once(ncclComm_t c);
ncclResult_t attach(ncclComm_t c);
ncclResult_t check_abort_flag(ncclComm_t c);
ncclResult_t check_peers(ncclComm_t c, uint64_t step, const char *what);
ncclResult_t init_progress(ncclComm_t c);
void comm_release(ncclComm_t c);

/* ---- nccl.c, for nccl_split.c ---- */
ncclResult_t config_blocking(const char *api, ncclComm_t c, const ncclConfig_t *cfg, bool *blocking);
/* A communicator's rank on the segment named by (pid, rnd): blocking, it returns once every rank
 * joined; else ncclInProgress at once, ncclCommGetAsyncError saying when it is ready. */
ncclResult_t init_named(const char *api, ncclComm_t *out, int nranks, int32_t pid, const uint8_t rnd[16], int rank,
                        bool blocking, int device);

#pragma GCC visibility pop
#endif
