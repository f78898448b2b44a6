/* nn/sequential.c — Sequential: children named "0", "1", ... run in order (torch.nn.Sequential /
 * paddle.nn.Sequential). */
#include "nn_internal.h"
#include <stdarg.h>

static const dg_layer_class sequential_class = DG_LAYER_CLASS("Sequential");
const dg_layer_class *dg_nn_sequential_class(void) { return &sequential_class; }

static dg_tensor *seq_forward(dg_layer *self, const dg_tensor *x) {
    int n = dg_layer_num_children(self);
    const dg_tensor *y = x;
    for (int i = 0; i < n && y; i++) {
        dg_tensor *next = dg_forward(dg_layer_child(self, i), y);
        if (y != x) dg_tensor_free((dg_tensor *)y);   /* an intermediate: nobody else needs it now */
        y = next;
    }
    return (dg_tensor *)y;
}

int dg_nn_sequential_append(dg_layer *seq, dg_layer *layer) {
    if (seq && !dg_layer_is(seq, &sequential_class)) {
        DG_LAYER_ERROR(seq, "sequential_append: not a Sequential");
        dg_layer_free(layer);
        return DG_EINVAL;
    }
    int k = dg_layer_num_inputs(layer);
    if (seq && layer && k > 1) {   /* a chain hands each child one tensor (a container, 0, fails when run) */
        DG_LAYER_ERROR(seq, "sequential_append: layer %d (%s) takes %d inputs; a Sequential runs single-input layers "
                            "(run it with dg_forward_multi instead)", dg_layer_num_children(seq), dg_layer_type(layer), k);
        dg_layer_free(layer);
        return DG_EINVAL;
    }
    char name[16];
    snprintf(name, sizeof name, "%d", dg_layer_num_children(seq));
    return dg_layer_add_sublayer(seq, name, layer);
}

static dg_layer *seq_new(void) {
    return dg_layer_new(&sequential_class, seq_forward, NULL, NULL);
}

dg_layer *dg_nn_sequential_array(int n, dg_layer *const *layers) {
    bool bad = n < 0 || (n > 0 && !layers);
    for (int i = 0; i < n && !bad; i++) bad = !layers[i];
    dg_layer *seq = bad ? NULL : seq_new();
    if (!seq) {
        int missing = -1;
        for (int i = 0; layers && i < n; i++) {
            if (!layers[i] && missing < 0) missing = i;
            dg_layer_free(layers[i]);
        }
        /* a NULL layer is a constructor that failed and said why; a bad list is a new failure */
        if (missing >= 0) DG_PROPAGATE(DG_EINVAL, "Sequential: layer %d of %d is NULL", missing, n);
        else if (bad) DG_ERR(DG_EINVAL, "Sequential: %s", n < 0 ? "negative layer count" : "layer list is NULL");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (dg_nn_sequential_append(seq, layers[i])) {
            for (int j = i + 1; j < n; j++) dg_layer_free(layers[j]);
            dg_layer_free(seq);
            return NULL;
        }
    }
    return seq;
}

dg_layer *dg_nn_sequential(int n, ...) {
    if (n < 0 || n > 4096) {
        DG_ERR(DG_EINVAL, "Sequential: bad layer count %d", n);
        return NULL;
    }
    dg_layer **ls = malloc(sizeof *ls * (size_t)(n ? n : 1));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        dg_layer *l = va_arg(ap, dg_layer *);
        if (ls) ls[i] = l;
        else dg_layer_free(l);
    }
    va_end(ap);
    if (!ls) { DG_ERR(DG_ENOMEM, "Sequential: out of memory"); return NULL; }
    dg_layer *seq = dg_nn_sequential_array(n, ls);
    free(ls);
    return seq;
}
