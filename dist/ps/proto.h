/* dist/ps/proto.h — the parameter server's wire format: one request or reply per transport
 * message, a fixed little-endian header and a payload whose length the header states exactly.
 *
 *   request: magic 'DGPS' u32 | version u16 | op u16 | table u32 | worker u32 | arg u64 | payload
 *   reply:   magic 'DGPS' u32 | version u16 | status u16 | table version u64 | payload
 *
 * op INIT:  payload = dg_ps_init_msg, then `len` f32 initial values of this server's shard; the
 *           first INIT of a table makes it (later ones of the same geometry change nothing)
 * op PULL:  arg = the table version the worker needs; reply NOT_YET below it, else the f32 values
 * op PUSH:  arg = the table version the gradient was computed at; payload = `len` f32 gradients
 * op STOP:  the worker is done (its last request); the server ends once every worker stopped
 * op SPARSE_INIT: payload = dg_ps_sparse_msg: a table of rows keyed by int64 id (this server holds
 *           the ids with id % S == its index), made by the first SPARSE_INIT
 * op SPARSE_PULL: arg = the version needed; payload = n int64 ids; reply n rows of dim f32, each
 *           made on its first pull from (seed, id) alone (dg_ps_sparse_init_row)
 * op SPARSE_PUSH: arg = the version the gradient was computed at; payload = u64 n, n int64 ids,
 *           n rows of dim f32 gradients (sync: every worker pushes once per version, n may be 0)
 * op SAVE:  payload = u32 this server's index, u32 the server count, the directory (no NUL):
 *           the server writes its tables there (server_io.c)
 * op GEO_PUSH: payload = `len` f32 deltas added to a geo table's values (the worker stepped locally)
 * op SPARSE_GEO_PUSH: payload as SPARSE_PUSH's, the rows being deltas added to the table's rows
 * op EVICT: arg = an age; every sparse table drops the rows not pulled or pushed in the last `arg`
 *           versions of that table (they start again from (seed, id)); reply u64 rows dropped
 * An ERROR reply carries a message (text, not terminated). Every length and index is checked
 * before anything is read, so a foreign or truncated message is an ERROR reply, never a crash. */
#ifndef DG_DIST_PS_PROTO_H
#define DG_DIST_PS_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define DG_PS_MAGIC 0x53504744u   /* "DGPS" little-endian */
#define DG_PS_VERSION 1
#define DG_PS_REQ_HEADER 28
#define DG_PS_REPLY_HEADER 16
#define DG_PS_MAX_TABLES 64
#define DG_PS_MAX_WORKERS 4096

enum { DG_PS_OP_INIT = 1, DG_PS_OP_PULL = 2, DG_PS_OP_PUSH = 3, DG_PS_OP_STOP = 4, DG_PS_OP_SPARSE_INIT = 5,
       DG_PS_OP_SPARSE_PULL = 6, DG_PS_OP_SPARSE_PUSH = 7, DG_PS_OP_SAVE = 8, DG_PS_OP_GEO_PUSH = 9,
       DG_PS_OP_SPARSE_GEO_PUSH = 10, DG_PS_OP_EVICT = 11 };
enum { DG_PS_OK = 0, DG_PS_NOT_YET = 1, DG_PS_ERROR = 2 };
/* How a table's pushes are applied: async as they come, sync once per version with the mean of
 * every worker's gradient, geo as parameter deltas added to the values (the workers step locally). */
enum { DG_PS_MODE_ASYNC = 0, DG_PS_MODE_SYNC = 1, DG_PS_MODE_GEO = 2 };

/* The table's geometry and the optimizer the server runs on it (the worker's, field by field). */
typedef struct dg_ps_init_msg {
    uint64_t total;      /* elements of the whole table (over every server) */
    uint64_t offset;     /* this shard's first element */
    uint64_t len;        /* this shard's elements */
    uint32_t n_workers;
    uint32_t mode;       /* DG_PS_MODE_*: sync averages the workers' gradients of a version, then steps once */
    uint32_t kind;       /* dg_opt_kind */
    uint32_t nesterov, amsgrad, pad;
    double lr, weight_decay, momentum, dampening, beta1, beta2, eps, init_acc, lr_decay;
} dg_ps_init_msg;

/* A sparse table: its rows' width, the optimizer run on each row (SGD, Adagrad or Adam), the
 * initializer (uniform in [-init_range, init_range) from (seed, id)) and the entry threshold (a
 * row is pulled as zeros and not stepped until `entry` pushes have named it; 0: at once). */
typedef struct dg_ps_sparse_msg {
    uint32_t dim, kind, n_workers, mode;
    uint64_t seed;
    double lr, eps, init_acc, init_range;
    uint32_t entry, pad;
    double beta1, beta2;
} dg_ps_sparse_msg;
#define DG_PS_SPARSE_BYTES 80
enum { DG_PS_SPARSE_SGD = 0, DG_PS_SPARSE_ADAGRAD = 1, DG_PS_SPARSE_ADAM = 2 };
/* A sparse row's first values: uniform in [-init_range, init_range) from Philox(seed, id) alone
 * (table_sparse.c); public as dg_fleet_sparse_initial_row. */
void dg_ps_sparse_init_row(uint64_t seed, double init_range, int64_t id, int64_t dim, float *out);
void dg_ps_sparse_encode(const dg_ps_sparse_msg *m, unsigned char *out);
void dg_ps_sparse_decode(const unsigned char *in, dg_ps_sparse_msg *m);

typedef struct dg_ps_req {
    uint16_t op;
    uint32_t table, worker;
    uint64_t arg;
    const unsigned char *payload;
    size_t payload_len;
} dg_ps_req;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the parameter server's f32 payloads are little-endian"
#endif

#define DG_PS_INIT_BYTES 120   /* dg_ps_init_msg on the wire: 3 u64, 6 u32, 9 f64 */
/* dg_ps_init_msg <-> its 120 bytes (proto.c) */
void dg_ps_init_encode(const dg_ps_init_msg *m, unsigned char *out);
void dg_ps_init_decode(const unsigned char *in, dg_ps_init_msg *m);

static inline void dg_ps_put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static inline void dg_ps_put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static inline void dg_ps_put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static inline uint16_t dg_ps_get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t dg_ps_get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static inline uint64_t dg_ps_get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Writes a request header into buf (DG_PS_REQ_HEADER bytes). */
static inline void dg_ps_req_header(unsigned char *buf, uint16_t op, uint32_t table, uint32_t worker, uint64_t arg) {
    dg_ps_put32(buf, DG_PS_MAGIC);
    dg_ps_put16(buf + 4, DG_PS_VERSION);
    dg_ps_put16(buf + 6, op);
    dg_ps_put32(buf + 8, table);
    dg_ps_put32(buf + 12, worker);
    dg_ps_put64(buf + 16, arg);
    dg_ps_put32(buf + 24, 0);
}

#endif
