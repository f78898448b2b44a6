/* dygraph/autograd.h — the tape: requires_grad, backward, no_grad, leaf-gradient hooks.
 *
 * Every differentiable op whose inputs need a gradient records a node. dg_backward walks the
 * nodes reachable from the output in reverse topological order and accumulates gradients into
 * the leaves (tensors that require grad and were not made by an op, e.g. parameters).
 * Gradients accumulate across uses and across backward calls until cleared. */
#ifndef DYGRAPH_AUTOGRAD_H
#define DYGRAPH_AUTOGRAD_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

DG_API int dg_set_requires_grad(dg_tensor *t, bool requires_grad);  /* leaves only */
DG_API bool dg_requires_grad(const dg_tensor *t);
DG_API int dg_set_stop_gradient(dg_tensor *t, bool stop);           /* Paddle spelling: stop = !requires_grad */
DG_API bool dg_is_leaf(const dg_tensor *t);
DG_API dg_tensor *dg_grad(const dg_tensor *t);                      /* borrowed; NULL if none yet */
DG_API int dg_clear_grad(dg_tensor *t);                             /* drop the accumulated gradient */
/* The part of t's gradient held as rows (from dg_embedding with sparse, like torch's sparse
 * grad coalesced): ids [k] int64, sorted and unique, and rows [k, dim...] their summed
 * gradients, both borrowed from t (valid until its gradient changes). Returns k, 0 when there
 * are none. Backward passes merge new rows into them; dg_grad (and so every optimizer) folds
 * them into the dense gradient and drops them; dg_clear_grad drops them. */
DG_API int64_t dg_sparse_grad(const dg_tensor *t, dg_tensor **ids, dg_tensor **rows);
/* Whether t's whole gradient is such rows (no dense part): what lets SGD and Adagrad without
 * weight decay step only those rows, as torch's do with a sparse gradient. */
DG_API bool dg_grad_is_rows(const dg_tensor *t);
/* t.grad = g: copies g (same shape and dtype as t) into t's gradient, made if there is none
 * (what DataParallel does after its all-reduce). */
DG_API int dg_set_grad(dg_tensor *t, const dg_tensor *g);
DG_API dg_tensor *dg_detach(const dg_tensor *t);                    /* shares storage, no history */
DG_API const char *dg_grad_fn_name(const dg_tensor *t);             /* op that made t, or NULL */

/* torch.Tensor.backward(gradient, retain_graph) */
typedef struct dg_backward_params {
    const dg_tensor *grad_output;  /* NULL (default): t must have one element, gradient 1 */
    bool retain_graph;             /* keep saved tensors for another backward; default false */
    uint32_t params_tag;     /* set by dg_backward_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_backward_params;
DG_API dg_backward_params dg_backward_default_params(void);

DG_API int dg_backward(dg_tensor *t);
DG_API int dg_backward_ext(dg_tensor *t, dg_backward_params params);

/* Grad mode. Scoped like torch.no_grad(); nests. */
DG_API void dg_no_grad_begin(void);
DG_API void dg_no_grad_end(void);
DG_API bool dg_is_grad_enabled(void);

/* Anomaly mode (torch.autograd.detect_anomaly): every op's output and every backward rule's
 * gradients are checked for NaN and infinity, and the first one found fails the op (NULL) or the
 * backward walk with a message naming the op, its inputs' shapes, the layer that called it and,
 * for a gradient, the forward op that recorded the node. Costs a copy of every output to the
 * host: a debugging mode. Also on with DG_ANOMALY=1 in the environment. Process-wide. */
DG_API void dg_set_anomaly(bool on);
DG_API bool dg_anomaly_enabled(void);

/* Called on a leaf once its gradient for this backward pass is complete (every contribution
 * accumulated). DataParallel starts a bucket's all-reduce from here. */
typedef void (*dg_grad_hook)(dg_tensor *leaf, void *user);
DG_API int dg_register_grad_hook(dg_tensor *leaf, dg_grad_hook fn, void *user);
DG_API int dg_clear_grad_hooks(dg_tensor *leaf);

/* ---- recompute (activation checkpointing: Paddle's fleet recompute, torch.utils.checkpoint) ----
 * y = fn(ctx, x) run without keeping fn's intermediate tensors: backward runs fn again, this
 * time recording, and walks that graph with y's gradient. The second run sees what the first
 * saw: the thread's random generator at the same position (dropout draws the same masks; the
 * generator then goes on from where it was), the same autocast region and grad mode. Gradients
 * equal those of y = fn(ctx, x) without recompute, bit for bit where fn is deterministic; grad-ready
 * hooks (DataParallel's) fire from the second run. fn must make its result from x and tensors
 * it owns (a layer's parameters), run the same ops both times, and, with ctx, outlive the
 * backward. Layers state updates done in the forward (BatchNorm's running statistics) should be
 * skipped while dg_is_recomputing() is true; the built-in ones are. Without grad mode, or inside
 * another recompute, fn just runs. A parameter used both inside and outside fn gets its
 * grad-ready hook when its outside uses are done, possibly before the inside one: keep such
 * parameters out of recomputed segments under DataParallel overlap (torch's reentrant
 * checkpoint has the same limit). name names the node ("recompute" when NULL). */
typedef dg_tensor *(*dg_recompute_fn)(void *ctx, const dg_tensor *x);
DG_API dg_tensor *dg_recompute(const char *name, dg_recompute_fn fn, void *ctx, const dg_tensor *x);
/* Limits, as torch's reentrant checkpoint has them: the generators fn drew from are put back to
 * where it first drew and then forward again, so they must outlive the backward, and another
 * thread drawing from the same generator while this backward runs may change the masks replayed;
 * an in-place write on one of fn's intermediates, an error in an ordinary forward, is found only
 * when backward runs fn again (the first run records nothing to check against); a forward that
 * ran outside every autocast region runs again outside them even if backward is called inside one.
 * A layer marked with dg_layer_set_recompute is fn's ctx: it must outlive the backward (not be
 * replaced, e.g. by dg_nn_convert_sync_batch_norm, in between), and its train/eval mode at
 * backward time is the one the second run sees. */
/* True while backward runs a recomputed forward again. */
DG_API bool dg_is_recomputing(void);

#ifdef __cplusplus
}
#endif
#endif
