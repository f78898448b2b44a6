/* nn/embedding.c — Embedding (torch.nn.Embedding / paddle.nn.Embedding): a table of
 * num_embeddings rows looked up by integer ids. Parameter "weight" [num_embeddings,
 * embedding_dim], init N(0, 1) with the padding row zeroed, as torch. */
#include "nn_internal.h"
#include <math.h>

typedef struct { int64_t num, dim; dg_embedding_params op; dg_tensor *weight; } embedding_state;

static const dg_layer_class embedding_class = DG_LAYER_CLASS("Embedding");
const dg_layer_class *dg_nn_embedding_class(void) { return &embedding_class; }

static dg_tensor *embedding_forward(dg_layer *self, const dg_tensor *ids) {
    embedding_state *s = dg_layer_user(self);
    char sh[96];
    if (dg_dtype_of(ids) != DG_I64 && dg_dtype_of(ids) != DG_I32)
        return DG_LAYER_ERROR(self, "ids %s are %s; expected int64 or int32", dg_shape_str(ids, sh, sizeof sh),
                              dg_dtype_name(dg_dtype_of(ids)));
    return dg_embedding(ids, dg_layer_parameter(self, "weight"), s->op);   /* through the tree: it may be tied */
}

dg_nn_embedding_params dg_nn_embedding_default_params(void) {
    return (dg_nn_embedding_params){ .params_tag = DG_PARAMS_TAG, .padding_idx = DG_NO_PADDING_IDX, .max_norm = 0, .norm_type = 2.0, .sparse = false,
                                     .dtype = DG_F32 };
}

dg_layer *dg_nn_embedding(int64_t num, int64_t dim, dg_nn_embedding_params p) {
    DG_CHECK_PARAMS("nn_embedding", p, dg_nn_embedding_default_params);
    embedding_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "Embedding: out of memory"); return NULL; }
    dg_layer *l = dg_layer_new(&embedding_class, embedding_forward, s, free);
    if (!l) return NULL;
    bool has_pad = p.padding_idx != DG_NO_PADDING_IDX;
    int64_t pad = has_pad && p.padding_idx < 0 ? p.padding_idx + num : p.padding_idx;
    *s = (embedding_state){ .num = num, .dim = dim,
                            .op = { .padding_idx = p.padding_idx, .max_norm = p.max_norm, .norm_type = p.norm_type, .sparse = p.sparse,
                                    .params_tag = DG_PARAMS_TAG } };   /* every field set */
    char extra[160];
    int len = snprintf(extra, sizeof extra, "%lld, %lld", (long long)num, (long long)dim);
    if (has_pad) len += snprintf(extra + len, sizeof extra - (size_t)len, ", padding_idx=%lld", (long long)pad);
    if (p.max_norm > 0) len += snprintf(extra + len, sizeof extra - (size_t)len, ", max_norm=%g", p.max_norm);
    if (p.max_norm > 0 && p.norm_type != 2.0) len += snprintf(extra + len, sizeof extra - (size_t)len, ", norm_type=%g", p.norm_type);
    if (p.sparse) snprintf(extra + len, sizeof extra - (size_t)len, ", sparse=True");
    dg_layer_set_extra_repr(l, "%s", extra);
    if (num <= 0 || dim <= 0 || (has_pad && (pad < 0 || pad >= num)) || !(p.max_norm >= 0 && isfinite(p.max_norm)) ||
        !(p.norm_type > 0) || (p.dtype != DG_F32 && p.dtype != DG_F64)) {
        DG_LAYER_ERROR(l, "bad configuration: need num_embeddings > 0, embedding_dim > 0, padding_idx within the table, "
                          "max_norm >= 0, norm_type > 0 and dtype float32/float64 (got %lld, %lld, padding_idx %lld, "
                          "max_norm %g, norm_type %g, %s)", (long long)num, (long long)dim, (long long)p.padding_idx,
                       p.max_norm, p.norm_type, dg_dtype_name(p.dtype));
        dg_layer_free(l);
        return NULL;
    }
    int rc = dg_layer_add_parameter(l, "weight", s->weight = dg_empty(DG_SHAPE(num, dim), p.dtype));
    if (!rc) rc = dg_nn_init_normal_(s->weight, 0.0, 1.0);
    if (!rc && has_pad) {
        dg_no_grad_begin();
        rc = dg_fill_(dg_slice(s->weight, 0, pad, pad + 1, 1), 0.0);
        dg_no_grad_end();
    }
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}
