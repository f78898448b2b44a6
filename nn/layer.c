/* nn/layer.c — the layer base (paddle.nn.Layer / torch.nn.Module): a refcounted node with a
 * forward function, named parameters, buffers and sublayers, train/eval mode, hierarchical
 * names, iteration in torch's order, moving to a device, and the forward wrapper that scopes
 * temporaries (printing: nn/layer_print.c).
 * Built-in layers are written on this public API exactly like a user's custom layer. */
#include "nn_internal.h"
#include <dygraph/nn.h>
#include <stdarg.h>

typedef struct { char *name; dg_tensor *t; } tensor_entry;
typedef struct { char *name; dg_layer *l; } layer_entry;

struct dg_layer {
    int refcount;
    const dg_layer_class *cls;    /* borrowed: static in whoever defined the layer kind */
    dg_layer_forward_fn forward;
    dg_loss_forward_fn loss_forward;
    dg_layer_forward_multi_fn forward_multi;
    int n_inputs;                 /* of forward_multi */
    void *user;
    void (*free_user)(void *);
    bool training;
    tensor_entry *params, *buffers;
    int n_params, n_buffers, cap_params, cap_buffers;
    layer_entry *children;
    int n_children, cap_children;
    dg_layer *parent;   /* the first layer this one was added to; cleared when it dies */
    char *name;         /* this layer's name under parent */
    char *extra_repr;
    bool recompute;     /* forward through dg_recompute (dg_layer_set_recompute) */
};

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- errors ---- */

const char *dg_layer_full_name(const dg_layer *l, char *buf, size_t len) {
    if (!buf || !len) return buf;
    buf[0] = 0;
    if (!l) return buf;
    const dg_layer *chain[64];
    int n = 0;
    for (const dg_layer *p = l; p && p->parent && n < 64; p = p->parent) chain[n++] = p;
    size_t at = 0;
    for (int i = n - 1; i >= 0 && at < len; i--) {
        int w = snprintf(buf + at, len - at, "%s%s", at ? "." : "", chain[i]->name ? chain[i]->name : "?");
        if (w < 0) break;
        at += (size_t)w;
    }
    return buf;
}

/* "<Type> '<path>' (<extra>)" — what messages call the layer. */
static void describe(const dg_layer *l, char *buf, size_t len) {
    char path[256];
    dg_layer_full_name(l, path, sizeof path);
    snprintf(buf, len, "%s%s%s%s%s%s%s", l->cls->name, path[0] ? " '" : "", path, path[0] ? "'" : "",
             l->extra_repr && l->extra_repr[0] ? " (" : "", l->extra_repr ? l->extra_repr : "",
             l->extra_repr && l->extra_repr[0] ? ")" : "");
}

static void describe_for_ops(const void *l, char *buf, size_t len) { describe(l, buf, len); }

static void layer_error_v(const dg_layer *l, int status, const char *file, int line, const char *fmt, va_list ap) {
    char who[512], msg[768];
    if (l) describe(l, who, sizeof who);
    else snprintf(who, sizeof who, "layer (NULL)");
    vsnprintf(msg, sizeof msg, fmt, ap);
    dg_set_error_at(status, file ? file : "?", line, "%s: %s", who, msg);
}

dg_tensor *dg_layer_error_at(const dg_layer *l, int status, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    layer_error_v(l, status, file, line, fmt, ap);
    va_end(ap);
    return NULL;
}
#define LERR(l, st, ...) dg_layer_error_at((l), (st), __FILE__, __LINE__, __VA_ARGS__)

/* A NULL input handed to a layer: the failed call that produced it has said why (see
 * DG_PROPAGATE); say it here only when nothing is recorded. */
static dg_tensor *layer_propagate_at(const dg_layer *l, const char *file, int line, const char *fmt, ...) {
    if (dg_has_error()) return NULL;
    va_list ap;
    va_start(ap, fmt);
    layer_error_v(l, DG_EINVAL, file, line, fmt, ap);
    va_end(ap);
    return NULL;
}
#define LPROP(l, ...) layer_propagate_at((l), __FILE__, __LINE__, __VA_ARGS__)

/* ---- lifetime ---- */

/* True when cls carries DG_LAYER_CLASS's tag. Compared a byte at a time and stopped at the first
 * difference: a type name passed in the class's place (the signature before layer classes took
 * the string) differs at its first byte or, at the latest, at its terminating 0, so the check
 * never reads past the end of a string. */
static bool has_class_tag(const dg_layer_class *cls) {
    static const char tag[] = DG_LAYER_CLASS_TAG;
    const char *p = (const char *)cls;
    for (size_t i = 0; i < sizeof tag; i++)
        if (p[i] != tag[i]) return false;
    return true;
}

static dg_layer *layer_new(const dg_layer_class *cls, void *user, void (*free_user)(void *)) {
    const char *why = !cls ? "class is NULL"
                    : !has_class_tag(cls) ? "the class argument is not a dg_layer_class (no DG_LAYER_CLASS tag: a type "
                                            "name string or uninitialised memory?); define one with "
                                            "`static const dg_layer_class c = DG_LAYER_CLASS(\"Name\");` and pass &c"
                    : (!cls->name || !cls->name[0]) ? "the class's name is NULL or empty" : NULL;
    if (why) {
        if (free_user) free_user(user);
        DG_ERR(DG_EINVAL, "layer_new: %s (a layer needs a dg_layer_class with its type name)", why);
        return NULL;
    }
    dg_layer *l = calloc(1, sizeof *l);
    if (!l) {
        if (free_user) free_user(user);
        DG_ERR(DG_ENOMEM, "layer_new: out of memory making a %s", cls->name);
        return NULL;
    }
    l->cls = cls;
    l->refcount = 1;
    l->user = user;
    l->free_user = free_user;
    l->training = true;
    return l;
}

dg_layer *dg_layer_new(const dg_layer_class *cls, dg_layer_forward_fn fn, void *user, void (*free_user)(void *)) {
    dg_layer *l = layer_new(cls, user, free_user);
    if (l) l->forward = fn;
    return l;
}

dg_layer *dg_loss_layer_new(const dg_layer_class *cls, dg_loss_forward_fn fn, void *user, void (*free_user)(void *)) {
    dg_layer *l = layer_new(cls, user, free_user);
    if (l) l->loss_forward = fn;
    return l;
}

#define DG_MAX_LAYER_INPUTS 64

dg_layer *dg_layer_new_multi(const dg_layer_class *cls, dg_layer_forward_multi_fn fn, int n_inputs, void *user,
                             void (*free_user)(void *)) {
    dg_layer *l = layer_new(cls, user, free_user);
    if (!l) return NULL;
    if (!fn || n_inputs < 1 || n_inputs > DG_MAX_LAYER_INPUTS) {
        if (!fn) LERR(l, DG_EINVAL, "layer_new_multi: the forward function is NULL");
        else LERR(l, DG_EINVAL, "layer_new_multi: n_inputs must be in [1, %d], got %d", DG_MAX_LAYER_INPUTS, n_inputs);
        dg_layer_free(l);   /* frees the user state, as documented */
        return NULL;
    }
    l->forward_multi = fn;
    l->n_inputs = n_inputs;
    return l;
}

int dg_layer_num_inputs(const dg_layer *l) {
    if (!l) return 0;
    return l->forward_multi ? l->n_inputs : l->forward ? 1 : l->loss_forward ? 2 : 0;
}

dg_layer *dg_layer_ref(dg_layer *l) {
    if (l) l->refcount++;
    return l;
}

void dg_layer_free(dg_layer *l) {
    if (!l || --l->refcount > 0) return;
    for (int i = 0; i < l->n_params; i++) { dg_tensor_free(l->params[i].t); free(l->params[i].name); }
    for (int i = 0; i < l->n_buffers; i++) { dg_tensor_free(l->buffers[i].t); free(l->buffers[i].name); }
    for (int i = 0; i < l->n_children; i++) {
        dg_layer *c = l->children[i].l;
        if (c->parent == l) c->parent = NULL;   /* a shared child outlives its first parent */
        dg_layer_free(c);
        free(l->children[i].name);
    }
    if (l->free_user) l->free_user(l->user);
    free(l->params);
    free(l->buffers);
    free(l->children);
    free(l->name);
    free(l->extra_repr);
    free(l);
}

/* ---- registration ---- */

static bool name_taken(const dg_layer *l, const char *name) {
    for (int i = 0; i < l->n_params; i++) if (!strcmp(l->params[i].name, name)) return true;
    for (int i = 0; i < l->n_buffers; i++) if (!strcmp(l->buffers[i].name, name)) return true;
    for (int i = 0; i < l->n_children; i++) if (!strcmp(l->children[i].name, name)) return true;
    return false;
}

static int check_name(const dg_layer *l, const char *name, const char *what) {
    if (!name || !name[0]) { LERR(l, DG_EINVAL, "%s name is NULL or empty", what); return DG_EINVAL; }
    if (strchr(name, '.')) { LERR(l, DG_EINVAL, "%s name '%s' contains '.'", what, name); return DG_EINVAL; }
    if (strlen(name) > 200) { LERR(l, DG_EINVAL, "%s name '%.40s...' is longer than 200 bytes", what, name); return DG_EINVAL; }
    if (name_taken(l, name)) { LERR(l, DG_EINVAL, "%s name '%s' is already used by this layer", what, name); return DG_EINVAL; }
    return 0;
}

static int grow(void **arr, int *cap, int n, size_t elem) {
    if (n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 4;
    void *p = realloc(*arr, elem * (size_t)nc);
    if (!p) return DG_ENOMEM;
    *arr = p;
    *cap = nc;
    return 0;
}

static int add_tensor(dg_layer *l, const char *name, dg_tensor *t, bool param) {
    const char *what = param ? "parameter" : "buffer";
    if (!l) {
        if (t) {   /* free t when it is live; the NULL layer's failure is what this call reports */
            dg_error_saved sv;
            dg_error_save(&sv);
            if (dg_tensor_check("layer_add_parameter", "t", t) == 0) dg_tensor_free(t);
            dg_error_restore(&sv);
        }
        DG_PROPAGATE(DG_EINVAL, "layer_add_%s: layer is NULL (adding '%s')", what, name ? name : "(null)");
        return DG_EINVAL;
    }
    if (!t) { LPROP(l, "%s '%s' is NULL", what, name ? name : "(null)"); return DG_EINVAL; }
    int bad = dg_tensor_check(param ? "layer_add_parameter" : "layer_add_buffer", name ? name : "t", t);
    if (bad) return bad;
    int rc = check_name(l, name, what);
    char sh[96];
    if (!rc && !dg_is_leaf(t)) {
        LERR(l, DG_EINVAL, "%s '%s' %s was made by op '%s'; a %s must be a leaf (pass dg_detach(t) or a fresh tensor)",
             what, name, dg_shape_str(t, sh, sizeof sh), dg_grad_fn_name(t), what);
        rc = DG_EINVAL;
    }
    if (!rc && param && !dg_dtype_is_float(dg_dtype_of(t))) {
        LERR(l, DG_EINVAL, "parameter '%s' %s is %s; parameters must be float", name, dg_shape_str(t, sh, sizeof sh),
             dg_dtype_name(dg_dtype_of(t)));
        rc = DG_EINVAL;
    }
    char *nm = NULL;
    if (!rc) {
        rc = param ? grow((void **)&l->params, &l->cap_params, l->n_params, sizeof(tensor_entry))
                   : grow((void **)&l->buffers, &l->cap_buffers, l->n_buffers, sizeof(tensor_entry));
        if (!rc && !(nm = dup_str(name))) rc = DG_ENOMEM;
        if (rc) LERR(l, DG_ENOMEM, "out of memory adding %s '%s'", what, name);
    }
    if (rc) { dg_tensor_free(t); return rc; }
    dg_keep(t);
    dg_set_requires_grad(t, param);   /* a leaf (checked above): cannot fail */
    if (param) l->params[l->n_params++] = (tensor_entry){ nm, t };
    else l->buffers[l->n_buffers++] = (tensor_entry){ nm, t };
    return 0;
}

int dg_layer_add_parameter(dg_layer *l, const char *name, dg_tensor *t) { return add_tensor(l, name, t, true); }
int dg_layer_add_buffer(dg_layer *l, const char *name, dg_tensor *t) { return add_tensor(l, name, t, false); }

static bool contains(const dg_layer *root, const dg_layer *l) {
    if (root == l) return true;
    for (int i = 0; i < root->n_children; i++) if (contains(root->children[i].l, l)) return true;
    return false;
}

int dg_layer_add_sublayer(dg_layer *l, const char *name, dg_layer *sub) {
    if (!l) {
        dg_layer_free(sub);
        DG_PROPAGATE(DG_EINVAL, "layer_add_sublayer: layer is NULL (adding '%s')", name ? name : "(null)");
        return DG_EINVAL;
    }
    if (!sub) { LPROP(l, "sublayer '%s' is NULL", name ? name : "(null)"); return DG_EINVAL; }
    int rc = check_name(l, name, "sublayer");
    if (!rc && contains(sub, l)) {
        LERR(l, DG_EINVAL, "sublayer '%s' (%s) contains this layer: a layer tree cannot have cycles", name, sub->cls->name);
        rc = DG_EINVAL;
    }
    char *nm = NULL;
    if (!rc) {
        rc = grow((void **)&l->children, &l->cap_children, l->n_children, sizeof(layer_entry));
        if (!rc && !(nm = dup_str(name))) rc = DG_ENOMEM;
        if (!rc && !sub->parent) {   /* first (or again first, after its parent died) parent: its path name */
            char *own = dup_str(name);
            if (!own) { free(nm); rc = DG_ENOMEM; }
            else { free(sub->name); sub->name = own; }
        }
        if (rc) LERR(l, DG_ENOMEM, "out of memory adding sublayer '%s'", name);
    }
    if (rc) { dg_layer_free(sub); return rc; }
    if (!sub->parent) sub->parent = l;
    l->children[l->n_children++] = (layer_entry){ nm, sub };
    return 0;
}

/* ---- lookup ---- */


static dg_layer *child_named(const dg_layer *l, const char *name, size_t len) {
    for (int i = 0; i < l->n_children; i++)
        if (strlen(l->children[i].name) == len && !strncmp(l->children[i].name, name, len)) return l->children[i].l;
    return NULL;
}

/* Walks the dotted prefix of `name`; returns the owner layer and sets *last to the final component. */
static const dg_layer *walk_path(const dg_layer *l, const char *name, const char **last) {
    if (!l || !name) return NULL;
    const char *p = name, *dot;
    while ((dot = strchr(p, '.'))) {
        l = child_named(l, p, (size_t)(dot - p));
        if (!l) return NULL;
        p = dot + 1;
    }
    *last = p;
    return l;
}

static dg_tensor *find_tensor(const tensor_entry *e, int n, const char *name) {
    for (int i = 0; i < n; i++) if (!strcmp(e[i].name, name)) return e[i].t;
    return NULL;
}

/* torch's `decoder.weight = encoder.weight`: the parameter at name becomes t (this call takes
 * over t's reference; pass dg_tensor_ref(w) to tie), the old one's reference is released. The
 * built-in layers read their parameters through the tree at every forward, so they follow. */
int dg_layer_set_parameter(dg_layer *l, const char *name, dg_tensor *t) {
    if (!l || !name || !t) {
        if (t) {   /* the reference given is released: free t when it is live */
            dg_error_saved sv;
            dg_error_save(&sv);
            if (dg_tensor_check("layer_set_parameter", "t", t) == 0) dg_tensor_free(t);
            dg_error_restore(&sv);
        }
        if (!l) DG_PROPAGATE(DG_EINVAL, "layer_set_parameter: layer is NULL (setting '%s')", name ? name : "(null)");
        else LPROP(l, "layer_set_parameter: %s is NULL", !name ? "name" : "the tensor");
        return DG_EINVAL;
    }
    int bad = dg_tensor_check("layer_set_parameter", name, t);
    if (bad) return bad;
    const char *last;
    dg_layer *o = (dg_layer *)walk_path(l, name, &last);
    tensor_entry *e = NULL;
    for (int i = 0; o && i < o->n_params; i++) if (!strcmp(o->params[i].name, last)) e = &o->params[i];
    char was[96], got[96];
    int rc = 0;
    if (!e) {
        LERR(l, DG_EINVAL, "layer_set_parameter: no parameter '%s'", name);
        rc = DG_EINVAL;
    } else if (e->t == t) {
        dg_tensor_free(t);   /* already there: the extra reference goes */
        return 0;
    } else if (!dg_is_leaf(t) || dg_dtype_of(t) != dg_dtype_of(e->t) || dg_ndim(t) != dg_ndim(e->t) ||
               strcmp(dg_shape_str(t, got, sizeof got), dg_shape_str(e->t, was, sizeof was)) != 0) {
        LERR(l, DG_EINVAL, "layer_set_parameter: '%s' is %s %s; the new tensor must be a leaf of the same dtype and shape, got %s %s%s",
             name, dg_dtype_name(dg_dtype_of(e->t)), was, dg_dtype_name(dg_dtype_of(t)), got, dg_is_leaf(t) ? "" : " (made by an op)");
        rc = DG_EINVAL;
    }
    if (rc) { dg_tensor_free(t); return rc; }
    dg_keep(t);
    dg_set_requires_grad(t, true);
    dg_tensor_free(e->t);
    e->t = t;
    return 0;
}

/* The old child's reference is released here, so whatever still needs it must hold one of its
 * own; a parent that kept a pointer to it in its user state would keep running the old layer
 * (or a freed one), which is why built-in layers reach their children through the tree. */
int dg_layer_replace_sublayer(dg_layer *l, const char *name, dg_layer *sub) {
    if (!l) {
        dg_layer_free(sub);
        DG_PROPAGATE(DG_EINVAL, "layer_replace_sublayer: layer is NULL (replacing '%s')", name ? name : "(null)");
        return DG_EINVAL;
    }
    if (!sub) { LPROP(l, "replacement for sublayer '%s' is NULL", name ? name : "(null)"); return DG_EINVAL; }
    int rc = 0;
    const char *last = NULL;
    dg_layer *owner = name ? (dg_layer *)walk_path(l, name, &last) : NULL;
    int at = -1;
    for (int i = 0; owner && i < owner->n_children; i++)
        if (!strcmp(owner->children[i].name, last)) { at = i; break; }
    if (at < 0) {
        LERR(l, DG_EINVAL, "replace_sublayer: no sublayer named '%s'", name ? name : "(null)");
        rc = DG_EINVAL;
    } else if (owner->children[at].l == sub) {   /* already there: drop the reference handed over */
        dg_layer_free(sub);
        return 0;
    } else if (contains(sub, owner)) {
        LERR(l, DG_EINVAL, "replace_sublayer: the replacement for '%s' (%s) contains its parent: a layer tree cannot have cycles",
             name, sub->cls->name);
        rc = DG_EINVAL;
    }
    if (!rc && !sub->parent) {
        char *own = dup_str(last);
        if (!own) { LERR(l, DG_ENOMEM, "out of memory replacing sublayer '%s'", name); rc = DG_ENOMEM; }
        else { free(sub->name); sub->name = own; }
    }
    if (rc) { dg_layer_free(sub); return rc; }
    dg_layer *old = owner->children[at].l;
    if (!sub->parent) sub->parent = owner;
    owner->children[at].l = sub;
    if (old->parent == owner) old->parent = NULL;   /* as dg_layer_free does for a child that outlives it */
    dg_layer_free(old);
    return 0;
}

dg_tensor *dg_layer_parameter(const dg_layer *l, const char *name) {
    const char *last;
    const dg_layer *o = walk_path(l, name, &last);
    return o ? find_tensor(o->params, o->n_params, last) : NULL;
}
dg_tensor *dg_layer_buffer(const dg_layer *l, const char *name) {
    const char *last;
    const dg_layer *o = walk_path(l, name, &last);
    return o ? find_tensor(o->buffers, o->n_buffers, last) : NULL;
}
dg_layer *dg_layer_sublayer(const dg_layer *l, const char *name) {
    const char *last;
    const dg_layer *o = walk_path(l, name, &last);
    return o ? child_named(o, last, strlen(last)) : NULL;
}

int dg_layer_num_children(const dg_layer *l) { return l ? l->n_children : 0; }
dg_layer *dg_layer_child(const dg_layer *l, int i) { return l && i >= 0 && i < l->n_children ? l->children[i].l : NULL; }
const char *dg_layer_child_name(const dg_layer *l, int i) {
    return l && i >= 0 && i < l->n_children ? l->children[i].name : NULL;
}
const dg_layer_class *dg_layer_class_of(const dg_layer *l) { return l ? l->cls : NULL; }
bool dg_layer_is(const dg_layer *l, const dg_layer_class *cls) { return l && cls && l->cls == cls; }
const char *dg_layer_type(const dg_layer *l) { return l ? l->cls->name : NULL; }
void *dg_layer_user(const dg_layer *l) { return l ? l->user : NULL; }

int dg_layer_set_extra_repr(dg_layer *l, const char *fmt, ...) {
    DG_CHECK_HANDLE_INT(l, "layer_set_extra_repr: layer is NULL");
    DG_CHECK_INT(fmt, "layer_set_extra_repr: fmt is NULL");
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = dup_str(buf);
    if (!s) { DG_ERR(DG_ENOMEM, "layer_set_extra_repr: out of memory"); return DG_ENOMEM; }
    free(l->extra_repr);
    l->extra_repr = s;
    return 0;
}

/* ---- forward ---- */

/* Runs fn inside a scope of its own: the result goes to the caller's scope, every other tensor
 * made during the call dies here. A forward that returns a tensor it did not make in this call
 * (its input, a parameter) gets a fresh view of it instead, so the caller never owns an alias. */
#define RUN_SCOPED(l, call)                                                                     \
    uint64_t errs_ = dg_error_count();                                                         \
    dg_scope *s_ = dg_scope_begin();                                                           \
    if (!s_) return NULL;                                                                      \
    dg_op_context_push(describe_for_ops, (l));   /* an op's error and anomaly mode name the layer */ \
    dg_tensor *y_ = (call);                                                                    \
    dg_op_context_pop();                                                                       \
    bool mine_ = dg_scope_owns(s_, y_);                                                        \
    if (mine_) dg_keep_in_parent(y_);                                                          \
    dg_scope_end(s_);                                                                          \
    if (!y_) return dg_error_since(errs_) ? NULL : LERR(l, DG_EINVAL, "forward returned NULL without an error message"); \
    return mine_ ? y_ : dg_reshape(y_, dg_shape_of(y_))

static dg_tensor *forward_checked(dg_layer *l, const dg_tensor *x);
static dg_tensor *forward_recomputed(void *l, const dg_tensor *x) { return forward_checked(l, x); }

dg_tensor *dg_forward(dg_layer *l, const dg_tensor *x) {
    DG_CHECK_HANDLE(l, "forward: layer is NULL");
    if (!x) return LPROP(l, "forward: input is NULL");
    if (dg_tensor_check("forward", "x", x) != 0) return NULL;
    if (l->recompute && (l->forward || l->forward_multi)) return dg_recompute("recompute", forward_recomputed, l, x);
    return forward_checked(l, x);
}

int dg_layer_set_recompute(dg_layer *l, bool on) {
    DG_CHECK_HANDLE_INT(l, "layer_set_recompute: layer is NULL");
    if (on && !l->forward && !(l->forward_multi && l->n_inputs == 1)) {
        LERR(l, DG_EINVAL, "layer_set_recompute: only a layer whose forward takes one tensor can be recomputed");
        return DG_EINVAL;
    }
    l->recompute = on;
    return 0;
}
bool dg_layer_recompute(const dg_layer *l) { return l && l->recompute; }

static dg_tensor *forward_checked(dg_layer *l, const dg_tensor *x) {
    if (l->forward_multi) {
        if (l->n_inputs != 1) return LERR(l, DG_EINVAL, "takes %d inputs, got 1: call dg_forward_multi", l->n_inputs);
        RUN_SCOPED(l, l->forward_multi(l, &x, 1));
    }
    if (!l->forward)
        return LERR(l, DG_EINVAL, l->loss_forward ? "a loss layer takes (input, label): call dg_loss_forward"
                                                  : "has no forward function (a container layer)");
    RUN_SCOPED(l, l->forward(l, x));
}

dg_tensor *dg_forward_multi(dg_layer *l, const dg_tensor *const *in, int n) {
    DG_CHECK_HANDLE(l, "forward_multi: layer is NULL");
    int want = dg_layer_num_inputs(l);
    if (!want) return LERR(l, DG_EINVAL, "forward_multi: has no forward function (a container layer)");
    if (n != want || (n > 0 && !in))
        return LERR(l, DG_EINVAL, "forward_multi: takes %d input%s, got %d%s", want, want == 1 ? "" : "s", n,
                    n == want ? " in a NULL array" : "");
    for (int i = 0; i < n; i++) {
        if (!in[i]) return LPROP(l, "forward_multi: input %d is NULL", i);
        char what[32];
        snprintf(what, sizeof what, "input %d", i);
        if (dg_tensor_check("forward_multi", what, in[i]) != 0) return NULL;
    }
    if (l->forward || (l->recompute && n == 1)) return dg_forward(l, in[0]);   /* dg_forward recomputes */
    if (l->loss_forward) return dg_loss_forward(l, in[0], in[1]);
    RUN_SCOPED(l, l->forward_multi(l, in, n));
}

int dg_layer_run(dg_layer *l, int (*fn)(dg_layer *self, void *ctx, dg_tensor **outs), void *ctx, dg_tensor **outs, int n) {
    DG_CHECK_HANDLE_INT(l, "layer_run: layer is NULL");
    if (!fn || !outs || n < 1) { LERR(l, DG_EINVAL, "layer_run: needs a function and at least one output slot"); return DG_EINVAL; }
    for (int i = 0; i < n; i++) outs[i] = NULL;
    uint64_t errs = dg_error_count();
    dg_scope *s = dg_scope_begin();
    if (!s) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    dg_op_context_push(describe_for_ops, l);
    int rc = fn(l, ctx, outs);
    dg_op_context_pop();
    for (int i = 0; i < n && !rc; i++)   /* a result fn passed through from outside stays where it is */
        if (outs[i] && dg_scope_owns(s, outs[i])) dg_keep_in_parent(outs[i]);
    dg_scope_end(s);
    if (rc) {
        for (int i = 0; i < n; i++) outs[i] = NULL;
        if (!dg_error_since(errs)) LERR(l, rc, "forward failed without an error message");
    }
    return rc;
}

dg_tensor *dg_loss_forward(dg_layer *l, const dg_tensor *input, const dg_tensor *label) {
    DG_CHECK_HANDLE(l, "loss_forward: layer is NULL");
    if (!input) return LPROP(l, "loss_forward: input is NULL");
    if (!label) return LPROP(l, "loss_forward: label is NULL");
    DG_CHECK_TENSOR("loss_forward", input);
    DG_CHECK_TENSOR("loss_forward", label);
    if (!l->loss_forward)
        return l->forward_multi ? LERR(l, DG_EINVAL, "is not a loss layer: it takes %d inputs, call dg_forward_multi", l->n_inputs)
                                : LERR(l, DG_EINVAL, "is not a loss layer: call dg_forward(layer, x)");
    RUN_SCOPED(l, l->loss_forward(l, input, label));
}

/* ---- device ---- */

static dg_named_tensor *named(const dg_layer *l, int *n, bool params, bool buffers, bool dedup, const char *op);

typedef struct { dg_tensor *t, *copy; } move_entry;

static bool on_device(const dg_tensor *t, dg_device d) {
    dg_device td = dg_device_of(t);
    return td.type == d.type && td.index == d.index;
}

/* Phase 1 for one tensor: a copy on the device (caller-owned), or nothing when it is there. */
static int plan_move(const dg_layer *l, dg_tensor *t, dg_device d, const char *what, const char *name, move_entry *m,
                     int *n) {
    if (!t || on_device(t, d)) return 0;
    dg_no_grad_begin();   /* a copy of the value, not an op on the tape */
    dg_tensor *c = dg_to_device(t, d);
    dg_no_grad_end();
    if (!c) {   /* the copy said why (no device, module missing): that, under the layer's name and at its place */
        char msg[DG_ERROR_MSG_LEN], dn[32];
        snprintf(msg, sizeof msg, "%s", dg_last_error());
        const char *file = __FILE__;
        int line = __LINE__;
        dg_error_split_location(msg, &file, &line);
        dg_layer_error_at(l, dg_last_status() ? dg_last_status() : DG_EDEVICE, file, line, "layer_to(%s): moving %s '%s': %s",
                          dg_device_name(d, dn, sizeof dn), what, name, msg);
        return dg_last_status();
    }
    m[(*n)++] = (move_entry){ t, dg_keep(c) };
    return 0;
}

int dg_layer_to(dg_layer *l, dg_device d) {
    DG_CHECK_HANDLE_INT(l, "layer_to: layer is NULL");
    if ((d.type != DG_CPU && d.type != DG_CUDA) || d.index < 0 || (d.type == DG_CPU && d.index != 0)) {
        LERR(l, DG_EINVAL, "layer_to: no device of type %d index %d (dg_cpu(), or CUDA index >= 0)", (int)d.type, d.index);
        return DG_EINVAL;
    }
    int np = 0, nb = 0;
    dg_named_tensor *ps = named(l, &np, true, false, true, "layer_to");
    dg_named_tensor *bs = ps ? named(l, &nb, false, true, true, "layer_to") : NULL;
    move_entry *m = bs ? malloc(sizeof *m * (size_t)(2 * np + nb + 1)) : NULL;
    if (!m) {
        free(ps);
        free(bs);
        if (bs) LERR(l, DG_ENOMEM, "layer_to: out of memory");
        return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    int n = 0, rc = 0;
    for (int i = 0; i < np && !rc; i++) {
        rc = plan_move(l, ps[i].tensor, d, "parameter", ps[i].name, m, &n);
        if (!rc) rc = plan_move(l, dg_grad(ps[i].tensor), d, "the gradient of", ps[i].name, m, &n);
    }
    for (int i = 0; i < nb && !rc; i++) rc = plan_move(l, bs[i].tensor, d, "buffer", bs[i].name, m, &n);
    /* Phase 2, only when every copy exists: each tensor takes its copy's storage (contiguous
     * strides) and the copy handle leaves with the old storage. */
    for (int i = 0; i < n; i++) {
        if (!rc) rc = dg_tensor_swap_data(m[i].t, m[i].copy);   /* same shape and dtype: cannot fail */
        dg_tensor_free(m[i].copy);
    }
    free(m);
    free(ps);
    free(bs);
    return rc;
}

/* ---- mode ---- */

static void set_mode(dg_layer *l, bool training) {
    l->training = training;
    for (int i = 0; i < l->n_children; i++) set_mode(l->children[i].l, training);
}
int dg_layer_train(dg_layer *l) {
    DG_CHECK_HANDLE_INT(l, "layer_train: layer is NULL");
    set_mode(l, true);
    return 0;
}
int dg_layer_eval(dg_layer *l) {
    DG_CHECK_HANDLE_INT(l, "layer_eval: layer is NULL");
    set_mode(l, false);
    return 0;
}
bool dg_layer_is_training(const dg_layer *l) { return l && l->training; }

/* ---- iteration ---- */

typedef struct {
    dg_named_tensor *items;   /* names malloc'd while collecting */
    int n, cap;
    size_t name_bytes;
    bool dedup, failed;
} collector;

static void collect_one(collector *c, const char *prefix, const char *name, dg_tensor *t) {
    if (c->failed) return;
    if (c->dedup)
        for (int i = 0; i < c->n; i++) if (c->items[i].tensor == t) return;
    if (grow((void **)&c->items, &c->cap, c->n, sizeof *c->items)) { c->failed = true; return; }
    size_t lp = strlen(prefix), ln = strlen(name);
    char *full = malloc(lp + ln + 1);
    if (!full) { c->failed = true; return; }
    memcpy(full, prefix, lp);
    memcpy(full + lp, name, ln + 1);
    c->items[c->n++] = (dg_named_tensor){ full, t };
    c->name_bytes += lp + ln + 1;
}

static void collect(const dg_layer *l, const char *prefix, bool params, bool buffers, collector *c) {
    if (params) for (int i = 0; i < l->n_params; i++) collect_one(c, prefix, l->params[i].name, l->params[i].t);
    if (buffers) for (int i = 0; i < l->n_buffers; i++) collect_one(c, prefix, l->buffers[i].name, l->buffers[i].t);
    for (int i = 0; i < l->n_children && !c->failed; i++) {
        size_t lp = strlen(prefix), ln = strlen(l->children[i].name);
        char *sub = malloc(lp + ln + 2);
        if (!sub) { c->failed = true; return; }
        memcpy(sub, prefix, lp);
        memcpy(sub + lp, l->children[i].name, ln);
        sub[lp + ln] = '.';
        sub[lp + ln + 1] = 0;
        collect(l->children[i].l, sub, params, buffers, c);
        free(sub);
    }
}

/* One block: n+1 entries (the last {NULL, NULL}) followed by the names. */
static dg_named_tensor *named(const dg_layer *l, int *n, bool params, bool buffers, bool dedup, const char *op) {
    if (n) *n = 0;
    DG_CHECK_HANDLE(l, "%s: layer is NULL", op);
    collector c = { .dedup = dedup };
    collect(l, "", params, buffers, &c);
    dg_named_tensor *out = NULL;
    if (!c.failed) out = malloc(sizeof *out * (size_t)(c.n + 1) + c.name_bytes);
    if (out) {
        char *names = (char *)(out + c.n + 1);
        for (int i = 0; i < c.n; i++) {
            size_t len = strlen(c.items[i].name) + 1;
            memcpy(names, c.items[i].name, len);
            out[i] = (dg_named_tensor){ names, c.items[i].tensor };
            names += len;
        }
        out[c.n] = (dg_named_tensor){ NULL, NULL };
        if (n) *n = c.n;
    } else {
        LERR(l, DG_ENOMEM, "%s: out of memory", op);
    }
    for (int i = 0; i < c.n; i++) free((char *)c.items[i].name);
    free(c.items);
    return out;
}

dg_named_tensor *dg_layer_named_parameters(const dg_layer *l, int *n) { return named(l, n, true, false, true, "named_parameters"); }
dg_named_tensor *dg_layer_named_buffers(const dg_layer *l, int *n) { return named(l, n, false, true, true, "named_buffers"); }
dg_named_tensor *dg_layer_state_dict(const dg_layer *l, int *n) { return named(l, n, true, true, false, "state_dict"); }

dg_tensor **dg_layer_parameters(const dg_layer *l, int *n) {
    int m = 0;
    dg_named_tensor *np = named(l, &m, true, false, true, "parameters");
    if (n) *n = 0;
    if (!np) return NULL;
    dg_tensor **out = malloc(sizeof *out * (size_t)(m + 1));
    if (!out) { free(np); LERR(l, DG_ENOMEM, "parameters: out of memory"); return NULL; }
    for (int i = 0; i < m; i++) out[i] = np[i].tensor;
    out[m] = NULL;
    free(np);
    if (n) *n = m;
    return out;
}

int64_t dg_layer_num_parameters(const dg_layer *l) {
    int n;
    dg_tensor **p = dg_layer_parameters(l, &n);
    if (!p) return -1;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += dg_numel(p[i]);
    free(p);
    return total;
}

static void clear_grads(dg_layer *l) {
    for (int i = 0; i < l->n_params; i++) dg_clear_grad(l->params[i].t);
    for (int i = 0; i < l->n_children; i++) clear_grads(l->children[i].l);
}
int dg_layer_clear_gradients(dg_layer *l) {
    DG_CHECK_HANDLE_INT(l, "layer_clear_gradients: layer is NULL");
    clear_grads(l);
    return 0;
}

int dg_layer_apply(dg_layer *l, int (*fn)(dg_layer *, void *), void *user) {
    DG_CHECK_HANDLE_INT(l, "layer_apply: layer is NULL");
    DG_CHECK_INT(fn, "layer_apply: fn is NULL");
    for (int i = 0; i < l->n_children; i++) {
        int rc = dg_layer_apply(l->children[i].l, fn, user);
        if (rc) return rc;
    }
    return fn(l, user);
}

const char *dg_nn_layer_extra_repr(const dg_layer *l) { return l && l->extra_repr ? l->extra_repr : ""; }
