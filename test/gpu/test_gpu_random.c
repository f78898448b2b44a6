/* test/gpu/test_gpu_random.c — the seeded Philox stream gives the same numbers on gpu:0 as on the
 * CPU: dropout masks (train, eval, p = 0 and 1), rand/randn/uniform/normal in f32 and f64 (odd
 * counts, since normals come in Box-Muller pairs), uniform_/normal_, the torch.nn.init
 * initialisers, consecutive draws (the counter must advance alike), and the deterministic
 * creation functions (zeros, ones, full, scalar, arange, from_data, *_like). */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { (void)in; return (expr); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define NONE IN({ 0 })
/* the same 32-bit draws through log/sqrt/cos in float (GPU) or another libm (CPU): a few ulp */
#define TOL_RNG { 1e-5, 1e-6, false }
#define TOL_RNG64 { 1e-12, 1e-12, false }

F(f_dropout_half, dg_dropout(in[0], 0.5, true))
F(f_dropout_01, dg_dropout(in[0], 0.1, true))
F(f_dropout_eval, dg_dropout(in[0], 0.5, false))
F(f_dropout_p0, dg_dropout(in[0], 0.0, true))
F(f_dropout_p1, dg_dropout(in[0], 1.0, true))
/* two masks in a row: the second must come from the same, advanced, stream position */
F(f_dropout_twice, dg_dropout(dg_dropout(in[0], 0.3, true), 0.3, true))

F(f_rand, dg_rand(DG_SHAPE(1000, 3), DG_F32))
F(f_randn_odd, dg_randn(DG_SHAPE(1001), DG_F32))
F(f_uniform, dg_uniform(DG_SHAPE(7, 9), -2, 3, DG_F32))
F(f_normal, dg_normal(DG_SHAPE(5, 13), 1.0, 0.5, DG_F32))
F(f_rand64, dg_rand(DG_SHAPE(333), DG_F64))
F(f_randn64, dg_randn(DG_SHAPE(17, 3), DG_F64))
static dg_tensor *f_consecutive(dg_tensor *const *in) {
    (void)in;
    dg_tensor *p[3] = { dg_rand(DG_SHAPE(3), DG_F32), dg_randn(DG_SHAPE(5), DG_F32), dg_uniform(DG_SHAPE(4), 1, 2, DG_F32) };
    return dg_concat(p, 3, 0);
}
/* in-place fills of a tensor made on the current device */
#define FILL(name, call) static dg_tensor *name(dg_tensor *const *in) { \
        (void)in; dg_tensor *t = dg_empty(DG_SHAPE(16, 24), DG_F32); return t && (call) == 0 ? t : NULL; }
FILL(f_uniform_, dg_uniform_(t, -0.5, 0.25))
FILL(f_normal_, dg_normal_(t, -1.0, 2.0))
FILL(f_init_constant, dg_nn_init_constant_(t, 0.125))
FILL(f_init_zeros, dg_nn_init_zeros_(t))
FILL(f_init_ones, dg_nn_init_ones_(t))
FILL(f_init_uniform, dg_nn_init_uniform_(t, -3, 3))
FILL(f_init_normal, dg_nn_init_normal_(t, 0.5, 0.1))
FILL(f_init_xavier_uniform, dg_nn_init_xavier_uniform_(t, 1.0))
FILL(f_init_xavier_normal, dg_nn_init_xavier_normal_(t, 2.0))
static dg_nn_kaiming_params kaiming_a(double a) {
    dg_nn_kaiming_params p = dg_nn_kaiming_default_params();
    p.a = a;
    return p;
}
static dg_nn_kaiming_params kaiming_fan_out_relu(void) {
    dg_nn_kaiming_params p = dg_nn_kaiming_default_params();
    p.mode = DG_FAN_OUT;
    p.nonlinearity = DG_NONLIN_RELU;
    return p;
}
FILL(f_init_kaiming_uniform, dg_nn_init_kaiming_uniform_(t, kaiming_a(2.23606797749979)))
FILL(f_init_kaiming_normal, dg_nn_init_kaiming_normal_(t, kaiming_fan_out_relu()))

F(f_zeros, dg_zeros(DG_SHAPE(3, 5), DG_F32))
F(f_ones, dg_ones(DG_SHAPE(2, 7), DG_F64))
F(f_full, dg_full(DG_SHAPE(4, 3), -2.5, DG_F32))
F(f_full_i64, dg_full(DG_SHAPE(4), 7, DG_I64))
F(f_scalar, dg_scalar(3.75, DG_F32))
F(f_arange, dg_arange(-3, 5, 0.5, DG_F32))
F(f_arange_i64, dg_arange(0, 10, 3, DG_I64))
F(f_from_data, dg_from_data(DG_SHAPE(2, 3), DG_F32, (const float[]){ 1.5f, -2, 0.25f, 1e-3f, 3e5f, -7 }))
F(f_zeros_like, dg_add(dg_zeros_like(in[0]), dg_mul_scalar(dg_ones_like(in[0]), 2.0)))

static const gt_op_case cases[] = {
    { "dropout p=0.5 train", f_dropout_half, 1, IN(G(64, 33)), GT_EW, GT_EW },
    { "dropout p=0.1 train [1000,7]", f_dropout_01, 1, IN(G(1000, 7)), GT_EW, GT_EW },
    { "dropout eval (identity)", f_dropout_eval, 1, IN(G(8, 9)), GT_EXACT, GT_EXACT },
    { "dropout p=0 train", f_dropout_p0, 1, IN(G(8, 9)), GT_EXACT, GT_EXACT },
    { "dropout p=1 train", f_dropout_p1, 1, IN(G(8, 9)), GT_EXACT, GT_EXACT },
    { "dropout twice", f_dropout_twice, 1, IN(G(31, 5)), GT_EW, GT_EW },
    { "rand [1000,3]", f_rand, 0, NONE, TOL_RNG, GT_EXACT },
    { "randn [1001]", f_randn_odd, 0, NONE, TOL_RNG, GT_EXACT },
    { "uniform [-2,3)", f_uniform, 0, NONE, TOL_RNG, GT_EXACT },
    { "normal(1, 0.5)", f_normal, 0, NONE, TOL_RNG, GT_EXACT },
    { "rand f64", f_rand64, 0, NONE, TOL_RNG64, GT_EXACT },
    { "randn f64", f_randn64, 0, NONE, TOL_RNG64, GT_EXACT },
    { "consecutive draws", f_consecutive, 0, NONE, TOL_RNG, GT_EXACT },
    { "uniform_", f_uniform_, 0, NONE, TOL_RNG, GT_EXACT },
    { "normal_", f_normal_, 0, NONE, TOL_RNG, GT_EXACT },
    { "nn.init constant_", f_init_constant, 0, NONE, GT_EXACT, GT_EXACT },
    { "nn.init zeros_", f_init_zeros, 0, NONE, GT_EXACT, GT_EXACT },
    { "nn.init ones_", f_init_ones, 0, NONE, GT_EXACT, GT_EXACT },
    { "nn.init uniform_", f_init_uniform, 0, NONE, TOL_RNG, GT_EXACT },
    { "nn.init normal_", f_init_normal, 0, NONE, TOL_RNG, GT_EXACT },
    { "nn.init xavier_uniform_", f_init_xavier_uniform, 0, NONE, TOL_RNG, GT_EXACT },
    { "nn.init xavier_normal_ gain 2", f_init_xavier_normal, 0, NONE, TOL_RNG, GT_EXACT },
    { "nn.init kaiming_uniform_ a=sqrt(5)", f_init_kaiming_uniform, 0, NONE, TOL_RNG, GT_EXACT },
    { "nn.init kaiming_normal_ fan_out relu", f_init_kaiming_normal, 0, NONE, TOL_RNG, GT_EXACT },
    { "zeros", f_zeros, 0, NONE, GT_EXACT, GT_EXACT },
    { "ones f64", f_ones, 0, NONE, GT_EXACT, GT_EXACT },
    { "full", f_full, 0, NONE, GT_EXACT, GT_EXACT },
    { "full i64", f_full_i64, 0, NONE, GT_EXACT, GT_EXACT },
    { "scalar", f_scalar, 0, NONE, GT_EXACT, GT_EXACT },
    { "arange f32", f_arange, 0, NONE, GT_EXACT, GT_EXACT },
    { "arange i64", f_arange_i64, 0, NONE, GT_EXACT, GT_EXACT },
    { "from_data", f_from_data, 0, NONE, GT_EXACT, GT_EXACT },
    { "zeros_like + ones_like", f_zeros_like, 1, IN(G(3, 4)), GT_EXACT, GT_EXACT },
};

GT_TABLE_TESTS(gpu_random, cases, gt_expect_op_matches_cpu, 6000)
