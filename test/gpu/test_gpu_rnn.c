/* test/gpu/test_gpu_rnn.c — the recurrent layers and cells on gpu:0 against PyTorch 1.13's
 * goldens (test/goldens/rnn_goldens.safetensors, the cases of test/test_rnn.c): the layer built
 * on the CPU with torch's parameters, moved with dg_layer_to, inputs, h0 and c0 on gpu:0, lengths
 * on the CPU (as pack_padded_sequence takes them); output, h_n, c_n and every gradient compared
 * with torch's in float64 and float32, each checked to live on the device. Then one training
 * step (a 2-layer bidirectional batch_first LSTM with h0, c0 and unsorted lengths, + Linear,
 * MSE, Adam) on the CPU and on gpu:0 from the same state. */
#include "gpu_compare.h"
#include "../rnn_goldens.h"

#define gget rg_get

/* golden `what` in dtype dt on gpu:0 as a fresh leaf (NULL when the case has none) */
static dg_tensor *gpu_leaf(const dg_tensor_dict *d, const char *c, const char *what, dg_dtype dt, bool grad) {
    dg_tensor *g = gget(d, c, what);
    return g ? gt_to_gpu(dg_cast(g, dt), grad, c) : NULL;
}

static void cmp(const char *c, const char *what, const dg_tensor *got, const dg_tensor *want, gt_tol tol) {
    cr_assert(got, "%s: %s missing (%s)", c, what, dg_last_error());
    cr_assert(want, "%s: golden %s missing", c, what);
    cr_assert_eq(dg_ndim(got), dg_ndim(want), "%s: %s has %d axes, PyTorch %d", c, what, dg_ndim(got), dg_ndim(want));
    for (int i = 0; i < dg_ndim(got); i++)
        cr_assert_eq(dg_dim(got, i), dg_dim(want, i), "%s: %s axis %d is %lld, PyTorch %lld", c, what, i, (long long)dg_dim(got, i),
                     (long long)dg_dim(want, i));
    gt_expect_on_gpu(c, what, got);
    gt_compare(c, what, dg_cast(want, dg_dtype_of(got)), got, tol);   /* torch's value (in the result's dtype) as the reference */
}

static void run_case(const dg_tensor_dict *d, const char *c, dg_dtype dt, gt_tol tol) {
    dg_scope *s = dg_scope_begin();
    bool cell, sorted_;
    dg_layer *l = rg_layer(d, c, dt, &cell, &sorted_);
    int np = 0;
    dg_named_tensor *ps;
    cr_assert_eq(dg_layer_to(l, gt_dut()), 0, "%s: to %s: %s", c, gt_dut_name(), dg_last_error());
    ps = dg_layer_named_parameters(l, &np);
    for (int i = 0; i < np; i++) gt_expect_on_gpu(c, ps[i].name, ps[i].tensor);
    dg_tensor *x = gpu_leaf(d, c, "x", dt, true), *h0 = gpu_leaf(d, c, "h0", dt, true), *c0 = gpu_leaf(d, c, "c0", dt, true);
    dg_tensor *len = gget(d, c, "lengths");   /* stays on the CPU */
    dg_rnn_result r;
    int rc = cell ? dg_nn_rnn_cell_forward(l, x, h0, c0, &r) : dg_nn_rnn_forward(l, x, h0, c0, len, sorted_, &r);
    cr_assert_eq(rc, 0, "%s: forward on %s: %s", c, gt_dut_name(), dg_last_error());
    cmp(c, "output", r.output, gget(d, c, "out"), tol);
    dg_tensor *loss = dg_sum_all(dg_mul(r.output, gpu_leaf(d, c, "gout", dt, false)));
    if (!cell) {
        cmp(c, "h_n", r.h_n, gget(d, c, "hn"), tol);
        loss = dg_add(loss, dg_sum_all(dg_mul(r.h_n, gpu_leaf(d, c, "ghn", dt, false))));
    }
    if (r.c_n) {
        cmp(c, "c_n", r.c_n, gget(d, c, "cn"), tol);
        loss = dg_add(loss, dg_sum_all(dg_mul(r.c_n, gpu_leaf(d, c, "gcn", dt, false))));
    }
    cr_assert_eq(dg_backward(loss), 0, "%s: backward on %s: %s", c, gt_dut_name(), dg_last_error());
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
    dg_scope_end(s);
}

/* float64: the GPU's GEMMs sum in another order than torch's CPU run, nothing more */
#define TOL_F64 { 1e-10, 1e-12, false }
/* float32: a few hundred rounding steps through the recurrence, forward and back */
#define TOL_F32 { 2e-4, 2e-5, false }

static void golden_cases(dg_dtype dt, gt_tol tol) {
    gt_gpu_begin();
    dg_tensor_dict *d = dg_load_safetensors(RNN_GOLDENS);
    cr_assert(d, "%s", dg_last_error());
    for (int i = 0; i < RNN_N_CASES; i++) run_case(d, RNN_CASES[i], dt, tol);
    dg_tensor_dict_free(d);
}

Test(gpu_rnn, golden_f64) { golden_cases(DG_F64, (gt_tol)TOL_F64); }
Test(gpu_rnn, golden_f32) { golden_cases(DG_F32, (gt_tol)TOL_F32); }

/* ---- one training step, CPU vs gpu:0 ---- */
static const dg_layer_class step_class = DG_LAYER_CLASS("LSTMStep");
static dg_layer *make_step_model(void) {
    dg_nn_rnn_params rp = dg_nn_rnn_default_params();
    rp.num_layers = 2;
    rp.bidirectional = true;
    rp.batch_first = true;
    dg_layer *l = dg_layer_new(&step_class, NULL, NULL, NULL);
    cr_assert(l && dg_layer_add_sublayer(l, "lstm", dg_nn_rnn(DG_RNN_LSTM, 6, 5, rp)) == 0 &&
                  dg_layer_add_sublayer(l, "fc", dg_nn_linear(10, 3)) == 0,
              "step model: %s", dg_last_error());
    return l;
}

#define TOL_STEP { 1e-4, 1e-5, true }

Test(gpu_rnn, lstm_adam_training_step) {
    gt_gpu_begin();
    const uint64_t seed = 4242;
    gt_use("cpu");
    dg_manual_seed(seed);
    dg_layer *mc = make_step_model();
    gt_use(gt_dut_name());
    dg_manual_seed(seed);
    dg_layer *mg = make_step_model();
    gt_compare_state("lstm step", "initial", mc, mg, (gt_tol){ 1e-6, 1e-7, false });
    gt_copy_state("lstm step", mc, mg);

    gt_use("cpu");
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(seed + 1);
    dg_tensor *xc = dg_randn(DG_SHAPE(4, 7, 6), DG_F32), *tc = dg_randn(DG_SHAPE(4, 7, 3), DG_F32);
    dg_tensor *hc = dg_randn(DG_SHAPE(4, 4, 5), DG_F32), *cc = dg_randn(DG_SHAPE(4, 4, 5), DG_F32);
    dg_tensor *len = dg_from_data(DG_SHAPE(4), DG_I64, (int64_t[]){ 5, 7, 2, 6 });   /* unsorted, on the CPU for both */
    dg_tensor *x[2] = { xc, gt_to_gpu(xc, false, "lstm step") }, *t[2] = { tc, gt_to_gpu(tc, false, "lstm step") };
    dg_tensor *h[2] = { hc, gt_to_gpu(hc, false, "lstm step") }, *c[2] = { cc, gt_to_gpu(cc, false, "lstm step") };
    dg_layer *m[2] = { mc, mg };
    const char *dev[2] = { "cpu", gt_dut_name() };
    dg_tensor *loss[2], *out[2], *hn[2], *cn[2];
    dg_optimizer *o[2];
    for (int k = 0; k < 2; k++) {
        gt_use(dev[k]);
        int n = 0;
        dg_tensor **ps = dg_layer_parameters(m[k], &n);
        cr_assert(ps && n == 18, "parameters on %s: %d (%s)", dev[k], n, dg_last_error());
        dg_adam_params ap = dg_adam_default_params();
        ap.lr = 0.01;
        ap.weight_decay = 1e-3;
        o[k] = dg_adam(ps, n, ap);
        free(ps);
        cr_assert(o[k], "adam on %s: %s", dev[k], dg_last_error());
        dg_rnn_result r;
        cr_assert_eq(dg_nn_rnn_forward(dg_layer_sublayer(m[k], "lstm"), x[k], h[k], c[k], len, false, &r), 0, "lstm on %s: %s",
                     dev[k], dg_last_error());
        out[k] = dg_forward(dg_layer_sublayer(m[k], "fc"), r.output);
        hn[k] = r.h_n;
        cn[k] = r.c_n;
        loss[k] = dg_add(dg_mse_loss(out[k], t[k]), dg_mean_all(dg_mul(r.h_n, r.c_n)));
        cr_assert(loss[k], "loss on %s: %s", dev[k], dg_last_error());
        cr_assert_eq(dg_backward(loss[k]), 0, "backward on %s: %s", dev[k], dg_last_error());
    }
    gt_use("cpu");
    gt_expect_on_gpu("lstm step", "output", out[1]);
    gt_compare("lstm step", "output", out[0], out[1], (gt_tol)TOL_STEP);
    gt_compare("lstm step", "h_n", hn[0], hn[1], (gt_tol)TOL_STEP);
    gt_compare("lstm step", "c_n", cn[0], cn[1], (gt_tol)TOL_STEP);
    gt_compare("lstm step", "loss", loss[0], loss[1], (gt_tol)TOL_STEP);
    gt_compare_param_grads("lstm step", mc, mg, (gt_tol)TOL_STEP);
    for (int k = 0; k < 2; k++) {
        gt_use(dev[k]);
        cr_assert_eq(dg_optimizer_step(o[k]), 0, "adam step on %s: %s", dev[k], dg_last_error());
        cr_assert_eq(dg_optimizer_clear_grad(o[k]), 0, "%s", dg_last_error());
    }
    gt_use("cpu");
    gt_compare_state("lstm step", "after the step:", mc, mg, (gt_tol)TOL_STEP);
    dg_optimizer_free(o[0]);
    dg_optimizer_free(o[1]);
    dg_scope_end(s);
    dg_layer_free(mc);
    dg_layer_free(mg);
}
