/* eager/tape.c — autograd's bookkeeping: grad mode, leaf flags and gradients, recording nodes
 * (dg_record, saved tensors, attributes) and the leaf-gradient-ready hooks. The walk itself is
 * eager/backward.c. */
#include "backend.h"
#include "trace.h"

static _Thread_local int no_grad_depth;
/* recompute's probe (eager/recompute.c): the no_grad depth the probe runs at (0: none), and
 * whether an op at that depth saw an input needing a gradient. An op under a no_grad of its own
 * inside the probed forward (a running-statistics update) is deeper and does not count. */
static _Thread_local int probe_depth;
static _Thread_local bool probe_hit;

void dg_no_grad_begin(void) { no_grad_depth++; }
void dg_no_grad_end(void) { if (no_grad_depth > 0) no_grad_depth--; }
/* A probed forward (recompute's first run) counts as grad mode for what ops decide (in-place
 * checks, conv+bn folding) so that it computes exactly what the recording run will; only
 * dg_needs_record tells it apart. */
bool dg_is_grad_enabled(void) { return no_grad_depth == 0 || (probe_depth && no_grad_depth == probe_depth); }
void dg_grad_mode_reset(void) { no_grad_depth = 0; probe_depth = 0; probe_hit = false; }
int dg_grad_mode_swap(int depth) {
    int old = no_grad_depth;
    no_grad_depth = depth;
    return old;
}
int dg_record_probe_begin(void) {
    int token = probe_depth | (probe_hit ? 1 << 30 : 0);
    no_grad_depth++;
    probe_depth = no_grad_depth;
    probe_hit = false;
    return token;
}
bool dg_record_probe_end(int token) {
    bool hit = probe_hit;
    if (no_grad_depth > 0) no_grad_depth--;
    probe_depth = token & ~(1 << 30);
    probe_hit = (token >> 30) & 1;
    return hit;
}

/* ---- leaves ---- */
int dg_set_requires_grad(dg_tensor *t, bool rg) {
    DG_CHECK_INPUT_INT("set_requires_grad", t);
    DG_CHECK_INT(!t->node, "set_requires_grad: tensor made by '%s' is not a leaf; use dg_detach first", t->node->name);
    DG_CHECK_INT(!rg || dg_dtype_is_float(t->dtype), "set_requires_grad: dtype %s cannot require grad", dg_dtype_name(t->dtype));
    t->requires_grad = rg;
    return 0;
}
int dg_set_stop_gradient(dg_tensor *t, bool stop) { return dg_set_requires_grad(t, !stop); }
/* NULL answers "no" silently, as before; a freed or stale handle also records why */
static bool usable(const dg_tensor *t, const char *fn) {
    if (dg_tensor_live(t)) return true;
    if (t) dg_tensor_bad(fn, "t", t);
    return false;
}
bool dg_requires_grad(const dg_tensor *t) { return usable(t, "requires_grad") && (t->requires_grad || t->node); }
bool dg_is_leaf(const dg_tensor *t) { return usable(t, "is_leaf") && !t->node; }
/* A gradient held as sparse rows (a sparse embedding's) becomes dense here, the first time
 * anyone asks for the dense one: the rows are the cheap form, the dense tensor the general one. */
dg_tensor *dg_grad(const dg_tensor *t) {
    if (!usable(t, "grad")) return NULL;
    if (t->sparse_ids && dg_sparse_grad_fold((dg_tensor *)t) != 0) return NULL;
    return t->grad;
}
bool dg_grad_is_rows(const dg_tensor *t) { return usable(t, "grad_is_rows") && t->sparse_ids && !t->grad; }
static void drop_sparse_grad(dg_tensor *t) {
    dg_tensor_release(t->sparse_ids);
    dg_tensor_release(t->sparse_rows);
    t->sparse_ids = t->sparse_rows = NULL;
}
int dg_set_grad(dg_tensor *t, const dg_tensor *g) {
    DG_CHECK_INPUT_INT("set_grad", t);
    DG_CHECK_INPUT_INT("set_grad", g);
    DG_CHECK_INT(g->dtype == t->dtype && g->ndim == t->ndim && !memcmp(g->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim),
                 "set_grad: gradient %s %s does not match tensor %s %s", DG_SHAPE_STR(g), dg_dtype_name(g->dtype),
                 DG_SHAPE_STR(t), dg_dtype_name(t->dtype));
    drop_sparse_grad(t);
    dg_no_grad_begin();
    int rc = 0;
    if (t->grad) rc = dg_copy_(t->grad, g);
    else {
        dg_scope *s = dg_scope_begin();
        dg_tensor *c = dg_clone(g);
        t->grad = c ? dg_keep(c) : NULL;
        dg_scope_end(s);
        if (!t->grad) rc = dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    dg_no_grad_end();
    return rc;
}

int dg_clear_grad(dg_tensor *t) {
    DG_CHECK_INPUT_INT("clear_grad", t);
    dg_tensor_release(t->grad);
    t->grad = NULL;
    drop_sparse_grad(t);
    return 0;
}
const char *dg_grad_fn_name(const dg_tensor *t) { return usable(t, "grad_fn_name") && t->node ? t->node->name : NULL; }

dg_tensor *dg_detach(const dg_tensor *t) {
    DG_CHECK_INPUT("detach", t);
    return dg_tensor_view(t, t->ndim, t->shape, t->stride, t->offset);
}

int dg_register_grad_hook(dg_tensor *leaf, dg_grad_hook fn, void *user) {
    DG_CHECK_INPUT_INT("register_grad_hook", leaf);
    DG_CHECK_INT(fn, "register_grad_hook: fn is NULL");
    DG_CHECK_INT(!leaf->node, "register_grad_hook: only leaves get grad-ready hooks (tensor made by '%s')", leaf->node->name);
    DG_CHECK_INT(leaf->n_hooks < DG_MAX_HOOKS, "register_grad_hook: at most %d hooks per tensor", DG_MAX_HOOKS);
    leaf->hooks[leaf->n_hooks] = fn;
    leaf->hook_user[leaf->n_hooks++] = user;
    return 0;
}
int dg_clear_grad_hooks(dg_tensor *leaf) {
    DG_CHECK_INPUT_INT("clear_grad_hooks", leaf);
    leaf->n_hooks = 0;
    return 0;
}

/* ---- recording ---- */
static bool any_needs_grad(const dg_tensor *const *in, int n) {
    for (int i = 0; i < n; i++)
        if (in[i] && (in[i]->requires_grad || in[i]->node)) return true;
    return false;
}
bool dg_needs_record(const dg_tensor *const *in, int n) {
    if (no_grad_depth) {
        if (probe_depth && no_grad_depth == probe_depth && !probe_hit && any_needs_grad(in, n)) probe_hit = true;
        return false;
    }
    return any_needs_grad(in, n);
}

dg_node *dg_record(const char *name, dg_tensor *out, const dg_tensor *const *in, int n, dg_backward_fn bw) {
    return dg_record_as(-1, name, out, in, n, bw);
}

dg_node *dg_record_as(int op, const char *name, dg_tensor *out, const dg_tensor *const *in, int n, dg_backward_fn bw) {
    if (!name) name = "(unnamed op)";
    DG_CHECK_INPUT("record", out);
    DG_CHECK(!out->node, "record(%s): the output already has a node (made by '%s'); record on the op's fresh output",
             name, out->node->name);
    DG_CHECK(n >= 0 && n <= DG_MAX_NODE_INPUTS, "record(%s): %d inputs; a node takes 0..%d (DG_MAX_NODE_INPUTS)", name, n,
             DG_MAX_NODE_INPUTS);
    DG_CHECK(n == 0 || in, "record(%s): inputs is NULL", name);
    DG_CHECK(bw, "record(%s): the backward function is NULL", name);
    for (int i = 0; i < n; i++) DG_CHECK_OPT_INPUT("record", in[i]);
    dg_node *node = dg_block_alloc(sizeof *node);
    DG_CHECK(node, "record(%s): out of memory", name);
    memset(node, 0, sizeof *node);
    node->refcount = 1;
    node->name = name;
    node->op = (int16_t)op;
    node->backward = bw;
    if (dg_anomaly_enabled()) {   /* where the forward ran, for a backward that fails later */
        char where[320];
        dg_op_context_describe(where, sizeof where);
        node->anomaly_where = where[0] ? strdup(where) : NULL;
    }
    node->n_in = n;
    for (int i = 0; i < n; i++) {
        dg_tensor *t = (dg_tensor *)in[i];   /* the edge holds a reference: refcounts only, no values */
        if (!t) continue;
        dg_edge *e = &node->in[i];
        e->shape = dg_shape_of(t);
        e->dtype = t->dtype;
        if (t->node) {
            e->node = t->node;
            __atomic_add_fetch(&t->node->refcount, 1, __ATOMIC_RELAXED);
        } else if (t->requires_grad) {
            e->leaf = t;
            dg_tensor_retain(t);
        }
    }
    out->node = node;
    if (dg_trace_active) dg_trace_on_record(node, out, in, n);
    return node;
}

int dg_node_save(dg_node *node, const dg_tensor *t) {
    DG_CHECK_HANDLE_INT(node, "node_save: node is NULL (a failed dg_record?)");
    if (!t) {   /* an earlier op's failure, or an absent tensor: either way the node cannot work */
        DG_PROPAGATE(DG_EINVAL, "node_save(%s): tensor %d to save is NULL", node->name, node->n_saved);
        return DG_EINVAL;
    }
    DG_CHECK_INPUT_INT("node_save", t);
    DG_CHECK_INT(node->n_saved < DG_MAX_NODE_SAVED, "node_save(%s): a node keeps at most %d saved tensors (DG_MAX_NODE_SAVED); "
                 "this is number %d", node->name, DG_MAX_NODE_SAVED, node->n_saved + 1);
    /* Save a history-free alias: a node never holds a tensor that holds a node, so the tape
     * has no cycles and freeing it needs no recursion through saved values. */
    uint64_t errs = dg_error_count();
    dg_tensor *alias = dg_tensor_view(t, t->ndim, t->shape, t->stride, t->offset);
    if (!alias) {
        if (!dg_error_since(errs)) DG_ERR(DG_ENOMEM, "node_save(%s): out of memory", node->name);
        return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    dg_keep(alias);
    node->saved[node->n_saved++] = alias;
    return 0;
}
const dg_tensor *dg_node_saved(const dg_node *n, int i) { return i < n->n_saved ? n->saved[i] : NULL; }
void *dg_node_attr(dg_node *n) { return n->attr.bytes; }
bool dg_node_needs_grad(const dg_node *n, int i) { return i < n->n_in && (n->in[i].node || n->in[i].leaf); }
dg_shape dg_node_input_shape(const dg_node *n, int i) { return n->in[i].shape; }
dg_dtype dg_node_input_dtype(const dg_node *n, int i) { return n->in[i].dtype; }
const char *dg_node_name(const dg_node *n) { return n->name; }

static void release_saved(dg_node *n) {
    for (int i = 0; i < n->n_saved; i++) dg_tensor_release(n->saved[i]);
    n->n_saved = 0;
}

/* Iterative so that a long chain of ops (an unrolled loop) cannot overflow the C stack. */
void dg_node_release(dg_node *n) {
    dg_node *stack_buf[64], **stack = stack_buf;
    int64_t sp = 0, cap = 64;
    stack[sp++] = n;
    while (sp > 0) {
        dg_node *x = stack[--sp];
        if (__atomic_sub_fetch(&x->refcount, 1, __ATOMIC_ACQ_REL) != 0) continue;
        release_saved(x);
        dg_tensor_release(x->grad_acc);
        free(x->anomaly_where);
        for (int i = 0; i < x->n_in; i++) {
            dg_tensor_release(x->in[i].leaf);
            if (!x->in[i].node) continue;
            if (sp == cap) {
                dg_node **bigger = malloc(sizeof *bigger * (size_t)cap * 2);
                if (!bigger) continue; /* leak rather than crash when memory is gone */
                memcpy(bigger, stack, sizeof *bigger * (size_t)sp);
                if (stack != stack_buf) free(stack);
                stack = bigger;
                cap *= 2;
            }
            stack[sp++] = x->in[i].node;
        }
        dg_block_free(x);
    }
    if (stack != stack_buf) free(stack);
}
