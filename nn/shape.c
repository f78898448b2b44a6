/* nn/shape.c — parameter-free shape layers: Flatten (torch.nn.Flatten, default axes 1..-1)
 * and Identity. */
#include "nn_internal.h"

typedef struct { int start, stop; } flatten_state;

static const dg_layer_class flatten_class = DG_LAYER_CLASS("Flatten");
const dg_layer_class *dg_nn_flatten_class(void) { return &flatten_class; }
static const dg_layer_class identity_class = DG_LAYER_CLASS("Identity");
const dg_layer_class *dg_nn_identity_class(void) { return &identity_class; }

static dg_tensor *flatten_fw(dg_layer *self, const dg_tensor *x) {
    flatten_state *s = dg_layer_user(self);
    int nd = dg_ndim(x), a = s->start < 0 ? s->start + nd : s->start, b = s->stop < 0 ? s->stop + nd : s->stop;
    char sh[96];
    if (nd > 0 && (a < 0 || b >= nd || a > b))
        return DG_LAYER_ERROR(self, "axes %d..%d do not fit input %s", s->start, s->stop, dg_shape_str(x, sh, sizeof sh));
    return dg_flatten(x, s->start, s->stop);
}

dg_layer *dg_nn_flatten(int start, int stop) {
    flatten_state *s = malloc(sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "Flatten: out of memory"); return NULL; }
    *s = (flatten_state){ start, stop };
    dg_layer *l = dg_layer_new(&flatten_class, flatten_fw, s, free);
    if (l) dg_layer_set_extra_repr(l, "start_dim=%d, end_dim=%d", start, stop);
    return l;
}

/* returning x itself is allowed: dg_forward hands the caller a fresh view of it */
static dg_tensor *identity_fw(dg_layer *self, const dg_tensor *x) { return (dg_tensor *)x; }
dg_layer *dg_nn_identity(void) { return dg_layer_new(&identity_class, identity_fw, NULL, NULL); }
