/* eager/ops/embedding.c — torch.nn.functional.embedding: rows of a weight table picked by
 * integer ids. padding_idx (that row's gradient stays 0), max_norm (the rows looked up are first
 * renormalised in place, as torch does) and the sparse row gradient: with `sparse` the weight's
 * gradient is kept as its unique ids and their summed rows (what a parameter server pushes)
 * instead of a dense table-sized tensor; dg_grad folds it into the dense form on request. */
#include "op_util.h"
#include <math.h>
#include <stdlib.h>

typedef dg_emb_attr emb_attr;   /* eager/ops/op_attrs.h */

dg_embedding_params dg_embedding_default_params(void) {
    return (dg_embedding_params){ .params_tag = DG_PARAMS_TAG, .padding_idx = DG_NO_PADDING_IDX, .max_norm = 0, .norm_type = 2.0, .sparse = false };
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ids (any int dtype, any device) as int64 on the host: malloc'd, n = numel. */
static int64_t *host_ids(const dg_tensor *ids) {
    int64_t n = ids->numel;
    int64_t *h = malloc(sizeof *h * (size_t)(n ? n : 1));
    if (!h) { DG_ERR(DG_ENOMEM, "embedding: out of memory for %lld ids", (long long)n); return NULL; }
    dg_scope *s = dg_scope_begin();
    dg_tensor *c = dg_contiguous(ids->dtype == DG_I64 ? ids : dg_cast(ids, DG_I64));
    int rc = c ? dg_to_host(c, h, sizeof *h * (size_t)n) : DG_ENOMEM;
    dg_scope_end(s);
    if (rc) { free(h); return NULL; }
    return h;
}

/* h[n] as an int64 tensor on like's device (not the current one: backward runs wherever the
 * forward ran). */
static dg_tensor *ids_on(const dg_tensor *like, const int64_t *h, int64_t n) {
    dg_tensor *t = dg_empty_as(like, DG_SHAPE(n), DG_I64);
    if (t && n > 0 && DG_KCALL(t, upload, dg_tensor_ptr(t), h, sizeof *h * (size_t)n) != 0) { dg_tensor_free(t); return NULL; }
    return t;
}

/* The sorted unique values of ids[n] (skipping `skip` when has_skip) as an int64 tensor on dev,
 * and, when inverse is given, for each id its position in them (-1 for a skipped one). */
static dg_tensor *unique_ids(const int64_t *ids, int64_t n, bool has_skip, int64_t skip, const dg_tensor *dev,
                             int64_t **inverse) {
    int64_t *u = malloc(sizeof *u * (size_t)(n ? n : 1)), k = 0;
    if (!u) { DG_ERR(DG_ENOMEM, "embedding: out of memory for %lld ids", (long long)n); return NULL; }
    for (int64_t i = 0; i < n; i++) if (!has_skip || ids[i] != skip) u[k++] = ids[i];
    qsort(u, (size_t)k, sizeof *u, cmp_i64);
    int64_t m = 0;
    for (int64_t i = 0; i < k; i++) if (m == 0 || u[m - 1] != u[i]) u[m++] = u[i];
    if (inverse) {
        *inverse = malloc(sizeof **inverse * (size_t)(n ? n : 1));
        if (!*inverse) { free(u); DG_ERR(DG_ENOMEM, "embedding: out of memory"); return NULL; }
        for (int64_t i = 0; i < n; i++) {
            if (has_skip && ids[i] == skip) { (*inverse)[i] = -1; continue; }
            const int64_t *f = bsearch(&ids[i], u, (size_t)m, sizeof *u, cmp_i64);
            (*inverse)[i] = f - u;
        }
    }
    dg_tensor *t = ids_on(dev, u, m);
    free(u);
    return t;
}

/* dst[index[i]] += src[i] over the first axis (dst contiguous [k, d], src [n, d] contiguous). */
static int add_rows(dg_tensor *dst, const dg_tensor *index, const dg_tensor *src) {
    int64_t d = dst->numel / (dst->shape[0] ? dst->shape[0] : 1);
    return DG_KCALL(dst, index_add, DG_KV(src), DG_KV(index), DG_KV(dst), 1, dst->shape[0], d);
}

/* The summed rows of ids[n] / rows [n, ...] per unique id, skipping padding; kept in t. */
static int sparse_store(dg_tensor *t, const int64_t *ids, int64_t n, const dg_tensor *rows, bool has_pad, int64_t pad) {
    int64_t *inv = NULL;
    dg_scope *s = dg_scope_begin();
    dg_tensor *u = unique_ids(ids, n, has_pad, pad, t, &inv), *acc = NULL;
    int rc = DG_ENOMEM;
    if (u) {
        /* a padding id's row goes to a dummy last slot, cut off after the sum */
        int64_t k = u->numel;
        for (int64_t i = 0; i < n; i++) if (inv[i] < 0) inv[i] = k;
        dg_tensor *ix = ids_on(t, inv, n);
        dg_shape shp = dg_shape_of(rows);
        shp.d[0] = k + 1;
        acc = ix ? dg_full_on(t, shp, 0.0, t->dtype) : NULL;
        dg_tensor *rc_rows = dg_contiguous(rows);
        if (acc && rc_rows && (rc = add_rows(acc, ix, rc_rows)) == 0) {
            acc = dg_contiguous(dg_slice(acc, 0, 0, k, 1));
            if (acc) {
                dg_tensor_release(t->sparse_ids);
                dg_tensor_release(t->sparse_rows);
                t->sparse_ids = dg_keep(u);
                t->sparse_rows = dg_keep(acc);
            } else rc = DG_ENOMEM;
        }
    }
    dg_scope_end(s);
    free(inv);
    return rc;
}

/* Adds rows [n, ...] for ids (int, [n]) to t's sparse gradient, merging with what it holds. */
static int sparse_accumulate(dg_tensor *t, const dg_tensor *ids, const dg_tensor *rows, bool has_pad, int64_t pad) {
    dg_scope *s = dg_scope_begin();
    const dg_tensor *all_ids = ids, *all_rows = rows;
    if (t->sparse_ids) {
        dg_tensor *i2[2] = { t->sparse_ids, dg_cast(ids, DG_I64) }, *r2[2] = { t->sparse_rows, (dg_tensor *)rows };
        all_ids = i2[1] ? dg_concat(i2, 2, 0) : NULL;
        all_rows = dg_concat(r2, 2, 0);
    }
    int64_t *h = all_ids && all_rows ? host_ids(all_ids) : NULL;
    int rc = h ? sparse_store(t, h, all_ids->numel, all_rows, has_pad, pad) : DG_ENOMEM;
    free(h);
    dg_scope_end(s);
    return rc;
}

int dg_sparse_grad_fold(dg_tensor *t) {
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    dg_tensor *dense = dg_full_on(t, dg_shape_of(t), 0.0, t->dtype);
    int rc = dense ? add_rows(dense, t->sparse_ids, t->sparse_rows) : DG_ENOMEM;
    if (!rc) {
        if (t->grad) rc = dg_add_(t->grad, dense);
        else t->grad = dg_keep(dense);
    }
    dg_no_grad_end();
    dg_scope_end(s);
    if (rc) return rc;
    dg_tensor_release(t->sparse_ids);
    dg_tensor_release(t->sparse_rows);
    t->sparse_ids = t->sparse_rows = NULL;
    return 0;
}

int64_t dg_sparse_grad(const dg_tensor *t, dg_tensor **ids, dg_tensor **rows) {
    DG_CHECK_INPUT_INT("sparse_grad", t);
    if (ids) *ids = t->sparse_ids;
    if (rows) *rows = t->sparse_rows;
    return t->sparse_ids ? t->sparse_ids->numel : 0;
}

static int embedding_bw(dg_node *n, const dg_tensor *g, dg_tensor **gi) {
    const emb_attr *a = dg_node_attr(n);
    const dg_tensor *ids = dg_node_saved(n, 0);   /* flat [n] */
    dg_shape ws = dg_node_input_shape(n, 0);
    dg_shape rs = ws;
    rs.d[0] = ids->numel;
    dg_tensor *rows = dg_reshape(dg_contiguous(g), rs);
    if (!rows) return DG_ENOMEM;
    dg_tensor *leaf = n->in[0].leaf;
    if (a->sparse && leaf) {
        /* the rows go to the leaf directly; no dense gradient flows */
        gi[0] = NULL;
        return sparse_accumulate(leaf, ids, rows, a->has_pad, a->pad);
    }
    if (a->has_pad) {
        dg_shape ms = { .ndim = rows->ndim };
        for (int i = 0; i < ms.ndim; i++) ms.d[i] = 1;
        ms.d[0] = ids->numel;
        dg_tensor *is_pad = dg_reshape(dg_equal(ids, dg_full_on(ids, DG_SHAPE(1), (double)a->pad, DG_I64)), ms);
        rows = dg_where(is_pad, dg_zeros_like(rows), rows);
        if (!rows) return DG_ENOMEM;
    }
    dg_tensor *gw = dg_full_on(g, ws, 0.0, g->dtype);
    if (!gw) return DG_ENOMEM;
    gi[0] = gw;
    return add_rows(gw, ids, rows);
}

/* torch's embedding_renorm_: each distinct row looked up whose p-norm exceeds max_norm is scaled
 * by max_norm / (norm + 1e-7), in place and outside autograd. */
static int renorm_rows(dg_tensor *w, const dg_tensor *ids, double max_norm, double p) {
    if (ids->numel == 0) return 0;   /* no row looked up: none to renormalise (and no kernel over zero rows) */
    int64_t *h = host_ids(ids);
    if (!h) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    dg_scope *s = dg_scope_begin();
    dg_no_grad_begin();
    int rc = DG_ENOMEM;
    dg_tensor *u = unique_ids(h, ids->numel, false, 0, w, NULL);
    dg_tensor *rows = u ? dg_index_select(w, u, 0) : NULL;
    int64_t row = 1;   /* a row's size, stated: -1 has nothing to infer from when there are no rows */
    for (int i = 1; i < w->ndim; i++) row *= w->shape[i];
    dg_tensor *flat = rows ? dg_reshape(rows, DG_SHAPE(rows->shape[0], row)) : NULL;
    int ax = 1;
    dg_tensor *norm = NULL;
    if (flat && isinf(p)) norm = dg_max(dg_abs(flat), &ax, 1, true);
    else if (flat) norm = dg_pow_scalar(dg_sum(dg_pow_scalar(dg_abs(flat), p), &ax, 1, true), 1.0 / p);
    if (norm) {
        dg_tensor *scale = dg_where(dg_greater(norm, dg_full_on(norm, DG_SHAPE(1), max_norm, norm->dtype)),
                                    dg_rdiv_scalar(dg_add_scalar(norm, 1e-7), max_norm), dg_ones_like(norm));
        dg_tensor *delta = scale ? dg_contiguous(dg_reshape(dg_mul(flat, dg_sub_scalar(scale, 1.0)), dg_shape_of(rows))) : NULL;
        if (delta) rc = add_rows(w, u, delta);
    }
    dg_no_grad_end();
    dg_scope_end(s);
    free(h);
    return rc;
}

static dg_tensor *embedding_op(const dg_tensor *ids, const dg_tensor *weight, dg_embedding_params p) {
    DG_CHECK_PARAMS("embedding", p, dg_embedding_default_params);
    DG_CHECK_INPUT("embedding", ids);
    DG_CHECK_INPUT("embedding", weight);
    DG_CHECK(ids->dtype == DG_I64 || ids->dtype == DG_I32, "embedding: ids must be int64/int32, got %s %s",
             dg_dtype_name(ids->dtype), DG_SHAPE_STR(ids));
    DG_CHECK_FLOAT("embedding", weight);
    DG_CHECK(weight->ndim >= 2, "embedding: weight must be [num_embeddings, embedding_dim], got %s", DG_SHAPE_STR(weight));
    DG_CHECK_SAME_DEVICE("embedding", ids, weight);
    DG_CHECK(ids->ndim + weight->ndim - 1 <= DG_MAX_DIMS, "embedding: ids %s and weight %s make more than %d dims",
             DG_SHAPE_STR(ids), DG_SHAPE_STR(weight), DG_MAX_DIMS);
    int64_t num = weight->shape[0];
    bool has_pad = p.padding_idx != DG_NO_PADDING_IDX;
    int64_t pad = p.padding_idx < 0 && has_pad ? p.padding_idx + num : p.padding_idx;
    DG_CHECK(!has_pad || (pad >= 0 && pad < num), "embedding: padding_idx %lld out of range for %lld embeddings",
             (long long)p.padding_idx, (long long)num);
    DG_CHECK(p.max_norm >= 0 && isfinite(p.max_norm) && (p.max_norm == 0 || p.norm_type > 0),
             "embedding: max_norm %g must be >= 0 (0: off) and norm_type %g > 0", p.max_norm, p.norm_type);
    DG_CHECK(p.max_norm == 0 || dg_is_contiguous(weight), "embedding: max_norm renormalises weight %s in place: it must be contiguous",
             DG_SHAPE_STR(weight));
    dg_scope *s = dg_scope_begin();
    dg_tensor *flat = dg_contiguous(dg_reshape(ids, DG_SHAPE(-1)));
    if (flat && p.max_norm > 0 && renorm_rows((dg_tensor *)weight, flat, p.max_norm, p.norm_type) != 0) flat = NULL;
    dg_no_grad_begin();
    dg_tensor *rows = flat ? dg_index_select(weight, flat, 0) : NULL;
    dg_no_grad_end();
    dg_shape shp = dg_shape_of(ids);
    for (int i = 1; i < weight->ndim; i++) shp.d[shp.ndim++] = weight->shape[i];
    dg_tensor *y = rows ? dg_reshape(rows, shp) : NULL;
    const dg_tensor *in[1] = { weight };
    if (y && dg_op_records()) {
        dg_node *n = dg_record_op(DG_OP_EMBEDDING, y, in, 1, embedding_bw);
        if (!n || dg_node_save(n, flat)) y = NULL;   /* record/save said why */
        else {
            *(emb_attr *)dg_node_attr(n) = (emb_attr){ .has_pad = has_pad, .sparse = p.sparse, .pad = pad };
            dg_trace_extra(n, ids, NULL);   /* the ids as given: the saved copy is flattened */
        }
    }
    return dg_composite_end(s, y);
}
dg_tensor *dg_embedding(const dg_tensor *ids, const dg_tensor *weight, dg_embedding_params p) {
    dg_op_frame f;
    dg_op_enter(&f, DG_OP_EMBEDDING, DG_OP_IN(ids, weight));
    return dg_op_leave(&f, embedding_op(f.arg[0], f.arg[1], p));
}
