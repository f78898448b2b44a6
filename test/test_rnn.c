/* test/test_rnn.c — the recurrent layers and cells against PyTorch 1.13
 * (test/goldens/rnn_goldens.safetensors, made by make_rnn_goldens.py): every option (modes,
 * layers, directions, batch_first, bias, h0/c0 given or not, lengths sorted or not, unbatched,
 * cells), forward values and the gradients of every input and parameter, in float64 (to
 * ~1e-12) and float32. The errors a bad call gets: test/test_rnn_errors.c; the op's finite
 * differences: the registry harness (test/registry_cases.h); gpu:0: test/gpu/test_gpu_rnn.c. */
#include "test_util.h"
#include "rnn_goldens.h"

#define gget rg_get

/* a copy of golden tensor `what` in dtype dt, requiring grad when asked (NULL when absent) */
static dg_tensor *leaf(const dg_tensor_dict *d, const char *c, const char *what, dg_dtype dt, bool grad) {
    dg_tensor *g = gget(d, c, what);
    if (!g) return NULL;
    dg_tensor *t = dg_clone(dg_cast(g, dt));
    if (grad) dg_set_requires_grad(t, true);
    return t;
}

static double cmp(const char *c, const char *what, const dg_tensor *got, const dg_tensor *want, double tol) {
    cr_assert(got, "%s: %s missing (%s)", c, what, dg_last_error());
    cr_assert(want, "%s: golden %s missing", c, what);
    char gs[64], ws[64];
    dg_shape_str(got, gs, sizeof gs);
    dg_shape_str(want, ws, sizeof ws);
    cr_assert_str_eq(gs, ws, "%s: %s has shape %s, PyTorch %s", c, what, gs, ws);
    double e = max_rel_err(got, want, 1e-3);
    cr_expect(e <= tol, "%s: %s max relative error %.3g > %.g", c, what, e, tol);
    return e;
}

static void run_case(const dg_tensor_dict *d, const char *c, dg_dtype dt, double tol) {
    dg_scope *s = dg_scope_begin();
    bool cell, sorted_;
    dg_layer *l = rg_layer(d, c, dt, &cell, &sorted_);
    int np = 0;
    dg_named_tensor *ps = dg_layer_named_parameters(l, &np);
    dg_tensor *x = leaf(d, c, "x", dt, true), *h0 = leaf(d, c, "h0", dt, true), *c0 = leaf(d, c, "c0", dt, true);
    dg_tensor *len = gget(d, c, "lengths");
    dg_rnn_result r;
    int rc = cell ? dg_nn_rnn_cell_forward(l, x, h0, c0, &r) : dg_nn_rnn_forward(l, x, h0, c0, len, sorted_, &r);
    cr_assert_eq(rc, 0, "%s: forward: %s", c, dg_last_error());
    cmp(c, "out", r.output, gget(d, c, "out"), tol);
    dg_tensor *loss = dg_sum_all(dg_mul(r.output, dg_cast(gget(d, c, "gout"), dt)));
    if (!cell) {
        cmp(c, "h_n", r.h_n, gget(d, c, "hn"), tol);
        loss = dg_add(loss, dg_sum_all(dg_mul(r.h_n, dg_cast(gget(d, c, "ghn"), dt))));
    }
    if (r.c_n) {
        cmp(c, "c_n", r.c_n, gget(d, c, "cn"), tol);
        loss = dg_add(loss, dg_sum_all(dg_mul(r.c_n, dg_cast(gget(d, c, "gcn"), dt))));
    }
    cr_assert_eq(dg_backward(loss), 0, "%s: backward: %s", c, dg_last_error());
    cmp(c, "grad x", dg_grad(x), gget(d, c, "grad_x"), tol);
    if (h0) cmp(c, "grad h0", dg_grad(h0), gget(d, c, "grad_h0"), tol);
    if (c0) cmp(c, "grad c0", dg_grad(c0), gget(d, c, "grad_c0"), tol);
    for (int i = 0; i < np; i++) {
        char k[96];
        snprintf(k, sizeof k, "grad.%s", ps[i].name);
        cmp(c, k, dg_grad(ps[i].tensor), gget(d, c, k), tol);
    }
    free(ps);
    dg_layer_free(l);
    dg_tensor_free(x);
    if (h0) dg_tensor_free(h0);
    if (c0) dg_tensor_free(c0);
    dg_scope_end(s);
}

Test(rnn, golden_f64) {
    dg_tensor_dict *d = dg_load_safetensors(RNN_GOLDENS);
    cr_assert(d, "%s", dg_last_error());
    for (int i = 0; i < RNN_N_CASES; i++) run_case(d, RNN_CASES[i], DG_F64, 1e-10);
    dg_tensor_dict_free(d);
}

Test(rnn, golden_f32) {
    dg_tensor_dict *d = dg_load_safetensors(RNN_GOLDENS);
    cr_assert(d, "%s", dg_last_error());
    for (int i = 0; i < RNN_N_CASES; i++) run_case(d, RNN_CASES[i], DG_F32, 2e-4);
    dg_tensor_dict_free(d);
}
