/* test/test_rnn_errors.c — bad input to the recurrent layers, cells and dg_rnn: each call fails
 * (NULL or a negative status, no result) with a message that names the layer as it prints
 * ("LSTM (5, 4)") or the op and mode ("rnn (LSTM)"), what was expected and the shapes given. */
#include "test_util.h"

/* the call failed, and its message holds each of the (up to three) strings */
static void expect3(int rc, const char *what, const char *a, const char *b, const char *c) {
    cr_expect(rc < 0, "%s: the call succeeded", what);
    const char *m = dg_last_error();
    cr_assert(m[0], "%s: no error message", what);
    const char *want[3] = { a, b, c };
    for (int i = 0; i < 3; i++)
        if (want[i]) cr_expect(strstr(m, want[i]), "%s: message '%s' lacks '%s'", what, m, want[i]);
    dg_clear_error();
}

static dg_layer *layer(dg_rnn_mode mode, bool batch_first, dg_dtype dt) {
    dg_nn_rnn_params p = dg_nn_rnn_default_params();
    p.batch_first = batch_first;
    p.dtype = dt;
    dg_layer *l = dg_nn_rnn(mode, 5, 4, p);
    cr_assert(l, "%s", dg_last_error());
    return l;
}

static dg_tensor *ones(dg_shape s) { return dg_ones(s, DG_F32); }
static dg_tensor *lens(int64_t a, int64_t b, int64_t c) { return dg_from_data(DG_SHAPE(3), DG_I64, (int64_t[]){ a, b, c }); }

Test(rnn_errors, layer_inputs) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_layer *lstm = layer(DG_RNN_LSTM, false, DG_F32), *gru = layer(DG_RNN_GRU, false, DG_F32);
    dg_layer *bf = layer(DG_RNN_LSTM, true, DG_F32);
    dg_rnn_result r;
    dg_tensor *x = ones(DG_SHAPE(7, 3, 5));

    /* wrong input size */
    expect3(dg_nn_rnn_forward(lstm, ones(DG_SHAPE(7, 3, 6)), NULL, NULL, NULL, false, &r), "input size", "LSTM (5, 4)",
            "expected 5, got 6", "[7, 3, 6]");
    cr_assert_null(r.output, "no result after a failure");
    cr_assert_null(dg_forward(gru, ones(DG_SHAPE(7, 3, 2))));
    expect_error_contains("input size via dg_forward", "GRU (5, 4)", "[7, 3, 2]");
    expect3(dg_nn_rnn_forward(lstm, ones(DG_SHAPE(2, 7, 3, 5)), NULL, NULL, NULL, false, &r), "4-D input", "LSTM (5, 4)",
            "[2, 7, 3, 5]", NULL);
    /* wrong h0 / c0 shapes */
    expect3(dg_nn_rnn_forward(lstm, x, ones(DG_SHAPE(1, 2, 4)), NULL, NULL, false, &r), "h0 shape", "LSTM (5, 4)",
            "h0 of size (1, 3, 4)", "[1, 2, 4]");
    expect3(dg_nn_rnn_forward(lstm, x, NULL, ones(DG_SHAPE(2, 3, 4)), NULL, false, &r), "c0 shape", "LSTM (5, 4)",
            "c0 of size (1, 3, 4)", "[2, 3, 4]");
    expect3(dg_nn_rnn_forward(lstm, ones(DG_SHAPE(7, 5)), ones(DG_SHAPE(1, 3, 4)), NULL, NULL, false, &r), "unbatched h0",
            "LSTM (5, 4)", "(1, 4) for an unbatched input", "[1, 3, 4]");
    /* c0 given to a GRU */
    expect3(dg_nn_rnn_forward(gru, x, NULL, ones(DG_SHAPE(1, 3, 4)), NULL, false, &r), "GRU c0", "GRU (5, 4)",
            "only an LSTM has a cell state", "[1, 3, 4]");
    /* lengths past the sequence, zero, the wrong count or dtype, unsorted with enforce_sorted */
    expect3(dg_nn_rnn_forward(lstm, x, NULL, NULL, lens(8, 2, 1), false, &r), "length 8 > T", "LSTM (5, 4)", "lengths[0] = 8",
            "[1, 7]");
    expect3(dg_nn_rnn_forward(lstm, x, NULL, NULL, lens(7, 0, 1), false, &r), "length 0", "LSTM (5, 4)", "lengths[1] = 0",
            "[7, 3, 5]");
    expect3(dg_nn_rnn_forward(lstm, x, NULL, NULL, dg_from_data(DG_SHAPE(2), DG_I64, (int64_t[]){ 7, 1 }), false, &r),
            "2 lengths for 3 samples", "LSTM (5, 4)", "[3]", "got int64 [2]");
    expect3(dg_nn_rnn_forward(lstm, x, NULL, NULL, dg_ones(DG_SHAPE(3), DG_F32), false, &r), "float lengths", "LSTM (5, 4)",
            "int64", "float32 [3]");
    expect3(dg_nn_rnn_forward(lstm, x, NULL, NULL, lens(3, 7, 1), true, &r), "unsorted", "LSTM (5, 4)", "enforce_sorted",
            "lengths[1] = 7 > lengths[0] = 3");
    cr_assert_eq(dg_nn_rnn_forward(lstm, x, NULL, NULL, lens(3, 7, 1), false, &r), 0, "unsorted without enforce_sorted: %s",
                 dg_last_error());

    /* batch_first mismatch: [N, T, I] = [3, 7, 5] given to a seq-first layer reads N = 7, so h0
     * for 3 samples fails, and the message says which axis the layer takes as the batch */
    dg_tensor *xbf = ones(DG_SHAPE(3, 7, 5));
    expect3(dg_nn_rnn_forward(lstm, xbf, ones(DG_SHAPE(1, 3, 4)), NULL, NULL, false, &r), "seq-first layer, batch-first input",
            "LSTM (5, 4)", "h0 of size (1, 7, 4), got [1, 3, 4]", "batch_first=False: input [3, 7, 5] is [T, N, input_size]");
    expect3(dg_nn_rnn_forward(lstm, xbf, NULL, NULL, lens(3, 2, 1), false, &r), "seq-first layer, lengths for 3",
            "LSTM (5, 4)", "[7]", "batch_first=False");
    /* and a batch_first layer given [T, N, I] */
    expect3(dg_nn_rnn_forward(bf, x, ones(DG_SHAPE(1, 3, 4)), NULL, NULL, false, &r), "batch-first layer, seq-first input",
            "LSTM (5, 4, batch_first=True)", "h0 of size (1, 7, 4)", "batch_first=True: input [7, 3, 5] is [N, T, input_size]");

    /* float16 input, and parameters of another dtype than the input */
    expect3(dg_nn_rnn_forward(lstm, dg_ones(DG_SHAPE(7, 3, 5), DG_F16), NULL, NULL, NULL, false, &r), "float16 input",
            "LSTM (5, 4)", "float16", "[7, 3, 5]");
    expect3(dg_nn_rnn_forward(lstm, dg_ones(DG_SHAPE(7, 3, 5), DG_F64), NULL, NULL, NULL, false, &r), "float64 input, float32 weights",
            "LSTM (5, 4)", "float32", "float64");
    expect3(dg_nn_rnn_forward(lstm, x, dg_ones(DG_SHAPE(1, 3, 4), DG_F64), NULL, NULL, false, &r), "float64 h0",
            "LSTM (5, 4)", "h0", "float64");
    cr_assert_eq(dg_nn_rnn_forward(NULL, x, NULL, NULL, NULL, false, &r), DG_EINVAL);
    expect_error_contains("NULL layer", "layer is NULL", NULL);
    expect3(dg_nn_rnn_forward(dg_nn_linear(2, 2), x, NULL, NULL, NULL, false, &r), "not an RNN", "Linear",
            "not an RNN, LSTM or GRU layer", NULL);
    dg_layer_free(lstm);
    dg_layer_free(gru);
    dg_layer_free(bf);
    dg_scope_end(s);
}

Test(rnn_errors, constructors) {
    dg_clear_error();
    dg_nn_rnn_params p = dg_nn_rnn_default_params();
    p.proj_size = 3;
    cr_assert_null(dg_nn_rnn(DG_RNN_LSTM, 5, 4, p));
    expect_error_contains("proj_size", "LSTM (5, 4)", "proj_size is not supported");
    p = dg_nn_rnn_default_params();
    p.dtype = DG_F16;
    cr_assert_null(dg_nn_rnn(DG_RNN_GRU, 5, 4, p));
    expect_error_contains("float16 parameters", "GRU (5, 4)", "float32 or float64");
    p = dg_nn_rnn_default_params();
    p.num_layers = 0;
    cr_assert_null(dg_nn_rnn(DG_RNN_TANH, 5, 4, p));
    expect_error_contains("0 layers", "RNN (5, 4, num_layers=0)", "num_layers must be in [1, 64]");
    p = dg_nn_rnn_default_params();
    p.dropout = 1.5;
    cr_assert_null(dg_nn_rnn(DG_RNN_LSTM, 5, 4, p));
    expect_error_contains("dropout", "LSTM", "dropout must be in [0, 1]");
    cr_assert_null(dg_nn_rnn(DG_RNN_LSTM, 0, 4, dg_nn_rnn_default_params()));
    expect_error_contains("input_size 0", "LSTM (0, 4)", "positive");
    cr_assert_null(dg_nn_rnn((dg_rnn_mode)9, 5, 4, dg_nn_rnn_default_params()));
    expect_error_contains("bad mode", "bad mode 9", NULL);
    p = dg_nn_rnn_default_params();
    p.bidirectional = true;
    cr_assert_null(dg_nn_rnn_cell(DG_RNN_LSTM, 5, 4, p));
    expect_error_contains("cell with bidirectional", "LSTMCell (5, 4)", "a cell takes only bias and dtype");
}

Test(rnn_errors, cells) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_layer *lc = dg_nn_rnn_cell(DG_RNN_LSTM, 5, 4, dg_nn_rnn_default_params());
    dg_layer *gc = dg_nn_rnn_cell(DG_RNN_GRU, 5, 4, dg_nn_rnn_default_params());
    cr_assert(lc && gc, "%s", dg_last_error());
    dg_rnn_result r;
    dg_tensor *x = ones(DG_SHAPE(3, 5));
    expect3(dg_nn_rnn_cell_forward(lc, x, ones(DG_SHAPE(2, 4)), NULL, &r), "hx rows", "LSTMCell (5, 4)", "hx must be [3, 4]",
            "[2, 4]");
    expect3(dg_nn_rnn_cell_forward(lc, x, ones(DG_SHAPE(3, 4)), ones(DG_SHAPE(3, 5)), &r), "cx width", "LSTMCell (5, 4)",
            "cx must be [3, 4]", "[3, 5]");
    expect3(dg_nn_rnn_cell_forward(lc, ones(DG_SHAPE(5)), ones(DG_SHAPE(1, 4)), NULL, &r), "unbatched hx", "LSTMCell (5, 4)",
            "hx must be [4] for an unbatched input", "[1, 4]");
    expect3(dg_nn_rnn_cell_forward(lc, ones(DG_SHAPE(3, 6)), NULL, NULL, &r), "cell input size", "LSTMCell (5, 4)",
            "input must be [N, 5] or [5]", "[3, 6]");
    expect3(dg_nn_rnn_cell_forward(gc, x, NULL, ones(DG_SHAPE(3, 4)), &r), "GRUCell cx", "GRUCell (5, 4)",
            "only an LSTMCell has one", "[3, 4]");
    expect3(dg_nn_rnn_cell_forward(gc, dg_ones(DG_SHAPE(3, 5), DG_F16), NULL, NULL, &r), "cell float16", "GRUCell (5, 4)",
            "float16", "[3, 5]");
    expect3(dg_nn_rnn_cell_forward(lc, x, dg_ones(DG_SHAPE(3, 4), DG_F64), NULL, &r), "cell f64 hx", "LSTMCell (5, 4)", "hx [3, 4] is float64",
            "float64");
    expect3(dg_nn_rnn_cell_forward(dg_nn_linear(2, 2), x, NULL, NULL, &r), "not a cell", "Linear",
            "not an RNNCell, LSTMCell or GRUCell", NULL);
    dg_layer_free(lc);
    dg_layer_free(gc);
    dg_scope_end(s);
}

/* dg_rnn itself: the op and mode named, and every shape */
Test(rnn_errors, functional_op) {
    dg_clear_error();
    dg_scope *s = dg_scope_begin();
    dg_rnn_params p = dg_rnn_default_params();
    dg_rnn_result r;
    dg_tensor *x = ones(DG_SHAPE(7, 3, 5)), *wih = ones(DG_SHAPE(16, 5)), *whh = ones(DG_SHAPE(16, 4));
    cr_assert_eq(dg_rnn(x, NULL, NULL, wih, whh, NULL, NULL, NULL, p, &r), 0, "%s", dg_last_error());
    expect3(dg_rnn(dg_ones(DG_SHAPE(7, 3, 5), DG_F16), NULL, NULL, wih, whh, NULL, NULL, NULL, p, &r), "float16 x", "rnn (LSTM)",
            "float32 or float64, got float16 [7, 3, 5]", NULL);
    cr_assert_null(r.output, "no result after a failure");
    expect3(dg_rnn(x, NULL, NULL, dg_ones(DG_SHAPE(16, 5), DG_F64), whh, NULL, NULL, NULL, p, &r), "f64 weight", "rnn (LSTM)",
            "weight_ih is float64", "input [7, 3, 5] is float32");
    expect3(dg_rnn(x, NULL, NULL, ones(DG_SHAPE(16, 6)), whh, NULL, NULL, NULL, p, &r), "weight_ih width", "rnn (LSTM)",
            "weight_ih must be [16, 5], got [16, 6]", "input [7, 3, 5]");
    expect3(dg_rnn(x, NULL, NULL, wih, ones(DG_SHAPE(15, 4)), NULL, NULL, NULL, p, &r), "weight_hh rows", "rnn (LSTM)",
            "weight_hh must be [4 * hidden_size, hidden_size], got [15, 4]", NULL);
    expect3(dg_rnn(x, ones(DG_SHAPE(2, 4)), NULL, wih, whh, NULL, NULL, NULL, p, &r), "h0", "rnn (LSTM)",
            "h0 must be [3, 4], got [2, 4]", NULL);
    expect3(dg_rnn(x, NULL, NULL, wih, whh, ones(DG_SHAPE(12)), NULL, NULL, p, &r), "bias", "rnn (LSTM)",
            "bias_ih must be [16], got [12]", NULL);
    expect3(dg_rnn(ones(DG_SHAPE(3, 5)), NULL, NULL, wih, whh, NULL, NULL, NULL, p, &r), "2-D x", "rnn (LSTM)",
            "[T, N, input_size], got [3, 5]", NULL);
    expect3(dg_rnn(x, NULL, NULL, wih, whh, NULL, NULL, lens(7, 8, 1), p, &r), "length 8", "rnn (LSTM)", "lengths[1] = 8",
            "[1, 7]");
    p.mode = DG_RNN_GRU;
    expect3(dg_rnn(x, NULL, ones(DG_SHAPE(3, 4)), ones(DG_SHAPE(12, 5)), ones(DG_SHAPE(12, 4)), NULL, NULL, NULL, p, &r), "GRU c0",
            "rnn (GRU)", "c0 is given but only an LSTM has a cell state", NULL);
    dg_rnn_params lit = { .mode = DG_RNN_LSTM };
    cr_assert(dg_rnn(x, NULL, NULL, wih, whh, NULL, NULL, NULL, lit, &r) < 0);
    expect_error_contains("literal params", "rnn", "dg_rnn_default_params");
    cr_assert_eq(dg_rnn(x, NULL, NULL, wih, whh, NULL, NULL, NULL, p, NULL), DG_EINVAL);
    expect_error_contains("NULL out", "out is NULL", NULL);
    dg_scope_end(s);
}
