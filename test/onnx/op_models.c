/* test/onnx/op_models.c — one small layer per group of ops the exporter maps beyond the big
 * models: each is exported and run in ONNX Runtime at batch 1 and 7 by make test-onnx
 * (export_models.c writes them, check.py compares them; integer outputs exactly).
 *
 * The ranking models (TopK, sort, argsort, argmax) rank the input plus a parameter, an exact
 * float sum in both runtimes, so the order ONNX Runtime finds is the order dygraph found (a
 * matmul first would let rounding reorder near-ties and make an exact index check flaky). */
#define ONNX_PROGRAM "op_models"
#include "op_models.h"
#include <stdio.h>
#include <stdlib.h>


static dg_tensor *param(dg_layer *l, const char *n) { return dg_layer_parameter(l, n); }
static dg_layer *with_params(const dg_layer_class *cls, dg_layer_forward_fn fw, int n, const char *const *names, const dg_shape *shapes) {
    dg_layer *l = dg_layer_new(cls, fw, NULL, NULL);
    ONNX_ASSERT(l, cls->name);
    for (int i = 0; i < n; i++) ONNX_ASSERT(dg_layer_add_parameter(l, names[i], dg_uniform(shapes[i], -0.5, 0.5, DG_F32)) == 0, names[i]);
    return l;
}
static dg_tensor *seq_input(int64_t b) { return dg_randn(DG_SHAPE(b, 5, 12), DG_F32); }
static dg_tensor *shifted(dg_layer *self, const dg_tensor *x) { return dg_add(x, param(self, "shift")); }
static dg_layer *shift_layer(const dg_layer_class *cls, dg_layer_forward_fn fw) {
    return with_params(cls, fw, 1, (const char *[]){ "shift" }, (dg_shape[]){ DG_SHAPE(12) });
}

/* ---- TopK values (largest and smallest, two axes), sort values, and the indices used as data:
 * cast to float and gathered with (GatherElements) ---- */
static const dg_layer_class topk_class = DG_LAYER_CLASS("TopKValues");
static dg_tensor *topk_forward(dg_layer *self, const dg_tensor *x) {
    dg_tensor *h = shifted(self, x), *v1 = NULL, *i1 = NULL, *v2 = NULL, *s = NULL;
    ONNX_ASSERT(dg_topk(h, 4, 2, true, &v1, &i1) == 0 && dg_topk(h, 2, 1, false, &v2, NULL) == 0 &&
          dg_sort(h, 1, false, &s, NULL) == 0, "topk / sort");
    dg_tensor *cat = dg_concat((dg_tensor *[]){ v1, dg_cast(i1, DG_F32), dg_gather(h, i1, 2) }, 3, 2);   /* [N,5,12] */
    return dg_concat((dg_tensor *[]){ dg_add(cat, s), v2 }, 2, 1);                                      /* [N,7,12] */
}
static dg_layer *topk_model(void) { return shift_layer(&topk_class, topk_forward); }

/* ---- integer outputs: TopK's indices (smallest, last axis), argsort (descending), argmax, argmin ---- */
static const dg_layer_class topk_ix_class = DG_LAYER_CLASS("TopKIndices");
static dg_tensor *topk_ix_forward(dg_layer *self, const dg_tensor *x) {
    dg_tensor *ix = NULL;
    ONNX_ASSERT(dg_topk(shifted(self, x), 3, -1, false, NULL, &ix) == 0, "topk indices");
    return ix;
}
static dg_layer *topk_ix_model(void) { return shift_layer(&topk_ix_class, topk_ix_forward); }

static const dg_layer_class argsort_class = DG_LAYER_CLASS("ArgSort");
static dg_tensor *argsort_forward(dg_layer *self, const dg_tensor *x) { return dg_argsort(shifted(self, x), 1, true); }
static dg_layer *argsort_model(void) { return shift_layer(&argsort_class, argsort_forward); }

static const dg_layer_class argmax_class = DG_LAYER_CLASS("ArgMax");
static dg_tensor *argmax_forward(dg_layer *self, const dg_tensor *x) { return dg_argmax(shifted(self, x), 2, false); }
static dg_layer *argmax_model(void) { return shift_layer(&argmax_class, argmax_forward); }

static const dg_layer_class argmin_class = DG_LAYER_CLASS("ArgMinKeepdim");
static dg_tensor *argmin_forward(dg_layer *self, const dg_tensor *x) { return dg_argmin(shifted(self, x), 1, true); }
static dg_layer *argmin_model(void) { return shift_layer(&argmin_class, argmin_forward); }

/* ---- masks from the input: greater against zeros_like (a fill following the batch), against a
 * parameter, equal; where, masked_fill, a bool mask cast to float ---- */
static const dg_layer_class mask_class = DG_LAYER_CLASS("WhereMask");
static dg_tensor *mask_forward(dg_layer *self, const dg_tensor *x) {
    dg_tensor *h = dg_add(dg_matmul(x, param(self, "w")), param(self, "b"));                   /* [N,5,8] */
    dg_tensor *y = dg_where(dg_greater(h, dg_zeros_like(h)), h, dg_mul_scalar(h, 0.1));          /* leaky relu */
    y = dg_masked_fill(y, dg_greater(param(self, "thresh"), h), -1.0);
    dg_tensor *big = dg_cast(dg_greater(h, dg_ones_like(h)), DG_F32);
    dg_tensor *top = dg_cast(dg_equal(h, dg_max(h, (int[]){ 2 }, 1, true)), DG_F32);           /* the row's max */
    return dg_add(dg_mul(y, big), dg_add(y, top));
}
static dg_layer *mask_model(void) {
    return with_params(&mask_class, mask_forward, 3, (const char *[]){ "w", "b", "thresh" },
                       (dg_shape[]){ DG_SHAPE(12, 8), DG_SHAPE(8), DG_SHAPE(8) });
}

/* ---- cumsum, scatter (a permutation from argsort; and topk's indices, smaller than src), scatter_add ---- */
static const dg_layer_class scan_class = DG_LAYER_CLASS("CumsumScatter");
static dg_tensor *scan_forward(dg_layer *self, const dg_tensor *x) {
    dg_tensor *h = shifted(self, x), *top = NULL;
    dg_tensor *c = dg_cumsum(h, 2);
    dg_tensor *s = dg_scatter(c, 2, dg_argsort(h, 2, false), h);
    ONNX_ASSERT(dg_topk(h, 3, 2, true, NULL, &top) == 0, "topk");
    dg_tensor *s2 = dg_scatter(s, 2, top, dg_mul_scalar(h, 2.0));
    dg_tensor *sa = dg_scatter_add(c, 1, dg_argsort(h, 1, true), h);
    return dg_add(dg_add(s2, sa), dg_cumsum(h, 1));
}
static dg_layer *scan_model(void) { return shift_layer(&scan_class, scan_forward); }

/* ---- conv1d (padding, dilation, groups), max_pool1d and avg_pool1d with ceil_mode, GroupNorm ---- */
static const dg_layer_class conv1d_class = DG_LAYER_CLASS("Conv1dPool1dGroupNorm");
static dg_tensor *conv1d_forward(dg_layer *self, const dg_tensor *x) {
    dg_conv1d_params cp = dg_conv1d_default_params();
    cp.stride = 1, cp.padding = 2, cp.dilation = 2, cp.groups = 2;
    dg_tensor *y = dg_relu(dg_conv1d(x, param(self, "w"), param(self, "b"), cp));           /* [N,6,30] */
    dg_pool1d_params mp = dg_pool1d_default_params();
    mp.kernel = 3; mp.stride = 2; mp.padding = 1; mp.ceil_mode = true;
    y = dg_max_pool1d(y, mp);                                                                   /* [N,6,16] */
    dg_pool1d_params ap = mp;
    ap.count_include_pad = false;
    y = dg_avg_pool1d(y, ap);                                                                   /* [N,6,9] */
    y = dg_forward(dg_layer_sublayer(self, "gn"), y);
    dg_pool1d_params ap2 = dg_pool1d_default_params();
    ap2.kernel = 2; ap2.stride = 2; ap2.ceil_mode = true;                                       /* count_include_pad true */
    return dg_flatten(dg_concat((dg_tensor *[]){ y, dg_avg_pool1d(y, ap2) }, 2, 2), 1, -1);    /* [N,6*14] */
}
static dg_layer *conv1d_model(void) {
    dg_layer *l = with_params(&conv1d_class, conv1d_forward, 2, (const char *[]){ "w", "b" }, (dg_shape[]){ DG_SHAPE(6, 2, 3), DG_SHAPE(6) });
    ONNX_ASSERT(dg_layer_add_sublayer(l, "gn", dg_nn_group_norm(3, 6, dg_nn_layer_norm_default_params())) == 0, "group norm");
    dg_no_grad_begin();
    ONNX_ASSERT(dg_uniform_(param(l, "gn.weight"), 0.5, 1.5) == 0 && dg_uniform_(param(l, "gn.bias"), -0.2, 0.2) == 0, "gn params");
    dg_no_grad_end();
    return l;
}
static dg_tensor *conv1d_input(int64_t b) { return dg_randn(DG_SHAPE(b, 4, 30), DG_F32); }

/* ---- 2-d pooling with ceil_mode where the last window hangs over the input (and its padding) ---- */
static const dg_layer_class ceil_class = DG_LAYER_CLASS("CeilModePools");
static dg_tensor *ceil_forward(dg_layer *self, const dg_tensor *x) {
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = 3; p.stride[0] = p.stride[1] = 2; p.ceil_mode = true;
    dg_tensor *m = dg_max_pool2d(x, p);                                                        /* [N,3,5,4] */
    p.count_include_pad = true;
    dg_tensor *a = dg_avg_pool2d(x, p);                                                        /* [N,3,5,4] */
    p.padding[0] = p.padding[1] = 1;
    dg_tensor *ai = dg_avg_pool2d(x, p);                                                       /* [N,3,6,5] */
    p.count_include_pad = false;
    dg_tensor *ae = dg_avg_pool2d(x, p);
    dg_tensor *mp = dg_max_pool2d(x, p);
    return dg_concat((dg_tensor *[]){ dg_flatten(m, 1, -1), dg_flatten(a, 1, -1), dg_flatten(ai, 1, -1), dg_flatten(ae, 1, -1),
                                      dg_flatten(mp, 1, -1) }, 5, 1);
}
static dg_layer *ceil_model(void) { return dg_layer_new(&ceil_class, ceil_forward, NULL, NULL); }
static dg_tensor *ceil_input(int64_t b) { return dg_randn(DG_SHAPE(b, 3, 10, 9), DG_F32); }

/* ---- recurrent layers (ONNX LSTM / GRU / RNN, gates reordered at export) ---- */
/* LSTM, 2 layers, bidirectional, batch_first -> Linear on every step: [N,5,12] -> [N,5,6] */
static const dg_layer_class lstm_class = DG_LAYER_CLASS("LSTMLinear");
static dg_tensor *lstm_forward(dg_layer *self, const dg_tensor *x) {
    return dg_forward(dg_layer_sublayer(self, "fc"), dg_forward(dg_layer_sublayer(self, "lstm"), x));
}
static dg_layer *lstm_model(void) {
    dg_nn_rnn_params rp = dg_nn_rnn_default_params();
    rp.num_layers = 2;
    rp.bidirectional = true;
    rp.batch_first = true;
    rp.dropout = 0.25;   /* training only: not in the export */
    dg_layer *l = dg_layer_new(&lstm_class, lstm_forward, NULL, NULL);
    ONNX_ASSERT(l && dg_layer_add_sublayer(l, "lstm", dg_nn_rnn(DG_RNN_LSTM, 12, 10, rp)) == 0 &&
                dg_layer_add_sublayer(l, "fc", dg_nn_linear(20, 6)) == 0, "lstm model");
    return l;
}

/* GRU through the functional op, sequence-first inside: the input weight computed in the graph
 * (its gates reordered by a Gather), the recurrent one a parameter (a reordered initializer),
 * bias_ih only (bias_hh as zeros): [N,5,12] -> [N,5,8] */
static const dg_layer_class gru_class = DG_LAYER_CLASS("GRUFunctional");
static dg_tensor *gru_forward(dg_layer *self, const dg_tensor *x) {
    dg_rnn_params p = dg_rnn_default_params();
    p.mode = DG_RNN_GRU;
    dg_rnn_result r;
    ONNX_ASSERT(dg_rnn(dg_transpose(x, 0, 1), NULL, NULL, dg_mul_scalar(param(self, "w_ih"), 1.5), param(self, "w_hh"),
                       param(self, "b_ih"), NULL, NULL, p, &r) == 0, "gru");
    p.reverse = true;
    dg_rnn_result b;
    ONNX_ASSERT(dg_rnn(r.output, NULL, NULL, param(self, "w2_ih"), param(self, "w2_hh"), param(self, "b2_ih"),
                       param(self, "b2_hh"), NULL, p, &b) == 0, "gru reversed");
    return dg_add(dg_transpose(b.output, 0, 1), dg_transpose(r.output, 0, 1));
}
static dg_layer *gru_model(void) {
    return with_params(&gru_class, gru_forward, 7, (const char *[]){ "w_ih", "w_hh", "b_ih", "w2_ih", "w2_hh", "b2_ih", "b2_hh" },
                       (dg_shape[]){ DG_SHAPE(24, 12), DG_SHAPE(24, 8), DG_SHAPE(24), DG_SHAPE(24, 8), DG_SHAPE(24, 8), DG_SHAPE(24),
                                     DG_SHAPE(24) });
}

/* RNN (tanh), 2 layers, batch_first, no bias -> Linear: [N,5,12] -> [N,5,4] */
static const dg_layer_class rnn_tanh_class = DG_LAYER_CLASS("RNNTanhLinear");
static dg_tensor *rnn_tanh_forward(dg_layer *self, const dg_tensor *x) {
    return dg_forward(dg_layer_sublayer(self, "fc"), dg_forward(dg_layer_sublayer(self, "rnn"), x));
}
static dg_layer *rnn_tanh_model(void) {
    dg_nn_rnn_params rp = dg_nn_rnn_default_params();
    rp.num_layers = 2;
    rp.batch_first = true;
    rp.bias = false;
    dg_layer *l = dg_layer_new(&rnn_tanh_class, rnn_tanh_forward, NULL, NULL);
    ONNX_ASSERT(l && dg_layer_add_sublayer(l, "rnn", dg_nn_rnn(DG_RNN_TANH, 12, 9, rp)) == 0 &&
                dg_layer_add_sublayer(l, "fc", dg_nn_linear(9, 4)) == 0, "rnn model");
    return l;
}

/* A fixed batch of 3 (exported without the dynamic batch axis): a bidirectional LSTM with h0 and
 * c0 (parameters), unsorted lengths (a buffer: ONNX's sequence_lens), and a relu RNN with h0 on
 * its output, over the same lengths: [3,5,12] -> [3,5,7] */
static const dg_layer_class lstm_len_class = DG_LAYER_CLASS("LSTMLengthsFixedBatch");
static dg_tensor *lstm_len_forward(dg_layer *self, const dg_tensor *x) {
    dg_rnn_result r, q;
    const dg_tensor *len = dg_layer_buffer(self, "lengths");
    ONNX_ASSERT(dg_nn_rnn_forward(dg_layer_sublayer(self, "lstm"), x, param(self, "h0"), param(self, "c0"), len, false, &r) == 0,
                "lstm with lengths");
    ONNX_ASSERT(dg_nn_rnn_forward(dg_layer_sublayer(self, "rnn"), r.output, param(self, "h1"), NULL, len, false, &q) == 0,
                "relu rnn with lengths");
    return q.output;
}
static dg_layer *lstm_len_model(void) {
    dg_nn_rnn_params rp = dg_nn_rnn_default_params();
    rp.bidirectional = true;
    rp.batch_first = true;
    dg_layer *l = with_params(&lstm_len_class, lstm_len_forward, 3, (const char *[]){ "h0", "c0", "h1" },
                              (dg_shape[]){ DG_SHAPE(2, 3, 6), DG_SHAPE(2, 3, 6), DG_SHAPE(1, 3, 7) });
    rp.bidirectional = false;
    dg_layer *relu = dg_nn_rnn(DG_RNN_RELU, 12, 7, rp);
    rp.bidirectional = true;
    ONNX_ASSERT(dg_layer_add_sublayer(l, "lstm", dg_nn_rnn(DG_RNN_LSTM, 12, 6, rp)) == 0 && dg_layer_add_sublayer(l, "rnn", relu) == 0 &&
                dg_layer_add_buffer(l, "lengths", dg_from_data(DG_SHAPE(3), DG_I64, (int64_t[]){ 3, 5, 2 })) == 0, "lengths model");
    return l;
}

const op_model op_models[] = {
    { "topk_values", topk_model, seq_input },       { "topk_indices", topk_ix_model, seq_input },
    { "argsort_indices", argsort_model, seq_input }, { "argmax", argmax_model, seq_input },
    { "argmin_keepdim", argmin_model, seq_input },  { "where_mask", mask_model, seq_input },
    { "cumsum_scatter", scan_model, seq_input },    { "conv1d_pool1d_groupnorm", conv1d_model, conv1d_input },
    { "pool_ceil_mode", ceil_model, ceil_input },
    { "lstm_2l_bi_batch_first", lstm_model, seq_input }, { "gru_functional", gru_model, seq_input },
    { "rnn_tanh_2l", rnn_tanh_model, seq_input },      { "lstm_rnn_lengths_fixed", lstm_len_model, seq_input, 3 },
};
const int n_op_models = sizeof op_models / sizeof *op_models;
