/* eager/backward.c — dg_backward: collect the nodes reachable from the output, count how many
 * gradients each node and leaf will receive, then run node backward rules in an order where a
 * node runs only after every consumer has sent its gradient (reverse topological order).
 * Temporaries of each backward rule live in a private scope, so the user's scope only ever
 * sees the gradients that end up in leaves.
 *
 * Failure. Anything that fails inside the walk (a rule, adding two gradients of one node,
 * accumulating into a leaf, the walk's own bookkeeping) stops it and fails dg_backward with a
 * message naming the node. A leaf's grad-ready hooks fire only when every gradient it was to
 * receive has arrived, so a stopped walk never hands DataParallel a partial gradient. Leaf counts
 * are counts, not flags: a walk nested in another (recompute's, run from a backward rule) adds
 * to the outer walk's counts on the leaves they share, and on failure takes back exactly what it
 * added and has not yet delivered. */
#include "backend.h"
#include "profiler.h"

typedef struct vec { void **p; int64_t n, cap; } vec;
static int vec_push(vec *v, void *x) {
    if (v->n == v->cap) {
        int64_t cap = v->cap ? v->cap * 2 : 64;
        void **p = realloc(v->p, sizeof *p * (size_t)cap);
        if (!p) return DG_ENOMEM;
        v->p = p;
        v->cap = cap;
    }
    v->p[v->n++] = x;
    return 0;
}

static int g_generation;

/* True when t's memory is reachable only through t, so adding into it in place is safe. */
static bool exclusively_owned(const dg_tensor *t) {
    return t->refcount == 1 && t->storage->refcount == 1 && !t->node && t->offset == 0 && dg_is_contiguous(t);
}

/* *acc += g, *acc holding one reference owned by the caller; consumes g's reference. On failure
 * *acc is released and set to NULL and the error is recorded (the node losing its gradient must
 * fail the walk: its rule would otherwise be skipped as if no gradient had reached it). */
static int sum_into(dg_tensor **acc, dg_tensor *g) {
    if (!g) return 0;
    if (!*acc) { *acc = g; return 0; }
    dg_tensor *a = *acc;
    int rc;
    if (exclusively_owned(a) && a->dtype == g->dtype) {
        rc = DG_KCALL(a, binary, DG_BIN_ADD, DG_KV(a), DG_KV(g), DG_KV(a), 0, 0);
    } else {
        dg_scope *s = dg_scope_begin();
        dg_tensor *r = dg_add(a, g);
        dg_tensor_retain(r);
        dg_scope_end(s);
        dg_tensor_release(a);
        a = r;
        rc = r ? 0 : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
    }
    dg_tensor_release(g);
    if (rc) { dg_tensor_release(a); a = NULL; }
    *acc = a;
    return rc;
}

/* Make a gradient a leaf may own and later add into in place. Consumes g's reference. */
static dg_tensor *own_leaf_grad(dg_tensor *leaf, dg_tensor *g) {
    if (exclusively_owned(g) && g->dtype == leaf->dtype) return g;
    dg_tensor *c = NULL;
    dg_scope *s = dg_scope_begin();
    c = dg_tensor_alloc(g->shape, g->ndim, leaf->dtype, g->storage->device);
    if (c && DG_KCALL(c, copy, DG_KV(g), DG_KV(c)) == 0) { dg_keep(c); }
    else if (c) { c = NULL; }
    dg_scope_end(s);
    dg_tensor_release(g);
    return c;
}

static int accumulate_leaf(dg_tensor *leaf, dg_tensor *g) {
    if (!leaf->grad) {
        leaf->grad = own_leaf_grad(leaf, g);
        return leaf->grad ? 0 : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
    }
    int rc = DG_KCALL(leaf->grad, binary, DG_BIN_ADD, DG_KV(leaf->grad), DG_KV(g), DG_KV(leaf->grad), 0, 0);
    dg_tensor_release(g);
    return rc;
}

/* Records a failure of the walk with the cause (the callee's message, copied first: it lives in
 * the slot the new message is written to) after the context. */
#define WALK_FAIL(rc, fmt, ...) do {                                                     \
        char cause_[DG_ERROR_MSG_LEN];                                                   \
        snprintf(cause_, sizeof cause_, "%s", dg_last_status() ? dg_last_error() : "no reason given"); \
        DG_ERR((rc), fmt ": %s", __VA_ARGS__, cause_);                                   \
    } while (0)

/* Anomaly mode: the gradients a rule made must be finite; the message names the rule, the
 * forward op that recorded its node and the layer that op ran in. */
static int anomaly_check(const dg_node *n, dg_tensor *const *gin) {
    for (int i = 0; i < n->n_in; i++) {
        if (!gin[i]) continue;
        int64_t nan, bad = dg_count_nonfinite(gin[i], &nan);
        if (bad < 0) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
        if (bad == 0) continue;
        DG_ERR(DG_EINVAL, "anomaly: backward of '%s' made %lld NaN and %lld infinite values in the gradient of its input %d "
               "%s %s; the node was recorded by the forward op '%s'%s%s", n->name, (long long)nan, (long long)(bad - nan), i,
               dg_dtype_name(gin[i]->dtype), DG_SHAPE_STR(gin[i]), n->name,
               n->anomaly_where ? " called from " : " called outside any layer", n->anomaly_where ? n->anomaly_where : "");
        return DG_EINVAL;
    }
    return 0;
}

/* One of the gradients the leaf was waiting for has arrived (or its edge carried none): the hooks
 * run when it was the last. */
static void leaf_done(dg_tensor *leaf) {
    if (--leaf->bw_pending == 0)
        for (int h = 0; h < leaf->n_hooks; h++) leaf->hooks[h](leaf, leaf->hook_user[h]);
}

/* The walk failed: take back the counts this walk added to leaves for edges it never delivered
 * (edges [bw_edges_done, bw_edges_counted) of each node it collected), and nothing else, so an
 * outer walk's counts on the same leaves stay as they were. No hook runs. */
static void undo_leaf_counts(const vec *nodes) {
    for (int64_t k = 0; k < nodes->n; k++) {
        dg_node *n = nodes->p[k];
        for (int i = n->bw_edges_done; i < n->bw_edges_counted; i++)
            if (!n->in[i].node && n->in[i].leaf) n->in[i].leaf->bw_pending--;
        n->bw_edges_counted = n->bw_edges_done = 0;
    }
}

static bool shape_equal(const dg_tensor *t, dg_shape s) {
    if (t->ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++) if (t->shape[i] != s.d[i]) return false;
    return true;
}

dg_backward_params dg_backward_default_params(void) { return (dg_backward_params){ .params_tag = DG_PARAMS_TAG, .grad_output = NULL, .retain_graph = false }; }

int dg_backward(dg_tensor *t) { return dg_backward_ext(t, dg_backward_default_params()); }

static int backward_walk(dg_tensor *t, dg_backward_params p);
/* Backward rules run with autocast paused: a gradient keeps the dtype of what it is the
 * gradient of, wherever the loop calls backward (as torch's engine does). */
int dg_backward_ext(dg_tensor *t, dg_backward_params p) {
    DG_CHECK_PARAMS_INT("backward_ext", p, dg_backward_default_params);
    uint64_t t_prof = dg_profiling() ? dg_prof_now() : 0;
    dg_autocast_pause(1);
    int rc = backward_walk(t, p);
    dg_autocast_pause(-1);
    if (t_prof) dg_profiler_span_end(t_prof, DG_PROFILER_AUTOGRAD, "backward", -1, -1);
    return rc;
}

static int backward_walk(dg_tensor *t, dg_backward_params p) {
    DG_CHECK_INPUT_INT("backward", t);
    DG_CHECK_INT(t->node || t->requires_grad, "backward: tensor %s does not require grad (no input of its ops requires grad)", DG_SHAPE_STR(t));
    if (p.grad_output) {
        DG_CHECK_INPUT_INT("backward", p.grad_output);
        DG_CHECK_INT(p.grad_output->numel == t->numel && p.grad_output->dtype == t->dtype,
                     "backward: grad_output %s %s does not match output %s %s", DG_SHAPE_STR(p.grad_output),
                     dg_dtype_name(p.grad_output->dtype), DG_SHAPE_STR(t), dg_dtype_name(t->dtype));
    } else {
        DG_CHECK_INT(t->numel == 1, "backward: output %s is not a scalar; pass grad_output", DG_SHAPE_STR(t));
    }

    /* root gradient, owned by the walk */
    dg_tensor *root_grad;
    {
        dg_scope *s = dg_scope_begin();
        dg_no_grad_begin();
        root_grad = p.grad_output ? dg_reshape(p.grad_output, dg_shape_of(t)) : dg_ones_like(t);
        root_grad = root_grad ? dg_clone(root_grad) : NULL;
        dg_tensor_retain(root_grad);
        dg_no_grad_end();
        dg_scope_end(s);
        if (!root_grad) {
            int rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
            WALK_FAIL(rc, "backward: making the seed gradient of %s failed", DG_SHAPE_STR(t));
            return rc;
        }
    }

    if (!t->node) {  /* backward on a leaf: its gradient is the seed itself */
        t->bw_pending++;
        int rc = accumulate_leaf(t, root_grad);
        if (rc) {
            t->bw_pending--;   /* no gradient: no hook */
            WALK_FAIL(rc, "backward: accumulating the gradient of the leaf %s failed", DG_SHAPE_STR(t));
            return rc;
        }
        leaf_done(t);
        return rc;
    }

    /* 1. collect nodes and count the gradients each will receive */
    vec nodes = {0}, stack = {0};
    int rc = 0;
    int gen = __atomic_add_fetch(&g_generation, 1, __ATOMIC_RELAXED);
    dg_node *root = t->node;
    root->visit = gen;
    root->deps = 0;
    rc = vec_push(&stack, root);
    while (!rc && stack.n > 0) {
        dg_node *n = stack.p[--stack.n];
        if (n->released) {
            DG_ERR(DG_ESTATE, "backward: the graph through '%s' was freed by an earlier backward; "
                   "pass retain_graph=true to the first dg_backward_ext to call it twice", n->name);
            rc = DG_ESTATE;
            break;
        }
        n->bw_edges_counted = n->bw_edges_done = 0;
        if ((rc = vec_push(&nodes, n))) break;
        for (int i = 0; i < n->n_in; i++) {
            dg_edge *e = &n->in[i];
            if (e->node) {
                if (e->node->visit != gen) {
                    e->node->visit = gen;
                    e->node->deps = 0;
                    if ((rc = vec_push(&stack, e->node))) break;
                }
                e->node->deps++;
            } else if (e->leaf) {
                e->leaf->bw_pending++;
            }
            n->bw_edges_counted = i + 1;
        }
    }
    free(stack.p);
    if (rc) {
        if (rc == DG_ENOMEM) DG_ERR(rc, "backward: out of memory collecting the graph");   /* else: said above */
        goto done;
    }

    /* 2. run the rules; `ready` holds nodes whose consumers have all reported */
    vec ready = {0};
    root->grad_acc = root_grad;
    root_grad = NULL;
    if ((rc = vec_push(&ready, root))) DG_ERR(rc, "backward: out of memory starting the walk");
    while (!rc && ready.n > 0) {
        dg_node *n = ready.p[--ready.n];
        dg_tensor *g = n->grad_acc;
        n->grad_acc = NULL;
        dg_tensor *gin[DG_MAX_NODE_INPUTS] = {0};
        if (g) {
            uint64_t t_prof = dg_profiling() ? dg_prof_op_begin((const dg_tensor *const *)&g, 1) : 0;
            dg_scope *s = dg_scope_begin();
            dg_no_grad_begin();
            uint64_t errs = dg_error_count();
            bool anomaly = dg_anomaly_enabled();
            if (anomaly) dg_anomaly_ops_pause(1);
            int brc = n->backward(n, g, gin);
            if (anomaly) dg_anomaly_ops_pause(-1);
            /* A rule that returns 0 after an op inside it failed (its result NULL, taken for "no
             * gradient") would cut the gradient silently: an input that needs a gradient and got
             * none while an error was recorded fails the walk. */
            if (!brc && dg_error_since(errs))
                for (int i = 0; i < n->n_in && !brc; i++)
                    if (!gin[i] && dg_node_needs_grad(n, i)) brc = dg_last_status() ? dg_last_status() : DG_ESTATE;
            for (int i = 0; i < n->n_in; i++) {
                if (gin[i] && !dg_node_needs_grad(n, i)) gin[i] = NULL;
                if (!gin[i]) continue;
                if (!shape_equal(gin[i], n->in[i].shape) && !brc) {
                    DG_ERR(DG_ESTATE, "backward of '%s': gradient for input %d has shape %s, input was %s",
                           n->name, i, DG_SHAPE_STR(gin[i]), dg_shape_fmt(n->in[i].shape.d, n->in[i].shape.ndim, (char[96]){0}, 96));
                    brc = DG_ESTATE;
                }
                dg_tensor_retain(gin[i]);
            }
            if (!brc && anomaly) brc = anomaly_check(n, gin);
            dg_no_grad_end();
            dg_scope_end(s);
            if (t_prof) dg_prof_op(n->name, DG_PROF_BACKWARD, t_prof, (const dg_tensor *const *)gin, n->n_in, brc ? NULL : g);
            dg_tensor_release(g);
            if (brc) {
                /* the rule's own message may not say which node it was (an op inside it ran out
                 * of memory): name it, keeping the cause */
                if (!dg_error_since(errs)) DG_ERR(brc, "backward of '%s' failed", n->name);
                else WALK_FAIL(brc, "backward of '%s' failed", n->name);
                rc = brc;
                for (int i = 0; i < n->n_in; i++) dg_tensor_release(gin[i]);
                break;
            }
        }
        for (int i = 0; i < n->n_in; i++) {
            dg_edge *e = &n->in[i];
            dg_tensor *gi = gin[i];
            gin[i] = NULL;   /* consumed below, whatever happens */
            if (e->node) {
                if ((rc = sum_into(&e->node->grad_acc, gi))) {
                    WALK_FAIL(rc, "backward of '%s': adding its gradient for input %d to the one '%s' already had failed",
                              n->name, i, e->node->name);
                    break;
                }
                if (--e->node->deps == 0 && (rc = vec_push(&ready, e->node))) {
                    DG_ERR(rc, "backward of '%s': out of memory scheduling '%s'", n->name, e->node->name);
                    break;
                }
            } else if (e->leaf) {
                if (gi && (rc = accumulate_leaf(e->leaf, gi))) {
                    WALK_FAIL(rc, "backward of '%s': accumulating its gradient for input %d (a leaf %s) failed", n->name, i,
                              DG_SHAPE_STR(e->leaf));
                    break;
                }
                leaf_done(e->leaf);
            } else {
                dg_tensor_release(gi);
            }
            n->bw_edges_done = i + 1;
        }
        for (int i = 0; i < n->n_in; i++) dg_tensor_release(gin[i]);   /* those a failure left undelivered */
        if (!p.retain_graph) {
            for (int i = 0; i < n->n_saved; i++) dg_tensor_release(n->saved[i]);
            n->n_saved = 0;
            n->released = true;
        }
    }
    free(ready.p);
    /* on error, drop partial sums so a later backward starts clean */
    for (int64_t i = 0; i < nodes.n; i++) {
        dg_node *n = nodes.p[i];
        dg_tensor_release(n->grad_acc);
        n->grad_acc = NULL;
    }
done:
    /* on success every count is back where it was; on failure this walk takes back only its own */
    if (rc) undo_leaf_counts(&nodes);
    dg_tensor_release(root_grad);
    free(nodes.p);
    return rc;
}
