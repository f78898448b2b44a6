/* eager/recompute.c — recompute (activation checkpointing; Paddle's fleet recompute,
 * torch.utils.checkpoint): a function's forward runs without recording, so none of its
 * intermediate tensors outlive it; one tape node keeps its input, and during backward the node
 * runs the forward again, recording this time, under the random-number position, autocast state
 * and grad mode of the first run, and walks that short graph with the incoming gradient. The
 * parameters inside get their gradients (and their grad-ready hooks fire) from that inner walk;
 * the input's gradient goes on through the outer one.
 *
 * Why a probe instead of asking the caller which tensors need gradients: the first run notes
 * whether any op would have recorded (a parameter requiring grad, an input with history), so a
 * segment whose input is data (the first block of a network) still gets its node, and one whose
 * parameters are all frozen gets none, without the node having to list every parameter. */
#include "internal.h"
#include "trace.h"

static _Thread_local int t_inside;   /* > 0 inside a recompute forward (first run or again) */
static _Thread_local int t_again;    /* > 0 inside a forward run again by backward */

bool dg_is_recomputing(void) { return t_again > 0; }

typedef struct recompute_attr {
    dg_recompute_fn fn;
    void *ctx;
    dg_generator *gen;              /* the thread's generator when the forward first ran */
    dg_autocast_snapshot autocast;
} recompute_attr;
/* The generators the first run drew from and where each started (dg_rng_log) travel as a saved
 * int64 tensor [n, 3] (generator, seed, counter): a node's attributes have no room for them. */
enum { SAVED_X, SAVED_RNG };
_Static_assert(sizeof(recompute_attr) <= DG_NODE_ATTR_BYTES, "recompute's attributes must fit a node");

/* The forward again, recording, as it first ran; every generator it draws from is put back
 * where the first run started it, and afterwards goes on from where it is now. */
static dg_tensor *run_again(const recompute_attr *a, const dg_tensor *x, const dg_tensor *rng) {
    int64_t n = rng->shape[0];
    const int64_t *e = dg_tensor_ptr(rng);
    dg_generator_state now[DG_RNG_LOG_MAX];
    for (int64_t i = 0; i < n; i++) {
        dg_generator *g = (dg_generator *)(intptr_t)e[3 * i];
        dg_generator_get_state(g, &now[i]);
        dg_generator_set_state(g, &(dg_generator_state){ .seed = (uint64_t)e[3 * i + 1], .offset = (uint64_t)e[3 * i + 2] });
    }
    dg_generator *prev_gen = dg_generator_use(a->gen);
    int old_paused = dg_autocast_apply(&a->autocast);
    dg_tensor *y = NULL;
    if (old_paused >= 0) {
        int old_depth = dg_grad_mode_swap(0);
        t_inside++;
        t_again++;
        y = a->fn(a->ctx, x);
        t_again--;
        t_inside--;
        dg_grad_mode_swap(old_depth);
        dg_autocast_unapply(&a->autocast, old_paused);
    }
    dg_generator_use(prev_gen);
    for (int64_t i = 0; i < n; i++) dg_generator_set_state((dg_generator *)(intptr_t)e[3 * i], &now[i]);
    return y;
}

static int recompute_backward(dg_node *n, const dg_tensor *g, dg_tensor **gin) {
    const recompute_attr *a = dg_node_attr(n);
    const char *name = dg_node_name(n);
    dg_tensor *x = dg_detach(dg_node_saved(n, SAVED_X));
    if (!x) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    bool want_dx = dg_node_needs_grad(n, 0);
    if (want_dx && dg_set_requires_grad(x, true)) return dg_last_status();
    uint64_t errs = dg_error_count();
    dg_tensor *y = run_again(a, x, dg_node_saved(n, SAVED_RNG));
    if (!y) {
        if (!dg_error_since(errs)) DG_ERR(DG_ESTATE, "recompute(%s): the forward returned NULL when run again", name);
        return dg_last_status() ? dg_last_status() : DG_ESTATE;
    }
    if (y->ndim != g->ndim || memcmp(y->shape, g->shape, sizeof(int64_t) * (size_t)g->ndim) || y->dtype != g->dtype) {
        DG_ERR(DG_ESTATE, "recompute(%s): run again, the forward gave %s %s but first gave %s %s (it must be deterministic)",
               name, DG_SHAPE_STR(y), dg_dtype_name(y->dtype), DG_SHAPE_STR(g), dg_dtype_name(g->dtype));
        return DG_ESTATE;
    }
    if (!y->node) return 0;   /* nothing inside needs a gradient after all */
    dg_backward_params bp = dg_backward_default_params();
    bp.grad_output = g;
    int rc = dg_backward_ext(y, bp);
    if (rc) return rc;
    if (want_dx && x->grad) gin[0] = dg_detach(x->grad);
    return 0;
}

dg_tensor *dg_recompute(const char *name, dg_recompute_fn fn, void *ctx, const dg_tensor *x) {
    if (!name) name = "recompute";
    DG_CHECK(fn, "recompute(%s): fn is NULL", name);
    DG_CHECK_INPUT("recompute", x);
    /* nothing to save where nothing records, and a segment inside one being recomputed runs as
     * part of it (its outer segment holds the only copy of its activations anyway) */
    if (!dg_is_grad_enabled() || t_inside) return fn(ctx, x);
    /* a trace (an export) must see every op of the segment, which a probed run would not record */
    if (dg_tracing()) return fn(ctx, x);

    recompute_attr a = { .fn = fn, .ctx = ctx, .gen = dg_generator_current() };
    dg_autocast_save(&a.autocast);
    bool x_needs = x->requires_grad || x->node;

    dg_rng_log log = { 0 };
    dg_rng_log *outer_log = dg_rng_log_swap(&log);
    int token = dg_record_probe_begin();
    t_inside++;
    dg_tensor *y = fn(ctx, x);
    t_inside--;
    bool needs = dg_record_probe_end(token) || x_needs;
    dg_rng_log_swap(outer_log);
    if (!y || !needs) return y;
    int rc = 0;
    if (log.overflow) {
        DG_ERR(DG_EUNSUPPORTED, "recompute(%s): the forward drew from more than %d random generators", name, DG_RNG_LOG_MAX);
        rc = DG_EUNSUPPORTED;
    } else if (y->node) {   /* a probed forward records nothing: this one returned a tensor made elsewhere */
        DG_ERR(DG_ESTATE, "recompute(%s): the forward returned a tensor with history ('%s'); it must return one it made",
               name, y->node->name);
        rc = DG_ESTATE;
    }
    if (rc) {
        if (y != x) dg_tensor_free(y);
        return NULL;
    }
    dg_tensor *out = y;
    if (y == x || y->storage == x->storage) {
        /* the node goes on a new tensor: the input itself (or a view of it) must stay as it is */
        dg_no_grad_begin();
        out = dg_clone(y);
        dg_no_grad_end();
        if (y != x) dg_tensor_free(y);   /* fn's own result, replaced by the copy */
        if (!out) return NULL;
    }
    /* the log's tensor lives on only as the node's saved alias: made in a scope of its own so
     * that nothing else holds it, whether or not the caller has a scope open */
    dg_scope *sc = dg_scope_begin();
    dg_tensor *rng = sc ? dg_tensor_alloc((int64_t[]){ log.n, 3 }, 2, DG_I64, (dg_device){ DG_CPU, 0 }) : NULL;
    for (int i = 0; rng && i < log.n; i++) {
        int64_t *e = (int64_t *)dg_tensor_ptr(rng) + 3 * i;
        e[0] = (int64_t)(intptr_t)log.e[i].g;
        e[1] = (int64_t)log.e[i].seed;
        e[2] = (int64_t)log.e[i].counter;
    }
    const dg_tensor *in[1] = { x };
    dg_node *n = rng ? dg_record(name, out, in, 1, recompute_backward) : NULL;
    if (n) memcpy(dg_node_attr(n), &a, sizeof a);
    rc = !n || dg_node_save(n, x) || dg_node_save(n, rng);
    if (sc) dg_scope_end(sc);
    if (rc) {
        dg_tensor_free(out);
        return NULL;
    }
    return out;
}
