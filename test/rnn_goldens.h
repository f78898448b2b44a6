/* test/rnn_goldens.h — what the CPU and GPU golden tests of the recurrent layers share
 * (test/test_rnn.c, test/gpu/test_gpu_rnn.c): the cases of test/goldens/rnn_goldens.safetensors
 * (made by make_rnn_goldens.py, which documents the records) and the layer of a case, built
 * on the CPU with PyTorch's parameters copied in. */
#ifndef DG_TEST_RNN_GOLDENS_H
#define DG_TEST_RNN_GOLDENS_H

#include <dygraph.h>
#include <criterion/criterion.h>
#include <stdio.h>

#define RNN_GOLDENS "test/goldens/rnn_goldens.safetensors"

static const char *const RNN_CASES[] = {
    "lstm_1l", "lstm_2l_bi_bf_len", "lstm_unbatched", "gru_2l_bi_unsorted", "gru_1l_nobias", "rnn_tanh_2l_nobias",
    "rnn_relu_bi", "rnn_tanh_len", "cell_lstm", "cell_lstm_zero", "cell_gru", "cell_tanh", "cell_relu_unbatched",
};
#define RNN_N_CASES ((int)(sizeof RNN_CASES / sizeof *RNN_CASES))

/* record `what` of case c (borrowed), NULL when the case has none */
static inline dg_tensor *rg_get(const dg_tensor_dict *d, const char *c, const char *what) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", c, what);
    return dg_tensor_dict_get(d, k);
}

/* The layer or cell of case c in dtype dt with torch's parameters; *cell and *enforce_sorted from
 * the case's cfg. Every parameter must have a torch counterpart of the same name. */
static inline dg_layer *rg_layer(const dg_tensor_dict *d, const char *c, dg_dtype dt, bool *cell, bool *enforce_sorted) {
    dg_tensor *cfg = rg_get(d, c, "cfg");
    cr_assert(cfg, "%s: no cfg", c);
    int64_t v[12];
    cr_assert_eq(dg_to_host(cfg, v, sizeof v), 0, "%s", dg_last_error());
    *cell = v[11] != 0;
    *enforce_sorted = v[8] != 0;
    dg_nn_rnn_params p = dg_nn_rnn_default_params();
    p.bias = v[4] != 0;
    p.dtype = dt;
    if (!*cell) {
        p.num_layers = (int)v[1];
        p.bidirectional = v[2] != 0;
        p.batch_first = v[3] != 0;
    }
    dg_rnn_mode mode = (dg_rnn_mode)v[0];
    dg_layer *l = *cell ? dg_nn_rnn_cell(mode, v[9], v[10], p) : dg_nn_rnn(mode, v[9], v[10], p);
    cr_assert(l, "%s: constructor: %s", c, dg_last_error());
    int np = 0;
    dg_named_tensor *ps = dg_layer_named_parameters(l, &np);
    for (int i = 0; i < np; i++) {
        char k[96];
        snprintf(k, sizeof k, "p.%s", ps[i].name);
        dg_tensor *g = rg_get(d, c, k);
        cr_assert(g, "%s: our parameter %s has no torch counterpart", c, ps[i].name);
        dg_no_grad_begin();
        int rc = dg_copy_(ps[i].tensor, g);
        dg_no_grad_end();
        cr_assert_eq(rc, 0, "%s: %s: %s", c, ps[i].name, dg_last_error());
    }
    free(ps);
    return l;
}

#endif
