/* dygraph/rnn.h — recurrent networks: the functional op (one layer, one direction over a whole
 * sequence) and the layers RNN, LSTM, GRU and their cells, with torch.nn 1.13's formulas, gate
 * order, parameter names, shapes, init and output layout.
 *
 * Variable-length batches: instead of a PackedSequence, a forward takes the padded batch and an
 * int64 `lengths` tensor [N] (on the CPU, as pack_padded_sequence takes it). Steps at or past a
 * sample's length neither change its state nor receive gradient, and its output rows there are
 * 0: the output equals torch's pad_packed_sequence(lstm(pack_padded_sequence(x, lengths)),
 * total_length=T), and h_n / c_n hold each sample's state after its last step (in the batch's
 * order, as torch returns them whether or not enforce_sorted). */
#ifndef DYGRAPH_RNN_H
#define DYGRAPH_RNN_H

#include "tensor.h"
#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dg_rnn_mode {
    DG_RNN_TANH,   /* h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) */
    DG_RNN_RELU,   /* the same with relu */
    DG_RNN_LSTM,   /* gates i, f, g, o: c' = f c + i g, h' = o tanh(c') */
    DG_RNN_GRU     /* gates r, z, n: n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h */
} dg_rnn_mode;

/* The results: output [T, N, H] (or what the call documents), h_n and c_n (c_n LSTM only, else
 * NULL). Owned like any op's result (the innermost open scope, else the caller). */
typedef struct dg_rnn_result { dg_tensor *output, *h_n, *c_n; } dg_rnn_result;

typedef struct dg_rnn_params {
    dg_rnn_mode mode;
    bool reverse;            /* run from each sample's last step back to its first (the reverse
                                direction of a bidirectional layer; output stays in time order) */
    uint32_t params_tag;     /* set by dg_rnn_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_rnn_params;
DG_API dg_rnn_params dg_rnn_default_params(void);   /* LSTM, forward in time */

/* One layer and direction over a sequence. x [T, N, I]; h0, c0 [N, H] or NULL (zeros; c0 LSTM
 * only); w_ih [G H, I], w_hh [G H, H]; b_ih, b_hh [G H] or NULL (G: 1 RNN, 4 LSTM, 3 GRU);
 * lengths int64 [N] on the CPU with values in [1, T], or NULL. out->output [T, N, H], h_n and
 * c_n [N, H]. float32 or float64, every tensor on x's device. The input projection of all steps
 * is one GEMM, each step one recurrent GEMM and one fused pass of the gates; backward walks the
 * steps back once, without running forward again. Returns 0 or a negative status. */
DG_API int dg_rnn(const dg_tensor *x, const dg_tensor *h0, const dg_tensor *c0, const dg_tensor *w_ih, const dg_tensor *w_hh,
                  const dg_tensor *b_ih, const dg_tensor *b_hh, const dg_tensor *lengths, dg_rnn_params p,
                  dg_rnn_result *out);

/* ---- layers (nn/rnn.c, nn/rnn_cell.c) ---- */
typedef struct dg_nn_rnn_params {   /* defaults are torch's */
    int num_layers;          /* 1 */
    bool bias;               /* true: bias_ih and bias_hh */
    bool batch_first;        /* false: input and output [T, N, features]; true: [N, T, features] (states stay [L D, N, H]) */
    double dropout;          /* 0: dropout on each layer's output but the last, in training mode */
    bool bidirectional;      /* false */
    int64_t proj_size;       /* 0 (LSTM projections are refused) */
    dg_dtype dtype;          /* float32 (or float64) parameters */
    dg_generator *generator; /* dropout's; NULL: the generator of the thread that runs forward */
    uint32_t params_tag;     /* set by dg_nn_rnn_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_rnn_params;
DG_API dg_nn_rnn_params dg_nn_rnn_default_params(void);
/* The gates of a mode: 1 (RNN), 4 (LSTM), 3 (GRU); parameters are [gates * hidden_size, ...]. */
DG_API int dg_rnn_gate_count(dg_rnn_mode mode);

/* torch.nn.RNN (DG_RNN_TANH / DG_RNN_RELU: the nonlinearity), nn.LSTM, nn.GRU. */
DG_API dg_layer *dg_nn_rnn(dg_rnn_mode mode, int64_t input_size, int64_t hidden_size, dg_nn_rnn_params p);
DG_API const dg_layer_class *dg_nn_rnn_class(void);    /* "RNN" */
DG_API const dg_layer_class *dg_nn_lstm_class(void);   /* "LSTM" */
DG_API const dg_layer_class *dg_nn_gru_class(void);    /* "GRU" */
/* output, (h_n, c_n) = layer(x, (h0, c0)): x [T, N, input_size] ([N, T, ...] with batch_first)
 * or unbatched [T, input_size]; h0, c0 [L D, N, H] ([L D, H] unbatched) or NULL (zeros);
 * lengths int64 [N] on the CPU or NULL (see the top of this file); enforce_sorted: lengths must
 * be decreasing, as pack_padded_sequence's default asks. out->output [T, N, D H] (batch_first:
 * [N, T, D H]), h_n and c_n [L D, N, H]. dg_forward(layer, x) gives the output alone. */
DG_API int dg_nn_rnn_forward(dg_layer *rnn, const dg_tensor *x, const dg_tensor *h0, const dg_tensor *c0, const dg_tensor *lengths,
                             bool enforce_sorted, dg_rnn_result *out);

/* torch.nn.RNNCell (DG_RNN_TANH / DG_RNN_RELU), LSTMCell, GRUCell: p's bias and dtype (its
 * other fields must keep their defaults). */
DG_API dg_layer *dg_nn_rnn_cell(dg_rnn_mode mode, int64_t input_size, int64_t hidden_size, dg_nn_rnn_params p);
DG_API const dg_layer_class *dg_nn_rnn_cell_class(void);    /* "RNNCell" */
DG_API const dg_layer_class *dg_nn_lstm_cell_class(void);   /* "LSTMCell" */
DG_API const dg_layer_class *dg_nn_gru_cell_class(void);    /* "GRUCell" */
/* h', c' = cell(x, (h, c)): x [N, input_size] or [input_size]; h, c [N, H] ([H]) or NULL (zeros).
 * out->output and out->h_n are h', out->c_n is c' (LSTMCell; else NULL). */
DG_API int dg_nn_rnn_cell_forward(dg_layer *cell, const dg_tensor *x, const dg_tensor *h, const dg_tensor *c, dg_rnn_result *out);

#ifdef __cplusplus
}
#endif

#endif
