/* eager/onnx/map_rnn.c — the rnn op (eager/ops/rnn.c: one layer, one direction) as ONNX's
 * LSTM, GRU or RNN operator.
 *
 * Gate order: torch keeps LSTM rows i, f, g, o and GRU rows r, z, n; ONNX wants LSTM i, o, f, c
 * and GRU z, r, h (GRU with linear_before_reset = 1, torch's form: the reset gate multiplies
 * W_hn h + b_hn). A weight or bias that is a parameter is written as a new initializer with its
 * row blocks reordered ("<name>+onnx_iofc" / "+onnx_zrh"); any other (a value computed in the
 * graph, a constant) is reordered in the graph by a Gather over its [G, H, K] blocks. The RNN
 * modes have one gate: the parameter itself, reshaped.
 *
 * Shapes: W [1, G H, I], R [1, G H, H], B [1, 2 G H] (Wb then Rb; a missing one as zeros),
 * sequence_lens int32 [N] (the lengths, cast) when the op had lengths, initial_h / initial_c
 * [1, N, H]. The op's recorded value is one tensor [T + 2, N, H] (LSTM; [T + 1, N, H] otherwise):
 * the output rows, then h_n, then c_n, so the mapper writes Concat(Reshape(Y, [T, -1, H]), Y_h,
 * Y_c) on axis 0 (Y is [T, 1, N, H]; Y_h and Y_c are already [1, N, H]). With sequence_lens ONNX
 * Runtime writes 0 for padded steps and keeps each sample's state at its last valid step, as the
 * op does; the reverse direction runs each sample from its own last step. */
#include "onnx_internal.h"
#include <dygraph/rnn.h>

#define G (&c->g)

static const char *reshape(ox_ctx *c, const char *x, const int64_t *shape, int n, const char *hint) {
    const char *in[2] = { x, ox_const_i64(G, shape, n) };
    const char *y = ox_tmp(G, hint);
    return ox_node(G, "Reshape", in, 2, y) ? y : NULL;
}

/* The ONNX block k of a gate-stacked tensor is torch's block perm[k]. */
static const int64_t lstm_perm[4] = { 0, 3, 1, 2 };   /* i f g o -> i o f c */
static const int64_t gru_perm[3] = { 1, 0, 2 };       /* r z n -> z r h */

/* Tensor r->in[k] ([G H, K], or [G H] when K is 0) with its gate blocks in ONNX's order, as a
 * value [1, G H, K] (or [1, G H]). */
static const char *gates(ox_ctx *c, const dg_trace_rec *r, int k, int mode, int64_t H, int64_t K) {
    const dg_tensor *t = r->in[k];
    const int64_t Gn = dg_rnn_gate_count((dg_rnn_mode)mode), GH = Gn * H;
    const int64_t *perm = mode == DG_RNN_LSTM ? lstm_perm : mode == DG_RNN_GRU ? gru_perm : NULL;
    const int64_t out_shape[3] = { 1, GH, K };
    const int out_nd = K ? 3 : 2;
    const char *pname = ox_param_name(c, t);
    if (perm && pname) {   /* a parameter: a reordered initializer */
        int64_t n = 0;
        float *w = ox_host_copy(t, &n), *o = w ? malloc(sizeof *o * (size_t)(n ? n : 1)) : NULL;
        if (!o) {
            free(w);
            ox_fail(r, DG_ENOMEM, "out of memory reordering %s's gates", pname);
            return NULL;
        }
        int64_t block = H * (K ? K : 1);
        for (int64_t b = 0; b < Gn; b++) memcpy(o + b * block, w + perm[b] * block, sizeof *o * (size_t)block);
        const char *name = ox_init(G, ox_fmt(G, "%s+onnx_%s", pname, mode == DG_RNN_LSTM ? "iofc" : "zrh"),
                                   ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, out_shape, out_nd, o, sizeof *o * (size_t)n);
        free(w);
        free(o);
        return name;
    }
    const char *v = ox_value(c, r, t, k);
    if (!v) return NULL;
    if (perm) {   /* a value of the graph: Gather its blocks */
        const int64_t blocks[3] = { Gn, H, K };
        const char *in[2] = { reshape(c, v, blocks, K ? 3 : 2, "rnn_gates"), ox_const_i64(G, perm, (int)Gn) };
        if (!in[0] || !in[1]) return NULL;
        const char *y = ox_tmp(G, "rnn_gates");
        Onnx__NodeProto *nd = ox_node(G, "Gather", in, 2, y);
        if (!nd) return NULL;
        ox_attr_i(G, nd, "axis", 0);
        v = y;
    }
    return reshape(c, v, out_shape, out_nd, "rnn_w");
}

int ox_map_rnn(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim) {
    (void)bdim;   /* the output's batch axis is the input's (axis 1), which the default finds */
    const dg_rnn_attr *a = dg_node_attr(r->node);
    const bool lstm = a->mode == DG_RNN_LSTM, gru = a->mode == DG_RNN_GRU;
    const int64_t H = a->H, T = a->T, GH = dg_rnn_gate_count((dg_rnn_mode)a->mode) * H;
    const char *x = ox_value(c, r, r->in[0], 0);
    const char *w = x ? gates(c, r, 3, a->mode, H, a->I) : NULL;
    const char *rw = w ? gates(c, r, 4, a->mode, H, H) : NULL;
    if (!rw) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    const char *b = NULL;
    if (r->in[5] || r->in[6]) {   /* B = [Wb, Rb], a missing one as zeros */
        const char *bb[2];
        for (int i = 0; i < 2; i++) {
            if (r->in[5 + i]) bb[i] = gates(c, r, 5 + i, a->mode, H, 0);
            else {
                float *z = calloc((size_t)GH, sizeof *z);
                if (!z) return ox_fail(r, DG_ENOMEM, "out of memory");
                bb[i] = ox_init(G, ox_tmp(G, "rnn_zero_bias"), ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, (int64_t[]){ 1, GH }, 2, z,
                                sizeof *z * (size_t)GH);
                free(z);
            }
            if (!bb[i]) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
        }
        b = ox_tmp(G, "rnn_b");
        Onnx__NodeProto *nd = ox_node(G, "Concat", bb, 2, b);
        if (!nd) return DG_ENOMEM;
        ox_attr_i(G, nd, "axis", 1);
    }
    const char *lens = NULL;
    if (a->has_len) {
        if (r->n_extra < 1 || !r->extra[0]) return ox_fail(r, DG_EUNSUPPORTED, "has lengths the trace did not keep");
        const char *l64 = ox_value(c, r, r->extra[0], 7);
        if (!l64) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
        lens = ox_tmp(G, "rnn_lengths");
        Onnx__NodeProto *nd = ox_node(G, "Cast", &l64, 1, lens);
        if (!nd) return DG_ENOMEM;
        ox_attr_i(G, nd, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT32);
    }
    const int64_t state_shape[3] = { 1, -1, H };
    const char *h0 = NULL, *c0 = NULL;
    if (r->in[1]) {
        const char *v = ox_value(c, r, r->in[1], 1);
        if (!v || !(h0 = reshape(c, v, state_shape, 3, "rnn_h0"))) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    if (r->in[2] && lstm) {
        const char *v = ox_value(c, r, r->in[2], 2);
        if (!v || !(c0 = reshape(c, v, state_shape, 3, "rnn_c0"))) return dg_last_status() ? dg_last_status() : DG_ENOMEM;
    }
    const char *in[7] = { x, w, rw, b, lens, h0, c0 };
    const char *outs[3] = { ox_tmp(G, "rnn_y"), ox_tmp(G, "rnn_y_h"), lstm ? ox_tmp(G, "rnn_y_c") : NULL };
    const char *op = lstm ? "LSTM" : gru ? "GRU" : "RNN";
    int n_in = lstm && c0 ? 7 : h0 ? 6 : lens ? 5 : b ? 4 : 3;
    Onnx__NodeProto *nd = ox_node_outs(G, op, in, n_in, outs, lstm ? 3 : 2);
    if (!nd) return DG_ENOMEM;
    ox_attr_i(G, nd, "hidden_size", H);
    ox_attr_s(G, nd, "direction", a->reverse ? "reverse" : "forward");
    if (gru) ox_attr_i(G, nd, "linear_before_reset", 1);
    if (a->mode == DG_RNN_TANH || a->mode == DG_RNN_RELU) {
        const char *act = a->mode == DG_RNN_TANH ? "Tanh" : "Relu";
        ox_attr_strs(G, nd, "activations", &act, 1);
    }
    /* the op's one value: output rows, h_n, c_n */
    const char *cat[3] = { reshape(c, outs[0], (int64_t[]){ T, -1, H }, 3, "rnn_out"), outs[1], outs[2] };
    if (!cat[0]) return DG_ENOMEM;
    Onnx__NodeProto *cn = ox_node(G, "Concat", cat, lstm ? 3 : 2, *out);
    if (!cn) return DG_ENOMEM;
    ox_attr_i(G, cn, "axis", 0);
    return 0;
}
