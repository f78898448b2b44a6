/* nn/rnn_cell.c — the cells RNNCell, LSTMCell and GRUCell (torch.nn 1.13): one step of dg_rnn
 * (eager/ops/rnn.c) over x [N, input_size] or an unbatched [input_size], with the state given
 * or zeros. Parameters weight_ih [G H, in], weight_hh [G H, H], bias_ih, bias_hh [G H], all
 * U(-1/sqrt(H), 1/sqrt(H)). dg_forward(cell, x) returns h' from zero states;
 * dg_nn_rnn_cell_forward gives h' (output and h_n) and, for an LSTMCell, c' (c_n). */
#include "nn_internal.h"

typedef struct {
    dg_rnn_mode mode;
    int64_t in, hidden;
} cell_state;

static const dg_layer_class rnn_cell_class = DG_LAYER_CLASS("RNNCell");
static const dg_layer_class lstm_cell_class = DG_LAYER_CLASS("LSTMCell");
static const dg_layer_class gru_cell_class = DG_LAYER_CLASS("GRUCell");
const dg_layer_class *dg_nn_rnn_cell_class(void) { return &rnn_cell_class; }
const dg_layer_class *dg_nn_lstm_cell_class(void) { return &lstm_cell_class; }
const dg_layer_class *dg_nn_gru_cell_class(void) { return &gru_cell_class; }

typedef struct { const dg_tensor *x, *h, *c; } cell_call;

static int check_vec(dg_layer *self, const dg_tensor *t, const char *what, int64_t n, int64_t width, bool batched) {
    if (!t) return 0;
    bool ok = batched ? dg_ndim(t) == 2 && dg_dim(t, 0) == n && dg_dim(t, 1) == width : dg_ndim(t) == 1 && dg_dim(t, 0) == width;
    char ts[96];
    dg_shape_str(t, ts, sizeof ts);
    dg_dtype pdt = dg_dtype_of(dg_layer_parameter(self, "weight_ih"));
    if (ok && dg_dtype_of(t) != pdt) {
        DG_LAYER_ERROR(self, "%s %s is %s but the parameters are %s", what, ts, dg_dtype_name(dg_dtype_of(t)), dg_dtype_name(pdt));
        return DG_EINVAL;
    }
    if (ok) return 0;
    if (batched) DG_LAYER_ERROR(self, "%s must be [%lld, %lld], got %s", what, (long long)n, (long long)width, ts);
    else DG_LAYER_ERROR(self, "%s must be [%lld] for an unbatched input, got %s", what, (long long)width, ts);
    return DG_EINVAL;
}

static int cell_fw(dg_layer *self, void *ctx, dg_tensor **outs) {
    cell_state *s = dg_layer_user(self);
    const cell_call *c = ctx;
    const dg_tensor *x = c->x, *h = c->h, *cc = c->c;
    bool lstm = s->mode == DG_RNN_LSTM;
    char xs[96];
    dg_shape_str(x, xs, sizeof xs);
    if (cc && !lstm) {
        char cs[96];
        dg_shape_str(cc, cs, sizeof cs);
        return DG_LAYER_ERROR(self, "a cell state cx %s is given but only an LSTMCell has one (input %s)", cs, xs), DG_EINVAL;
    }
    if ((dg_ndim(x) != 1 && dg_ndim(x) != 2) || dg_dim(x, -1) != s->in)
        return DG_LAYER_ERROR(self, "input must be [N, %lld] or [%lld], got %s", (long long)s->in, (long long)s->in, xs), DG_EINVAL;
    bool batched = dg_ndim(x) == 2;
    dg_dtype pdt = dg_dtype_of(dg_layer_parameter(self, "weight_ih"));
    if (dg_dtype_of(x) != DG_F32 && dg_dtype_of(x) != DG_F64)
        return DG_LAYER_ERROR(self, "input must be float32 or float64, got %s %s", dg_dtype_name(dg_dtype_of(x)), xs), DG_EINVAL;
    if (dg_dtype_of(x) != pdt)
        return DG_LAYER_ERROR(self, "input %s is %s but the parameters are %s (cast the input, or dg_layer_to_dtype the layer)", xs,
                              dg_dtype_name(dg_dtype_of(x)), dg_dtype_name(pdt)), DG_EINVAL;
    int64_t n = batched ? dg_dim(x, 0) : 1;
    int rc = check_vec(self, h, "hx", n, s->hidden, batched);
    if (!rc) rc = check_vec(self, cc, "cx", n, s->hidden, batched);
    if (rc) return rc;
    const dg_tensor *x3 = dg_reshape(x, DG_SHAPE(1, n, s->in));
    if (h && !batched) h = dg_unsqueeze(h, 0);
    if (cc && !batched) cc = dg_unsqueeze(cc, 0);
    dg_rnn_params p = dg_rnn_default_params();
    p.mode = s->mode;
    dg_rnn_result r;
    dg_tensor *w[4];
    dg_nn_rnn_weights(self, "", w);   /* through the tree: a parameter set since is the one used */
    rc = dg_rnn(x3, h, cc, w[0], w[1], w[2], w[3], NULL, p, &r);
    if (rc) return rc;
    outs[0] = batched ? r.h_n : dg_squeeze(r.h_n, 0);
    outs[1] = outs[0];
    outs[2] = !lstm ? NULL : batched ? r.c_n : dg_squeeze(r.c_n, 0);
    return outs[0] && (!lstm || outs[2]) ? 0 : dg_last_status();
}

static bool is_cell(const dg_layer *l) {
    return dg_layer_is(l, &rnn_cell_class) || dg_layer_is(l, &lstm_cell_class) || dg_layer_is(l, &gru_cell_class);
}

int dg_nn_rnn_cell_forward(dg_layer *cell, const dg_tensor *x, const dg_tensor *h, const dg_tensor *c, dg_rnn_result *out) {
    DG_CHECK_INT(out, "nn_rnn_cell_forward: out is NULL");
    *out = (dg_rnn_result){ 0 };
    DG_CHECK_HANDLE_INT(cell, "nn_rnn_cell_forward: layer is NULL");
    if (!is_cell(cell)) {
        dg_layer_error_at(cell, DG_EINVAL, __FILE__, __LINE__, "nn_rnn_cell_forward: not an RNNCell, LSTMCell or GRUCell");
        return DG_EINVAL;
    }
    DG_CHECK_TENSOR_INT("nn_rnn_cell_forward", x);
    cell_call cc = { x, h, c };
    dg_tensor *outs[3];
    int rc = dg_layer_run(cell, cell_fw, &cc, outs, 3);
    if (!rc) *out = (dg_rnn_result){ outs[0], outs[0], outs[2] };
    return rc;
}

static dg_tensor *cell_forward_one(dg_layer *self, const dg_tensor *x) {
    cell_call c = { x, NULL, NULL };
    dg_tensor *outs[3] = { 0 };
    return cell_fw(self, &c, outs) ? NULL : outs[0];
}

dg_layer *dg_nn_rnn_cell(dg_rnn_mode mode, int64_t input_size, int64_t hidden_size, dg_nn_rnn_params p) {
    DG_CHECK_PARAMS("nn_rnn_cell", p, dg_nn_rnn_default_params);
    if ((unsigned)mode > DG_RNN_GRU) { DG_ERR(DG_EINVAL, "nn_rnn_cell: bad mode %d", (int)mode); return NULL; }
    const dg_layer_class *cls = mode == DG_RNN_LSTM ? &lstm_cell_class : mode == DG_RNN_GRU ? &gru_cell_class : &rnn_cell_class;
    cell_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    dg_layer *l = dg_layer_new(cls, cell_forward_one, s, free);
    if (!l) return NULL;
    s->mode = mode;
    s->in = input_size;
    s->hidden = hidden_size;
    dg_layer_set_extra_repr(l, "%lld, %lld%s%s", (long long)input_size, (long long)hidden_size, p.bias ? "" : ", bias=False",
                            mode == DG_RNN_RELU ? ", nonlinearity=relu" : "");
    const dg_nn_rnn_params d = dg_nn_rnn_default_params();
    const char *bad = input_size <= 0 || hidden_size <= 0 ? "input_size and hidden_size must be positive"
                      : p.dtype != DG_F32 && p.dtype != DG_F64 ? "dtype must be float32 or float64"
                      : p.num_layers != d.num_layers || p.bidirectional || p.batch_first || p.dropout != 0 || p.proj_size != 0
                          ? "a cell takes only bias and dtype: num_layers, bidirectional, batch_first, dropout and proj_size must keep their defaults"
                          : NULL;
    if (bad) {
        DG_LAYER_ERROR(l, "%s (got input_size %lld, hidden_size %lld, %s)", bad, (long long)input_size, (long long)hidden_size,
                       dg_dtype_name(p.dtype));
        dg_layer_free(l);
        return NULL;
    }
    int rc = dg_nn_rnn_add_weights(l, mode, input_size, hidden_size, p.bias, p.dtype, "");
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}
