/* eager/cpu/conv_dnnl.c — f32 convolution through oneDNN's convolution primitives (forward,
 * backward-data, backward-weights), the path eager/cpu/conv.c takes before its im2col + GEMM
 * fallback. oneDNN's fast kernels want blocked layouts (nChw16c, OIhw16i16o, ...): tensors stay
 * NCHW/OIHW in dygraph, so each call reorders its operands into the layouts the primitive asked
 * for and its result back. Primitives, memory objects and reorders are made once per geometry
 * and kept in a small table (emptied by dg_shutdown, through the CPU backend's shutdown entry);
 * the blocked copies and oneDNN's scratchpad are taken from the block pool for the call and
 * given back after it, so between convolutions they hold nothing and a steady loop gets the same
 * ranges back every step (no page faults). */
#include "../backend.h"
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>

/* ---- engine, stream, shared buffers ---- */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t g_eng;
static dnnl_stream_t g_strm;
static bool g_broken;                 /* engine creation failed once: always fall back */

/* one call's buffers (calls run one at a time: g_lock is held through execution) */
enum { BUF_A, BUF_B, BUF_C, BUF_SCRATCH, NBUF };
static void *g_buf[NBUF];
static size_t g_buf_size[NBUF];

static void *buffer(int i, size_t n) {
    if (n <= g_buf_size[i]) return g_buf[i];
    dg_block_free(g_buf[i]);
    g_buf[i] = dg_block_alloc(n);
    g_buf_size[i] = g_buf[i] ? n : 0;
    return g_buf[i];
}
static void release_buffers(void) {
    for (int i = 0; i < NBUF; i++) { dg_block_free(g_buf[i]); g_buf[i] = NULL; g_buf_size[i] = 0; }
}

/* ---- one operand: the user's plain memory and, when the primitive wants another layout, a
 * reorder into (or out of) a shared buffer ---- */
typedef struct operand {
    dnnl_memory_t user, inner;        /* inner == user when no reorder is needed */
    dnnl_primitive_t reorder;         /* user -> inner for inputs, inner -> user for outputs */
    size_t inner_bytes;
    int buf;                          /* shared buffer for inner */
} operand;

typedef struct direction {
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    operand op[3];                    /* fwd: src, weights, dst; bwd-data: diff_dst, weights, diff_src;
                                         bwd-weights: src, diff_dst, diff_weights */
    dnnl_memory_t bias, scratch;
    size_t scratch_bytes;
    bool made, failed;
} direction;

typedef struct entry {
    dg_conv2d_geom g;
    bool bias, bf16;
    bool bf16_storage;                /* the user's tensors are bf16 (autocast, O2): no f32 anywhere */
    /* oneDNN fixes a primitive's thread count when it makes it: a count that changed since
     * (dg_set_num_threads, the automatic count under load) needs primitives of its own */
    int nthr;
    direction fwd, bwd_data, bwd_w;
    unsigned long last_use;
} entry;

#define TABLE 96   /* ResNet50: ~20 geometries, chunked ones counted once per chunk size */
static entry g_table[TABLE];
static int g_n;
static unsigned long g_clock;

static void operand_free(operand *o) {
    if (o->reorder) dnnl_primitive_destroy(o->reorder);
    if (o->inner && o->inner != o->user) dnnl_memory_destroy(o->inner);
    if (o->user) dnnl_memory_destroy(o->user);
    memset(o, 0, sizeof *o);
}
static void direction_free(direction *d) {
    for (int i = 0; i < 3; i++) operand_free(&d->op[i]);
    if (d->bias) dnnl_memory_destroy(d->bias);
    if (d->scratch) dnnl_memory_destroy(d->scratch);
    if (d->prim) dnnl_primitive_destroy(d->prim);
    if (d->pd) dnnl_primitive_desc_destroy(d->pd);
    memset(d, 0, sizeof *d);
}

/* want = the primitive's layout for this operand; input: reorder user -> inner. */
static bool operand_make(operand *o, const dnnl_memory_desc_t *user_md, const dnnl_memory_desc_t *want, bool input, int buf) {
    o->buf = buf;
    if (dnnl_memory_create(&o->user, user_md, g_eng, DNNL_MEMORY_NONE) != dnnl_success) return false;
    if (dnnl_memory_desc_equal(user_md, want)) { o->inner = o->user; return true; }
    o->inner_bytes = dnnl_memory_desc_get_size(want);
    if (dnnl_memory_create(&o->inner, want, g_eng, DNNL_MEMORY_NONE) != dnnl_success) return false;
    dnnl_primitive_desc_t rpd;
    const dnnl_memory_desc_t *from = input ? user_md : want, *to = input ? want : user_md;
    if (dnnl_reorder_primitive_desc_create(&rpd, from, g_eng, to, g_eng, NULL) != dnnl_success) return false;
    dnnl_status_t st = dnnl_primitive_create(&o->reorder, rpd);
    dnnl_primitive_desc_destroy(rpd);
    return st == dnnl_success;
}

/* Points the operand at the user's data (and its inner copy at the shared buffer); for an
 * input, runs the reorder. */
static bool operand_bind(operand *o, void *data, bool input) {
    if (dnnl_memory_set_data_handle(o->user, data) != dnnl_success) return false;
    if (o->inner == o->user) return true;
    void *b = buffer(o->buf, o->inner_bytes);
    if (!b || dnnl_memory_set_data_handle(o->inner, b) != dnnl_success) return false;
    if (!input) return true;
    dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, o->user }, { DNNL_ARG_TO, o->inner } };
    return dnnl_primitive_execute(o->reorder, g_strm, 2, a) == dnnl_success;
}
static bool operand_finish(operand *o) {   /* output: inner -> user */
    if (o->inner == o->user) return true;
    dnnl_exec_arg_t a[2] = { { DNNL_ARG_FROM, o->inner }, { DNNL_ARG_TO, o->user } };
    return dnnl_primitive_execute(o->reorder, g_strm, 2, a) == dnnl_success;
}

/* ---- descriptors of one geometry ---- */
typedef struct mds {
    dnnl_memory_desc_t src, wei, dst, bias;             /* the user's plain layouts */
    dnnl_memory_desc_t src_any, wei_any, dst_any, bias_any;
    /* what the primitive reads: the f32 ones above, or bf16 under dg_set_cpu_bf16 (what it
     * writes stays f32: outputs, input gradients, weight gradients) */
    dnnl_memory_desc_t src_in, wei_in, dst_in;
    dnnl_dims_t strides, dil, pad_l, pad_r;
} mds;

/* Activation layout for the primitive: oneDNN's choice (nChw16c) when the channel counts are
 * multiples of 16; otherwise channels-last, whose kernels handle a channel tail instead of
 * padding 20 channels to 32 (the MNIST CNN's second conv: fwd+bwd 20.2 -> 13.1 ms per batch of
 * 100). DG_DNNL_NHWC=0/1 overrides, for comparisons. */
static dnnl_format_tag_t act_tag(const dg_conv2d_geom *g) {
    int64_t ic = g->c / g->groups, oc = g->oc / g->groups;
    const char *e = getenv("DG_DNNL_NHWC");
    if (e) return atoi(e) ? dnnl_nhwc : dnnl_format_tag_any;
    if (ic < 4 || (ic % 16 == 0 && oc % 16 == 0)) return dnnl_format_tag_any;   /* the RGB/gray input layer: as chosen */
    return dnnl_nhwc;
}

static bool make_mds(const dg_conv2d_geom *g, bool bf16, bool storage, mds *m) {
    int64_t G = g->groups;
    dnnl_data_type_t user = storage ? dnnl_bf16 : dnnl_f32;
    dnnl_dims_t src = { g->n, g->c, g->h, g->w }, dst = { g->n, g->oc, g->oh, g->ow };
    dnnl_dims_t wei5 = { G, g->oc / G, g->c / G, g->kh, g->kw }, wei4 = { g->oc, g->c, g->kh, g->kw }, b = { g->oc };
    bool grouped = G > 1;
    if (dnnl_memory_desc_init_by_tag(&m->src, 4, src, user, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&m->dst, 4, dst, user, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&m->wei, grouped ? 5 : 4, grouped ? wei5 : wei4, user, grouped ? dnnl_goihw : dnnl_oihw) ||
        dnnl_memory_desc_init_by_tag(&m->bias, 1, b, user, dnnl_x) ||
        dnnl_memory_desc_init_by_tag(&m->src_any, 4, src, user, act_tag(g)) ||
        dnnl_memory_desc_init_by_tag(&m->dst_any, 4, dst, user, act_tag(g)) ||
        dnnl_memory_desc_init_by_tag(&m->wei_any, grouped ? 5 : 4, grouped ? wei5 : wei4, user, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&m->bias_any, 1, b, user, dnnl_format_tag_any))
        return false;
    dnnl_data_type_t in = bf16 || storage ? dnnl_bf16 : dnnl_f32;
    if (dnnl_memory_desc_init_by_tag(&m->src_in, 4, src, in, act_tag(g)) ||
        dnnl_memory_desc_init_by_tag(&m->dst_in, 4, dst, in, act_tag(g)) ||
        dnnl_memory_desc_init_by_tag(&m->wei_in, grouped ? 5 : 4, grouped ? wei5 : wei4, in, dnnl_format_tag_any))
        return false;
    m->strides[0] = g->sh; m->strides[1] = g->sw;
    m->dil[0] = g->dh - 1; m->dil[1] = g->dw - 1;       /* oneDNN counts dilation from 0 */
    m->pad_l[0] = g->ph; m->pad_l[1] = g->pw;
    /* the right/bottom padding that makes oneDNN's output size equal ours */
    m->pad_r[0] = (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1 - g->h - g->ph;
    m->pad_r[1] = (g->ow - 1) * g->sw + (g->kw - 1) * g->dw + 1 - g->w - g->pw;
    return m->pad_r[0] >= 0 && m->pad_r[1] >= 0;
}

static dnnl_primitive_attr_t user_scratchpad_attr(void) {
    dnnl_primitive_attr_t a = NULL;
    if (dnnl_primitive_attr_create(&a) != dnnl_success) return NULL;
    dnnl_primitive_attr_set_scratchpad_mode(a, dnnl_scratchpad_mode_user);
    return a;
}

static bool finish_direction(direction *d) {
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(d->pd, dnnl_query_scratchpad_md, 0);
    d->scratch_bytes = sp ? dnnl_memory_desc_get_size(sp) : 0;
    if (d->scratch_bytes && dnnl_memory_create(&d->scratch, sp, g_eng, DNNL_MEMORY_NONE) != dnnl_success) return false;
    return dnnl_primitive_create(&d->prim, d->pd) == dnnl_success;
}

static bool make_fwd(entry *e, const mds *m) {
    direction *d = &e->fwd;
    dnnl_convolution_desc_t cd;
    /* a fused ReLU only happens in passes without gradients: inference kernels then. The ReLU
     * itself is applied by the caller: oneDNN's (max with 0) would turn NaN into 0, where
     * dg_relu keeps it */
    dnnl_prop_kind_t prop = e->g.relu ? dnnl_forward_inference : dnnl_forward_training;
    if (dnnl_dilated_convolution_forward_desc_init(&cd, prop, dnnl_convolution_direct, &m->src_in, &m->wei_in,
                                                   e->bias ? &m->bias_any : NULL, &m->dst_any, m->strides, m->dil, m->pad_l, m->pad_r))
        return false;
    dnnl_primitive_attr_t attr = user_scratchpad_attr();
    if (!attr) return false;
    dnnl_status_t st = dnnl_primitive_desc_create(&d->pd, &cd, attr, g_eng, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return false;
    if (!operand_make(&d->op[0], &m->src, dnnl_primitive_desc_query_md(d->pd, dnnl_query_src_md, 0), true, BUF_A) ||
        !operand_make(&d->op[1], &m->wei, dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 0), true, BUF_B) ||
        !operand_make(&d->op[2], &m->dst, dnnl_primitive_desc_query_md(d->pd, dnnl_query_dst_md, 0), false, BUF_C))
        return false;
    if (e->bias && dnnl_memory_create(&d->bias, dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 1), g_eng, DNNL_MEMORY_NONE))
        return false;
    return finish_direction(d);
}

static bool make_bwd_data(entry *e, const mds *m) {
    direction *d = &e->bwd_data;
    dnnl_convolution_desc_t cd;
    if (dnnl_dilated_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, &m->src_any, &m->wei_in, &m->dst_in,
                                                         m->strides, m->dil, m->pad_l, m->pad_r))
        return false;
    dnnl_primitive_attr_t attr = user_scratchpad_attr();
    dnnl_status_t st = dnnl_primitive_desc_create(&d->pd, &cd, attr, g_eng, e->fwd.pd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return false;
    if (!operand_make(&d->op[0], &m->dst, dnnl_primitive_desc_query_md(d->pd, dnnl_query_diff_dst_md, 0), true, BUF_A) ||
        !operand_make(&d->op[1], &m->wei, dnnl_primitive_desc_query_md(d->pd, dnnl_query_weights_md, 0), true, BUF_B) ||
        !operand_make(&d->op[2], &m->src, dnnl_primitive_desc_query_md(d->pd, dnnl_query_diff_src_md, 0), false, BUF_C))
        return false;
    return finish_direction(d);
}

static bool make_bwd_w(entry *e, const mds *m) {
    direction *d = &e->bwd_w;
    dnnl_convolution_desc_t cd;
    if (dnnl_dilated_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &m->src_in, &m->wei_any,
                                                            e->bias ? &m->bias_any : NULL, &m->dst_in, m->strides, m->dil,
                                                            m->pad_l, m->pad_r))
        return false;
    dnnl_primitive_attr_t attr = user_scratchpad_attr();
    dnnl_status_t st = dnnl_primitive_desc_create(&d->pd, &cd, attr, g_eng, e->fwd.pd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) return false;
    if (!operand_make(&d->op[0], &m->src, dnnl_primitive_desc_query_md(d->pd, dnnl_query_src_md, 0), true, BUF_A) ||
        !operand_make(&d->op[1], &m->dst, dnnl_primitive_desc_query_md(d->pd, dnnl_query_diff_dst_md, 0), true, BUF_B) ||
        !operand_make(&d->op[2], &m->wei, dnnl_primitive_desc_query_md(d->pd, dnnl_query_diff_weights_md, 0), false, BUF_C))
        return false;
    if (e->bias && dnnl_memory_create(&d->bias, dnnl_primitive_desc_query_md(d->pd, dnnl_query_diff_weights_md, 1), g_eng,
                                      DNNL_MEMORY_NONE))
        return false;
    return finish_direction(d);
}

/* The entry for (g, bias) with the direction `which` made, or NULL (caller falls back). Called
 * with g_lock held. */
static entry *lookup(const dg_conv2d_geom *g, bool bias, bool storage, int which) {
    bool bf16 = dg_get_cpu_bf16();
    int nthr = dg_threads();   /* also the OpenMP count that oneDNN reads while making them */
    if (g_broken) return NULL;
    if (!g_eng) {
        if (dnnl_engine_create(&g_eng, dnnl_cpu, 0) != dnnl_success ||
            dnnl_stream_create(&g_strm, g_eng, dnnl_stream_default_flags) != dnnl_success) {
            g_broken = true;
            return NULL;
        }
    }
    entry *e = NULL;
    for (int i = 0; i < g_n && !e; i++)
        if (g_table[i].bias == bias && g_table[i].bf16 == bf16 && g_table[i].bf16_storage == storage && g_table[i].nthr == nthr &&
            memcmp(&g_table[i].g, g, sizeof *g) == 0)
            e = &g_table[i];
    if (!e) {
        if (g_n < TABLE) e = &g_table[g_n++];
        else {   /* evict the least recently used geometry */
            e = &g_table[0];
            for (int i = 1; i < TABLE; i++) if (g_table[i].last_use < e->last_use) e = &g_table[i];
            direction_free(&e->fwd); direction_free(&e->bwd_data); direction_free(&e->bwd_w);
        }
        memset(e, 0, sizeof *e);
        e->g = *g;
        e->bias = bias;
        e->bf16 = bf16;
        e->bf16_storage = storage;
        e->nthr = nthr;
    }
    e->last_use = ++g_clock;
    direction *d = which == 0 ? &e->fwd : which == 1 ? &e->bwd_data : &e->bwd_w;
    if (d->failed) return NULL;
    if (!d->made) {
        mds m;
        bool ok = make_mds(g, bf16, storage, &m);
        /* the backward primitives need the forward one as a hint */
        if (ok && which != 0 && !e->fwd.made) {
            ok = make_fwd(e, &m);
            if (ok) e->fwd.made = true; else { direction_free(&e->fwd); e->fwd.failed = true; }
        }
        if (ok) ok = which == 0 ? (e->fwd.made ? true : make_fwd(e, &m)) : which == 1 ? make_bwd_data(e, &m) : make_bwd_w(e, &m);
        if (!ok) { direction_free(d); d->failed = true; return NULL; }
        d->made = true;
    }
    return e;
}

static bool bind_scratch(direction *d) {
    if (!d->scratch) return true;
    void *sp = buffer(BUF_SCRATCH, d->scratch_bytes);
    return sp && dnnl_memory_set_data_handle(d->scratch, sp) == dnnl_success;
}

/* Runs the primitive on its three operands (+ bias and scratchpad when present), then the
 * output's reorder back to the user's layout, and waits. */
static bool execute(direction *d, int arg0, int arg1, int arg2, int bias_arg, bool with_bias) {
    dnnl_exec_arg_t a[5];
    int n = 0;
    a[n++] = (dnnl_exec_arg_t){ arg0, d->op[0].inner };
    a[n++] = (dnnl_exec_arg_t){ arg1, d->op[1].inner };
    a[n++] = (dnnl_exec_arg_t){ arg2, d->op[2].inner };
    if (with_bias) a[n++] = (dnnl_exec_arg_t){ bias_arg, d->bias };
    if (d->scratch) a[n++] = (dnnl_exec_arg_t){ DNNL_ARG_SCRATCHPAD, d->scratch };
    return dnnl_primitive_execute(d->prim, g_strm, n, a) == dnnl_success && operand_finish(&d->op[2]) &&
           dnnl_stream_wait(g_strm) == dnnl_success;
}

/* Images per call for the two directions that are independent per image (forward, backward
 * data): a large batch runs in chunks whose activations (input + output) stay under 16 MB, so
 * the blocked copies and the shared buffers holding them stay that size too (ResNet18's stem at
 * batch 32, 224x224, would otherwise keep a 103 MB blocked copy of its output for the life of
 * the process). Chunks are equal but for the last. */
#define CHUNK_BYTES ((size_t)16 << 20)
static int64_t chunk_images(const dg_conv2d_geom *g, size_t esize) {
    size_t per = (size_t)(g->c * g->h * g->w + g->oc * g->oh * g->ow) * esize;
    int64_t pieces = (int64_t)((per * (size_t)g->n + CHUNK_BYTES - 1) / CHUNK_BYTES);
    if (pieces < 1) pieces = 1;
    if (pieces > g->n) pieces = g->n;
    return (g->n + pieces - 1) / pieces;
}

/* dg_shutdown (the CPU backend's shutdown entry): every primitive, memory object and buffer, then
 * the stream and engine; the next convolution makes them again. */
void dg_dnnl_release(const dg_backend *be) {
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++) {
        direction_free(&g_table[i].fwd);
        direction_free(&g_table[i].bwd_data);
        direction_free(&g_table[i].bwd_w);
    }
    memset(g_table, 0, sizeof g_table);
    g_n = 0;
    g_clock = 0;
    release_buffers();
    if (g_strm) dnnl_stream_destroy(g_strm);
    if (g_eng) dnnl_engine_destroy(g_eng);
    g_strm = NULL;
    g_eng = NULL;
    g_broken = false;
    pthread_mutex_unlock(&g_lock);
}

/* ---- entries (return 1 when done, 0 when the caller should fall back, negative on error) ---- */
int dg_dnnl_conv2d(const dg_conv2d_geom *g, const dg_kview *x, const dg_kview *w, const dg_kview *b, dg_kview *y) {
    if ((x->dtype != DG_F32 && x->dtype != DG_BF16) || g->n == 0) return 0;
    bool storage = x->dtype == DG_BF16;
    size_t es = dg_dtype_bytes(x->dtype);
    int64_t nb = chunk_images(g, es), xs = g->c * g->h * g->w * es, ys = g->oc * g->oh * g->ow * es;   /* bytes per image */
    char *xp = x->data, *yp = y->data;
    bool ok = true;
    pthread_mutex_lock(&g_lock);
    for (int64_t n0 = 0; n0 < g->n && ok; n0 += nb) {
        dg_conv2d_geom cg = *g;
        cg.n = g->n - n0 < nb ? g->n - n0 : nb;
        entry *e = lookup(&cg, b != NULL, storage, 0);
        direction *d = e ? &e->fwd : NULL;
        ok = d && bind_scratch(d) && operand_bind(&d->op[0], xp + n0 * xs, true) && operand_bind(&d->op[1], w->data, true) &&
             operand_bind(&d->op[2], yp + n0 * ys, false) &&
             (!b || dnnl_memory_set_data_handle(d->bias, b->data) == dnnl_success) &&
             execute(d, DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, b != NULL);
    }
    if (!ok && g_strm) dnnl_stream_wait(g_strm);   /* nothing may still use the buffers */
    release_buffers();
    pthread_mutex_unlock(&g_lock);
    /* a failure after the first chunk leaves y partly written: the fallback rewrites all of it */
    return ok ? 1 : 0;
}

int dg_dnnl_conv2d_backward_data(const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *w, dg_kview *gx) {
    if ((gy->dtype != DG_F32 && gy->dtype != DG_BF16) || g->n == 0 || g->c / g->groups < 16) return 0;   /* as for the weights below */
    bool storage = gy->dtype == DG_BF16;
    size_t es = dg_dtype_bytes(gy->dtype);
    int64_t nb = chunk_images(g, es), xs = g->c * g->h * g->w * es, ys = g->oc * g->oh * g->ow * es;   /* bytes per image */
    char *gyp = gy->data, *gxp = gx->data;
    bool ok = true;
    pthread_mutex_lock(&g_lock);
    for (int64_t n0 = 0; n0 < g->n && ok; n0 += nb) {
        dg_conv2d_geom cg = *g;
        cg.n = g->n - n0 < nb ? g->n - n0 : nb;
        /* the bias flag only matters to forward/backward-weights; share the entry without bias */
        entry *e = lookup(&cg, false, storage, 1);
        direction *d = e ? &e->bwd_data : NULL;
        ok = d && bind_scratch(d) && operand_bind(&d->op[0], gyp + n0 * ys, true) && operand_bind(&d->op[1], w->data, true) &&
             operand_bind(&d->op[2], gxp + n0 * xs, false) &&
             execute(d, DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC, 0, false);
    }
    if (!ok && g_strm) dnnl_stream_wait(g_strm);   /* nothing may still use the buffers */
    release_buffers();
    pthread_mutex_unlock(&g_lock);
    return ok ? 1 : 0;
}

int dg_dnnl_conv2d_backward_filter(const dg_conv2d_geom *g, const dg_kview *gy, const dg_kview *x, dg_kview *gw, dg_kview *gb) {
    /* with few input channels (the RGB stem) oneDNN's weight gradient runs at a third of the
     * im2col path's speed (bench/ops: 7x7 stem fwd+bwd 45 vs 63 GFLOP/s) */
    if ((gy->dtype != DG_F32 && gy->dtype != DG_BF16) || g->n == 0 || !gw || g->c / g->groups < 16) return 0;
    pthread_mutex_lock(&g_lock);
    entry *e = lookup(g, gb != NULL, gy->dtype == DG_BF16, 2);
    bool ok = e != NULL;
    if (ok) {
        direction *d = &e->bwd_w;
        ok = bind_scratch(d) && operand_bind(&d->op[0], x->data, true) && operand_bind(&d->op[1], gy->data, true) &&
             operand_bind(&d->op[2], gw->data, false) &&
             (!gb || dnnl_memory_set_data_handle(d->bias, gb->data) == dnnl_success) &&
             execute(d, DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS, DNNL_ARG_DIFF_BIAS, gb != NULL);
    }
    if (!ok && g_strm) dnnl_stream_wait(g_strm);   /* nothing may still use the buffers */
    release_buffers();
    pthread_mutex_unlock(&g_lock);
    return ok ? 1 : 0;
}
