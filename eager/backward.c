/* eager/backward.c — dg_backward: collect the nodes reachable from the output, count how many
 * gradients each node and leaf will receive, then run node backward rules in an order where a
 * node runs only after every consumer has sent its gradient (reverse topological order).
 * Temporaries of each backward rule live in a private scope, so the user's scope only ever
 * sees the gradients that end up in leaves. */
#include "backend.h"

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

/* Returns acc + g as a tensor holding one reference owned by the caller; consumes both refs. */
static dg_tensor *sum_into(dg_tensor *acc, dg_tensor *g) {
    if (!acc) return g;
    if (!g) return acc;
    if (exclusively_owned(acc) && acc->dtype == g->dtype) {
        int rc = DG_KCALL(acc, binary, DG_BIN_ADD, DG_KV(acc), DG_KV(g), DG_KV(acc), 0, 0);
        dg_tensor_release(g);
        return rc ? (dg_tensor_release(acc), NULL) : acc;
    }
    dg_scope *s = dg_scope_begin();
    dg_tensor *r = dg_add(acc, g);
    dg_tensor_retain(r);
    dg_scope_end(s);
    dg_tensor_release(acc);
    dg_tensor_release(g);
    return r;
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
        return leaf->grad ? 0 : DG_ENOMEM;
    }
    int rc = DG_KCALL(leaf->grad, binary, DG_BIN_ADD, DG_KV(leaf->grad), DG_KV(g), DG_KV(leaf->grad), 0, 0);
    dg_tensor_release(g);
    return rc;
}

static void leaf_done(dg_tensor *leaf) {
    if (--leaf->bw_pending == 0)
        for (int h = 0; h < leaf->n_hooks; h++) leaf->hooks[h](leaf, leaf->hook_user[h]);
}

static bool shape_equal(const dg_tensor *t, dg_shape s) {
    if (t->ndim != s.ndim) return false;
    for (int i = 0; i < s.ndim; i++) if (t->shape[i] != s.d[i]) return false;
    return true;
}

dg_backward_params dg_backward_default_params(void) { return (dg_backward_params){ .grad_output = NULL, .retain_graph = false }; }

int dg_backward(dg_tensor *t) { return dg_backward_ext(t, dg_backward_default_params()); }

static int backward_walk(dg_tensor *t, dg_backward_params p);
/* Backward rules run with autocast paused: a gradient keeps the dtype of what it is the
 * gradient of, wherever the loop calls backward (as torch's engine does). */
int dg_backward_ext(dg_tensor *t, dg_backward_params p) {
    dg_autocast_pause(1);
    int rc = backward_walk(t, p);
    dg_autocast_pause(-1);
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
        if (!root_grad) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }

    if (!t->node) {  /* backward on a leaf: its gradient is the seed itself */
        t->bw_pending = 1;
        int rc = accumulate_leaf(t, root_grad);
        leaf_done(t);
        return rc;
    }

    /* 1. collect nodes and count the gradients each will receive */
    vec nodes = {0}, leaves = {0}, stack = {0};
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
                if (e->leaf->bw_pending == 0 && (rc = vec_push(&leaves, e->leaf))) break;
                e->leaf->bw_pending++;
            }
        }
    }
    free(stack.p);
    if (rc) goto done;

    /* 2. run the rules; `ready` holds nodes whose consumers have all reported */
    vec ready = {0};
    root->grad_acc = root_grad;
    root_grad = NULL;
    rc = vec_push(&ready, root);
    while (!rc && ready.n > 0) {
        dg_node *n = ready.p[--ready.n];
        dg_tensor *g = n->grad_acc;
        n->grad_acc = NULL;
        dg_tensor *gin[DG_MAX_NODE_INPUTS] = {0};
        if (g) {
            dg_scope *s = dg_scope_begin();
            dg_no_grad_begin();
            uint64_t errs = dg_error_count();
            int brc = n->backward(n, g, gin);
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
            dg_no_grad_end();
            dg_scope_end(s);
            dg_tensor_release(g);
            if (brc) {
                if (!dg_error_since(errs)) DG_ERR(brc, "backward of '%s' failed", n->name);
                rc = brc;
                for (int i = 0; i < n->n_in; i++) dg_tensor_release(gin[i]);
                break;
            }
        }
        for (int i = 0; i < n->n_in; i++) {
            dg_edge *e = &n->in[i];
            if (e->node) {
                e->node->grad_acc = sum_into(e->node->grad_acc, gin[i]);
                if (--e->node->deps == 0 && (rc = vec_push(&ready, e->node))) break;
            } else if (e->leaf) {
                if (gin[i] && (rc = accumulate_leaf(e->leaf, gin[i]))) break;
                leaf_done(e->leaf);
            } else {
                dg_tensor_release(gin[i]);
            }
        }
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
    /* on success every count is back where it was; a walk nested in another (recompute's, from
     * a backward rule) must leave the outer walk's counts on leaves they share */
    if (rc)
        for (int64_t i = 0; i < leaves.n; i++) ((dg_tensor *)leaves.p[i])->bw_pending = 0;
    dg_tensor_release(root_grad);
    free(nodes.p);
    free(leaves.p);
    return rc;
}
