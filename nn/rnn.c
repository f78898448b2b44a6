/* nn/rnn.c — the recurrent layers RNN, LSTM and GRU (torch.nn 1.13): num_layers stacked layers,
 * each one or two directions of dg_rnn (eager/ops/rnn.c), the directions' outputs joined along
 * the features, dropout between layers (not after the last), batch_first, optional h0 / c0 and
 * per-sample lengths (rnn.h says how they stand in for a PackedSequence).
 *
 * Parameters as torch names and orders them, layer by layer and direction by direction:
 * weight_ih_l{k}[_reverse] [G H, in], weight_hh_l{k}[_reverse] [G H, H], bias_ih_l{k}[_reverse],
 * bias_hh_l{k}[_reverse] [G H], all U(-1/sqrt(H), 1/sqrt(H)). in is input_size for layer 0 and
 * D H above it. h_n / c_n are [L D, N, H], layer-major (index l D + d). */
#include "nn_internal.h"
#include <math.h>

typedef struct {
    dg_rnn_mode mode;
    int64_t in, hidden;
    int layers, dirs;
    dg_nn_rnn_params p;
} rnn_state;

static const dg_layer_class rnn_class = DG_LAYER_CLASS("RNN");
static const dg_layer_class lstm_class = DG_LAYER_CLASS("LSTM");
static const dg_layer_class gru_class = DG_LAYER_CLASS("GRU");
const dg_layer_class *dg_nn_rnn_class(void) { return &rnn_class; }
const dg_layer_class *dg_nn_lstm_class(void) { return &lstm_class; }
const dg_layer_class *dg_nn_gru_class(void) { return &gru_class; }

int dg_rnn_gate_count(dg_rnn_mode mode) { return mode == DG_RNN_LSTM ? 4 : mode == DG_RNN_GRU ? 3 : 1; }

dg_nn_rnn_params dg_nn_rnn_default_params(void) {
    return (dg_nn_rnn_params){ .params_tag = DG_PARAMS_TAG, .num_layers = 1, .bias = true, .batch_first = false, .dropout = 0,
                               .bidirectional = false, .proj_size = 0, .dtype = DG_F32, .generator = NULL };
}

/* weight_ih<suffix> [G H, in], weight_hh<suffix> [G H, hidden] and, with bias, bias_ih<suffix>,
 * bias_hh<suffix> [G H], registered on l in torch's order, U(-1/sqrt(hidden), 1/sqrt(hidden)) */
int dg_nn_rnn_add_weights(dg_layer *l, dg_rnn_mode mode, int64_t in, int64_t hidden, bool bias, dg_dtype dt, const char *suffix) {
    static const char *const kind[4] = { "weight_ih", "weight_hh", "bias_ih", "bias_hh" };
    int64_t GH = dg_rnn_gate_count(mode) * hidden;
    double bound = 1.0 / sqrt((double)hidden);
    int rc = 0;
    for (int q = 0; q < (bias ? 4 : 2) && !rc; q++) {
        dg_tensor *t = q == 0 ? dg_empty(DG_SHAPE(GH, in), dt) : q == 1 ? dg_empty(DG_SHAPE(GH, hidden), dt) : dg_empty(DG_SHAPE(GH), dt);
        char name[64];
        snprintf(name, sizeof name, "%s%s", kind[q], suffix);
        rc = dg_layer_add_parameter(l, name, t);
        if (!rc) rc = dg_nn_init_uniform_(t, -bound, bound);
    }
    return rc;
}

void dg_nn_rnn_weights(const dg_layer *l, const char *suffix, dg_tensor **w) {
    static const char *const kind[4] = { "weight_ih", "weight_hh", "bias_ih", "bias_hh" };
    for (int q = 0; q < 4; q++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s", kind[q], suffix);
        w[q] = dg_layer_parameter(l, name);
    }
}

static bool is_rnn_layer(const dg_layer *l) {
    return dg_layer_is(l, &rnn_class) || dg_layer_is(l, &lstm_class) || dg_layer_is(l, &gru_class);
}

/* What one forward call was given. */
typedef struct {
    const dg_tensor *x, *h0, *c0, *lengths;
    bool enforce_sorted;
} rnn_call;

/* the [N, H] slice k of a [L D, N, H] state, or NULL */
static const dg_tensor *state_at(const dg_tensor *h, int k) {
    return h ? dg_squeeze(dg_slice(h, 0, k, k + 1, 1), 0) : NULL;
}

/* where a batched input's batch axis is read from (a batch_first mismatch shows up as a wrong N) */
static const char *layout_hint(const rnn_state *s, const char *xs, int64_t n, char *buf, size_t len) {
    snprintf(buf, len, " (batch_first=%s: input %s is %s, so N = %lld)", s->p.batch_first ? "True" : "False", xs,
             s->p.batch_first ? "[N, T, input_size]" : "[T, N, input_size]", (long long)n);
    return buf;
}

static int check_state(dg_layer *self, const dg_tensor *h, const char *name, int64_t ld, int64_t n, int64_t hid, bool batched,
                       const char *hint) {
    if (!h) return 0;
    char hs[96];
    dg_shape_str(h, hs, sizeof hs);
    bool ok = batched ? dg_ndim(h) == 3 && dg_dim(h, 0) == ld && dg_dim(h, 1) == n && dg_dim(h, 2) == hid
                      : dg_ndim(h) == 2 && dg_dim(h, 0) == ld && dg_dim(h, 1) == hid;
    dg_dtype pdt = dg_dtype_of(dg_layer_parameter(self, "weight_ih_l0"));
    if (ok && dg_dtype_of(h) != pdt) {
        DG_LAYER_ERROR(self, "%s %s is %s but the parameters are %s", name, hs, dg_dtype_name(dg_dtype_of(h)), dg_dtype_name(pdt));
        return DG_EINVAL;
    }
    if (ok) return 0;
    if (batched)
        DG_LAYER_ERROR(self, "expected %s of size (%lld, %lld, %lld), got %s%s", name, (long long)ld, (long long)n, (long long)hid, hs,
                       hint);
    else
        DG_LAYER_ERROR(self, "expected %s of size (%lld, %lld) for an unbatched input, got %s", name, (long long)ld,
                       (long long)hid, hs);
    return DG_EINVAL;
}

static int rnn_fw(dg_layer *self, void *ctx, dg_tensor **outs) {
    rnn_state *s = dg_layer_user(self);
    const rnn_call *c = ctx;
    const dg_tensor *x = c->x, *h0 = c->h0, *c0 = c->c0;
    char xs[96];
    dg_shape_str(x, xs, sizeof xs);
    bool lstm = s->mode == DG_RNN_LSTM;
    if (c0 && !lstm) {
        char cs[96];
        dg_shape_str(c0, cs, sizeof cs);
        return DG_LAYER_ERROR(self, "c0 %s is given but only an LSTM has a cell state (input %s)", cs, xs), DG_EINVAL;
    }
    if (dg_ndim(x) != 2 && dg_ndim(x) != 3)
        return DG_LAYER_ERROR(self, "expected a 2-D (unbatched) or 3-D input, got %s", xs), DG_EINVAL;
    bool batched = dg_ndim(x) == 3;
    dg_dtype pdt = dg_dtype_of(dg_layer_parameter(self, "weight_ih_l0"));
    if (dg_dtype_of(x) != DG_F32 && dg_dtype_of(x) != DG_F64)
        return DG_LAYER_ERROR(self, "input must be float32 or float64, got %s %s", dg_dtype_name(dg_dtype_of(x)), xs), DG_EINVAL;
    if (dg_dtype_of(x) != pdt)
        return DG_LAYER_ERROR(self, "input %s is %s but the parameters are %s (cast the input, or dg_layer_to_dtype the layer)", xs,
                              dg_dtype_name(dg_dtype_of(x)), dg_dtype_name(pdt)), DG_EINVAL;
    if (dg_dim(x, -1) != s->in)
        return DG_LAYER_ERROR(self, "input.size(-1) must be equal to input_size: expected %lld, got %lld (input %s%s)",
                              (long long)s->in, (long long)dg_dim(x, -1), xs,
                              s->p.batch_first ? ", batch_first: [N, T, input_size]" : ", [T, N, input_size]"),
               DG_EINVAL;
    /* to [T, N, I] */
    const dg_tensor *xt = !batched ? dg_unsqueeze(x, 1) : s->p.batch_first ? dg_transpose(x, 0, 1) : x;
    if (!xt) return dg_last_status();
    int64_t T = dg_dim(xt, 0), N = dg_dim(xt, 1), LD = (int64_t)s->layers * s->dirs;
    char hint[256] = "";
    if (batched) layout_hint(s, xs, N, hint, sizeof hint);
    int rc = check_state(self, h0, "hidden h0", LD, N, s->hidden, batched, hint);
    if (!rc) rc = check_state(self, c0, "cell state c0", LD, N, s->hidden, batched, hint);
    if (rc) return rc;
    if (!batched) {
        if (h0) h0 = dg_unsqueeze(h0, 1);
        if (c0) c0 = dg_unsqueeze(c0, 1);
    }
    const dg_tensor *len = c->lengths;
    if (len) {
        char ls[96];
        dg_shape_str(len, ls, sizeof ls);
        if (dg_ndim(len) != 1 || dg_dim(len, 0) != N || dg_dtype_of(len) != DG_I64)
            return DG_LAYER_ERROR(self, "lengths must be int64 [%lld] (one per sample), got %s %s%s", (long long)N,
                                  dg_dtype_name(dg_dtype_of(len)), ls, hint), DG_EINVAL;
        for (int64_t b = 0; b < N; b++) {
            int64_t v = (int64_t)dg_get(len, &b);
            if (v < 1 || v > T)
                return DG_LAYER_ERROR(self, "lengths[%lld] = %lld: each length must be in [1, %lld], the sequence length of input %s",
                                      (long long)b, (long long)v, (long long)T, xs), DG_EINVAL;
            int64_t pb = b - 1;
            if (b > 0 && c->enforce_sorted && v > (int64_t)dg_get(len, &pb))
                return DG_LAYER_ERROR(self, "lengths must be sorted in decreasing order with enforce_sorted (lengths[%lld] = %lld "
                                            "> lengths[%lld] = %lld); sort the batch or pass enforce_sorted false",
                                      (long long)b, (long long)v, (long long)pb, (long long)dg_get(len, &pb)), DG_EINVAL;
        }
    }
    dg_tensor *hn[2 * 64], *cn[2 * 64];
    const dg_tensor *inp = xt;
    for (int l = 0; l < s->layers; l++) {
        dg_tensor *dir_out[2] = { 0 };
        for (int d = 0; d < s->dirs; d++) {
            int k = l * s->dirs + d;
            char suffix[32];
            snprintf(suffix, sizeof suffix, "_l%d%s", l, d ? "_reverse" : "");
            dg_tensor *w[4];
            dg_nn_rnn_weights(self, suffix, w);   /* through the tree: a parameter set since is the one used */
            dg_rnn_params rp = dg_rnn_default_params();
            rp.mode = s->mode;
            rp.reverse = d == 1;
            dg_rnn_result r;
            rc = dg_rnn(inp, state_at(h0, k), state_at(c0, k), w[0], w[1], w[2], w[3], len, rp, &r);
            if (rc) return rc;
            dir_out[d] = r.output;
            hn[k] = dg_unsqueeze(r.h_n, 0);
            cn[k] = lstm ? dg_unsqueeze(r.c_n, 0) : NULL;
        }
        dg_tensor *o = s->dirs == 2 ? dg_concat(dir_out, 2, 2) : dir_out[0];
        if (o && l + 1 < s->layers && s->p.dropout > 0 && dg_layer_is_training(self)) {
            dg_dropout_params dp = dg_dropout_default_params();
            dp.p = s->p.dropout;
            dp.training = true;
            dp.generator = s->p.generator;
            o = dg_dropout_ext(o, dp);
        }
        if (!o) return dg_last_status();
        inp = o;
    }
    const dg_tensor *y = !batched ? dg_squeeze(inp, 1) : s->p.batch_first ? dg_transpose(inp, 0, 1) : inp;
    outs[0] = (dg_tensor *)y;
    outs[1] = LD == 1 ? hn[0] : dg_concat(hn, (int)LD, 0);
    outs[2] = !lstm ? NULL : LD == 1 ? cn[0] : dg_concat(cn, (int)LD, 0);
    if (!batched) {
        outs[1] = dg_squeeze(outs[1], 1);
        if (lstm) outs[2] = dg_squeeze(outs[2], 1);
    }
    return outs[0] && outs[1] && (!lstm || outs[2]) ? 0 : dg_last_status();
}

int dg_nn_rnn_forward(dg_layer *rnn, const dg_tensor *x, const dg_tensor *h0, const dg_tensor *c0, const dg_tensor *lengths,
                      bool enforce_sorted, dg_rnn_result *out) {
    DG_CHECK_INT(out, "nn_rnn_forward: out is NULL");
    *out = (dg_rnn_result){ 0 };
    DG_CHECK_HANDLE_INT(rnn, "nn_rnn_forward: layer is NULL");
    if (!is_rnn_layer(rnn)) {
        dg_layer_error_at(rnn, DG_EINVAL, __FILE__, __LINE__, "nn_rnn_forward: not an RNN, LSTM or GRU layer");
        return DG_EINVAL;
    }
    DG_CHECK_TENSOR_INT("nn_rnn_forward", x);
    rnn_call c = { x, h0, c0, lengths, enforce_sorted };
    dg_tensor *outs[3];
    int rc = dg_layer_run(rnn, rnn_fw, &c, outs, 3);
    if (!rc) *out = (dg_rnn_result){ outs[0], outs[1], outs[2] };
    return rc;
}

/* dg_forward(layer, x): the output alone, from zero states */
static dg_tensor *rnn_forward_one(dg_layer *self, const dg_tensor *x) {
    rnn_call c = { x, NULL, NULL, NULL, false };
    dg_tensor *outs[3] = { 0 };
    return rnn_fw(self, &c, outs) ? NULL : outs[0];
}

dg_layer *dg_nn_rnn(dg_rnn_mode mode, int64_t input_size, int64_t hidden_size, dg_nn_rnn_params p) {
    DG_CHECK_PARAMS("nn_rnn", p, dg_nn_rnn_default_params);
    if ((unsigned)mode > DG_RNN_GRU) { DG_ERR(DG_EINVAL, "nn_rnn: bad mode %d", (int)mode); return NULL; }
    const dg_layer_class *cls = mode == DG_RNN_LSTM ? &lstm_class : mode == DG_RNN_GRU ? &gru_class : &rnn_class;
    rnn_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", cls->name); return NULL; }
    dg_layer *l = dg_layer_new(cls, rnn_forward_one, s, free);
    if (!l) return NULL;
    s->mode = mode;
    s->in = input_size;
    s->hidden = hidden_size;
    s->layers = p.num_layers;
    s->dirs = p.bidirectional ? 2 : 1;
    s->p = p;
    char extra[160];
    int k = snprintf(extra, sizeof extra, "%lld, %lld", (long long)input_size, (long long)hidden_size);
    if (p.num_layers != 1) k += snprintf(extra + k, sizeof extra - k, ", num_layers=%d", p.num_layers);
    if (mode == DG_RNN_RELU) k += snprintf(extra + k, sizeof extra - k, ", nonlinearity='relu'");
    if (!p.bias) k += snprintf(extra + k, sizeof extra - k, ", bias=False");
    if (p.batch_first) k += snprintf(extra + k, sizeof extra - k, ", batch_first=True");
    if (p.dropout != 0) k += snprintf(extra + k, sizeof extra - k, ", dropout=%g", p.dropout);
    if (p.bidirectional) k += snprintf(extra + k, sizeof extra - k, ", bidirectional=True");
    dg_layer_set_extra_repr(l, "%s", extra);
    const char *bad = input_size <= 0 || hidden_size <= 0 ? "input_size and hidden_size must be positive"
                      : p.num_layers < 1 || p.num_layers > 64 ? "num_layers must be in [1, 64]"
                      : !(p.dropout >= 0 && p.dropout <= 1) ? "dropout must be in [0, 1]"
                      : p.proj_size != 0 ? "proj_size is not supported (LSTM projections are not implemented); use 0"
                      : p.dtype != DG_F32 && p.dtype != DG_F64 ? "dtype must be float32 or float64" : NULL;
    if (bad) {
        DG_LAYER_ERROR(l, "%s (got input_size %lld, hidden_size %lld, num_layers %d, dropout %g, proj_size %lld, %s)", bad,
                       (long long)input_size, (long long)hidden_size, p.num_layers, p.dropout, (long long)p.proj_size,
                       dg_dtype_name(p.dtype));
        dg_layer_free(l);
        return NULL;
    }
    int64_t H = hidden_size;
    int rc = 0;
    for (int li = 0; li < s->layers && !rc; li++)
        for (int d = 0; d < s->dirs && !rc; d++) {
            char suffix[32];
            snprintf(suffix, sizeof suffix, "_l%d%s", li, d ? "_reverse" : "");
            rc = dg_nn_rnn_add_weights(l, mode, li == 0 ? input_size : s->dirs * H, H, p.bias, p.dtype, suffix);
        }
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}
