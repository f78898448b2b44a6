/* test/test_conv_pool_ext.c — the conv/pool parity ops against PyTorch (test/goldens/cpx_*.txt,
 * written by test/goldens/make_conv_pool_goldens.py) in f32 and f64: conv_transpose2d, conv1d,
 * max_pool2d with dilation and indices, avg_pool2d with divisor_override, adaptive_max_pool2d
 * and the 1-d pools; values, gradients of sum(out * gout) and torch's indices (exactly).
 * Tolerances and the relative-error floor are test/test_golden.c's. Finite-difference checks
 * and argument errors are in test/test_conv_pool_ext_grad.c. */
#include "golden_check.h"

enum { K_CT, K_C1, K_MP2, K_AP2, K_AMP2, K_MP1, K_AP1, K_AMP1, K_AAP1 };

static int64_t ip(golden *g, int64_t i) { return param(g, "iparams", i); }

static bool has(golden *g, const char *name) {
    for (int i = 0; i < g->n; i++) if (strcmp(g->names[i], name) == 0) return true;
    return false;
}

/* The op of the file on x, w, b; *idx gets the indices where the op has them. */
static dg_tensor *apply(golden *g, dg_tensor *x, dg_tensor *w, dg_tensor *b, dg_tensor **idx) {
    int kind = (int)ip(g, 0);
    *idx = NULL;
    switch (kind) {
    case K_CT: {
        dg_conv_transpose2d_params p = dg_conv_transpose2d_default_params();
        for (int i = 0; i < 2; i++) {
            p.stride[i] = (int)ip(g, 1 + i);
            p.padding[i] = (int)ip(g, 3 + i);
            p.output_padding[i] = (int)ip(g, 5 + i);
            p.dilation[i] = (int)ip(g, 7 + i);
        }
        p.groups = (int)ip(g, 9);
        return dg_conv_transpose2d(x, w, b, p);
    }
    case K_C1: {
        dg_conv1d_params p = dg_conv1d_default_params();
        p.stride = (int)ip(g, 1), p.padding = (int)ip(g, 2), p.dilation = (int)ip(g, 3), p.groups = (int)ip(g, 4);
        return dg_conv1d(x, w, b, p);
    }
    case K_MP2: case K_AP2: {
        dg_pool2d_params p = dg_pool2d_default_params();
        for (int i = 0; i < 2; i++) {
            p.kernel[i] = (int)ip(g, 1 + i);
            p.stride[i] = (int)ip(g, 3 + i);
            p.padding[i] = (int)ip(g, 5 + i);
        }
        if (kind == K_MP2) {
            p.dilation[0] = (int)ip(g, 7);
            p.dilation[1] = (int)ip(g, 8);
            p.ceil_mode = ip(g, 9) != 0;
            return dg_max_pool2d_with_indices(x, p, idx);
        }
        p.ceil_mode = ip(g, 7) != 0;
        p.count_include_pad = ip(g, 8) != 0;
        p.divisor_override = (int)ip(g, 9);
        return dg_avg_pool2d(x, p);
    }
    case K_AMP2: return dg_adaptive_max_pool2d(x, (int)ip(g, 1), (int)ip(g, 2), idx);
    case K_MP1: case K_AP1: {
        dg_pool1d_params p = dg_pool1d_default_params();
        p.kernel = (int)ip(g, 1);
        p.stride = (int)ip(g, 2);
        p.padding = (int)ip(g, 3);
        if (kind == K_MP1) {
            p.dilation = (int)ip(g, 4);
            p.ceil_mode = ip(g, 5) != 0;
            return dg_max_pool1d_with_indices(x, p, idx);
        }
        p.ceil_mode = ip(g, 4) != 0;
        p.count_include_pad = ip(g, 5) != 0;
        return dg_avg_pool1d(x, p);
    }
    case K_AMP1: return dg_adaptive_max_pool1d(x, (int)ip(g, 1), idx);
    case K_AAP1: return dg_adaptive_avg_pool1d(x, (int)ip(g, 1));
    }
    cr_assert_fail("unknown kind %d", kind);
    return NULL;
}

static void run_dtype(const char *file, golden *g, dg_dtype dt) {
    dg_scope *s = dg_scope_begin();
    const char *names[3] = { "x", "w", "b" };
    dg_tensor *in[3] = { NULL, NULL, NULL };
    for (int i = 0; i < 3; i++)
        if (has(g, names[i])) {
            in[i] = dg_detach(dg_cast(golden_get(g, names[i]), dt));
            dg_set_requires_grad(in[i], true);
        }
    dg_tensor *idx = NULL;
    dg_tensor *out = apply(g, in[0], in[1], in[2], &idx);
    cr_assert(out, "%s: op failed: %s", file, dg_last_error());
    cr_assert_eq(dg_dtype_of(out), dt, "%s: output dtype", file);
    double eo = expect_close(file, "out", out, golden_get(g, "out"), TOL_VALUE), eg = 0;
    if (has(g, "indices")) {
        cr_assert(idx && dg_dtype_of(idx) == DG_I64, "%s: no I64 indices", file);
        expect_close(file, "indices", idx, golden_get(g, "indices"), 0.0);
    }
    dg_tensor_free(idx);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(out, dg_cast(golden_get(g, "gout"), dt)))), 0, "%s: backward: %s", file,
                 dg_last_error());
    for (int i = 0; i < 3; i++) {
        if (!in[i]) continue;
        char key[16];
        snprintf(key, sizeof key, "grad_%s", names[i]);
        eg = fmax(eg, expect_close(file, key, dg_grad(in[i]), golden_get(g, key), TOL_GRAD));
    }
    cr_log_info("%s (%s): out %.2e, grad %.2e (max relative error)", file, dg_dtype_name(dt), eo, eg);
    dg_scope_end(s);
}

static void run_case(const char *file) {
    char path[256];
    snprintf(path, sizeof path, "test/goldens/%s", file);
    golden *g = golden_load(path);
    run_dtype(file, g, DG_F32);
    run_dtype(file, g, DG_F64);
    golden_free(g);
}

Test(conv_pool_ext_golden, conv_transpose2d_stride_output_padding) { run_case("cpx_conv_transpose2d_s21_op.txt"); }
Test(conv_pool_ext_golden, conv_transpose2d_groups_dilation) { run_case("cpx_conv_transpose2d_groups_dil.txt"); }
Test(conv_pool_ext_golden, conv_transpose2d_output_padding_past_stride) { run_case("cpx_conv_transpose2d_op_dil.txt"); }
Test(conv_pool_ext_golden, conv1d_stride_pad_dilation_groups_bias) { run_case("cpx_conv1d.txt"); }
Test(conv_pool_ext_golden, conv1d_plain) { run_case("cpx_conv1d_plain.txt"); }
Test(conv_pool_ext_golden, max_pool2d_dilation_ties) { run_case("cpx_max_pool2d_dil.txt"); }
Test(conv_pool_ext_golden, max_pool2d_dilation_ceil) { run_case("cpx_max_pool2d_dil_ceil.txt"); }
Test(conv_pool_ext_golden, max_pool2d_indices_ceil_ties) { run_case("cpx_max_pool2d_indices.txt"); }
Test(conv_pool_ext_golden, avg_pool2d_divisor_override) { run_case("cpx_avg_pool2d_divisor.txt"); }
Test(conv_pool_ext_golden, avg_pool2d_divisor_override_exclusive) { run_case("cpx_avg_pool2d_divisor_excl.txt"); }
Test(conv_pool_ext_golden, adaptive_max_pool2d_7x5_to_3x4) { run_case("cpx_adaptive_max_pool2d_7x5_to_3x4.txt"); }
Test(conv_pool_ext_golden, adaptive_max_pool2d_4x6_to_3x5) { run_case("cpx_adaptive_max_pool2d_4x6_to_3x5.txt"); }
Test(conv_pool_ext_golden, max_pool1d_dilation_ceil) { run_case("cpx_max_pool1d.txt"); }
Test(conv_pool_ext_golden, avg_pool1d_ceil_include_pad) { run_case("cpx_avg_pool1d.txt"); }
Test(conv_pool_ext_golden, avg_pool1d_exclude_pad) { run_case("cpx_avg_pool1d_excl.txt"); }
Test(conv_pool_ext_golden, adaptive_max_pool1d) { run_case("cpx_adaptive_max_pool1d.txt"); }
Test(conv_pool_ext_golden, adaptive_avg_pool1d) { run_case("cpx_adaptive_avg_pool1d.txt"); }
