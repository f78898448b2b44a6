/* test/gpu/test_gpu_dtypes.c — CPU vs gpu:0 across the dtypes and schedules each kernel is built
 * for, so every instantiation the backend can launch runs somewhere in the suite: f64 for every
 * unary and binary op and their gradients, casts between every pair of dtypes, raw strided copies
 * of 1-, 4- and 8-byte elements, fills, where, gathers and index adds with i32 and i64 indices,
 * each reduction op under each of the four reduction schedules (one thread per output, one block
 * per output, split rows, columns) in f32 and f64, softmax in f64 by warp and by block, f64
 * losses with i32 labels, an empty GEMM (k = 0), a convolution over an empty input plane (bias
 * only), batch norm in eval mode with gradients, and an f64 optimizer step. */
#include "gpu_compare.h"

#define F(name, expr) static dg_tensor *name(dg_tensor *const *in) { return (expr); }
#define IN(...) { __VA_ARGS__ }
#define NONE { { 0 } }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define G64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), -1, 1 }
#define P64(...) { GT_GRAD64, GT_SHAPE(__VA_ARGS__), 0.2, 2 }     /* positive: log, sqrt, rdiv */
#define INTS(...) { GT_INTF, GT_SHAPE(__VA_ARGS__), -3, 4 }        /* f32 holding -3..3 */
#define LAB(hi, ...) { GT_LABELS, GT_SHAPE(__VA_ARGS__), 0, hi }
#define LAB32(hi, ...) { GT_LABELS32, GT_SHAPE(__VA_ARGS__), 0, hi }
#define MASK(...) { GT_MASK, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define GT_F64 { 1e-12, 1e-13, false }

/* ---- f64 unary ops and their gradient helpers ---- */
F(f_exp, dg_exp(in[0]))
F(f_log, dg_log(in[0]))
F(f_sqrt, dg_sqrt(in[0]))
F(f_abs, dg_abs(in[0]))
F(f_relu, dg_relu(in[0]))
F(f_sigmoid, dg_sigmoid(in[0]))
F(f_tanh, dg_tanh(in[0]))
F(f_gelu, dg_gelu(in[0], false))
F(f_gelu_tanh, dg_gelu(in[0], true))
F(f_leaky, dg_leaky_relu(in[0], 0.1))
F(f_clip, dg_clip(in[0], -0.3, 0.4))
F(f_affine, dg_add_scalar(dg_mul_scalar(in[0], -2.0), 0.5))
F(f_neg, dg_neg(in[0]))
F(f_rdiv, dg_rdiv_scalar(in[0], 3.0))
F(f_pows, dg_pow_scalar(in[0], 2.5))
/* ---- binary ---- */
F(f_add, dg_add(in[0], in[1]))
F(f_sub, dg_sub(in[0], in[1]))
F(f_mul, dg_mul(in[0], in[1]))
F(f_div, dg_div(in[0], in[1]))
F(f_maximum, dg_maximum(in[0], in[1]))
F(f_minimum, dg_minimum(in[0], in[1]))
F(f_pow, dg_pow(in[0], in[1]))
F(f_add_relu, dg_add_relu(in[0], in[1]))
F(f_square_twice, dg_mul(in[0], in[0]))             /* the input's two gradients accumulate */
F(f_greater, dg_greater(in[0], in[1]))
F(f_equal, dg_equal(dg_cast(in[0], DG_I64), dg_cast(in[1], DG_I32)))

/* ---- casts between every pair of dtypes, from integer-valued floats ---- */
#define CAST(name, a, b) F(name, dg_cast(dg_cast(in[0], a), b))
CAST(c_f32_f64, DG_F32, DG_F64) CAST(c_f32_i64, DG_F32, DG_I64) CAST(c_f32_i32, DG_F32, DG_I32) CAST(c_f32_b, DG_F32, DG_BOOL)
CAST(c_f64_f32, DG_F64, DG_F32) CAST(c_f64_i64, DG_F64, DG_I64) CAST(c_f64_i32, DG_F64, DG_I32) CAST(c_f64_b, DG_F64, DG_BOOL)
CAST(c_i64_f32, DG_I64, DG_F32) CAST(c_i64_f64, DG_I64, DG_F64) CAST(c_i64_i32, DG_I64, DG_I32) CAST(c_i64_b, DG_I64, DG_BOOL)
CAST(c_i32_f32, DG_I32, DG_F32) CAST(c_i32_f64, DG_I32, DG_F64) CAST(c_i32_i64, DG_I32, DG_I64) CAST(c_i32_b, DG_I32, DG_BOOL)
CAST(c_b_f32, DG_BOOL, DG_F32) CAST(c_b_f64, DG_BOOL, DG_F64) CAST(c_b_i64, DG_BOOL, DG_I64) CAST(c_b_i32, DG_BOOL, DG_I32)
/* raw strided copies: 1, 4 and 8-byte elements */
#define TCOPY(name, dt) F(name, dg_contiguous(dg_transpose(dg_cast(in[0], dt), 0, 1)))
TCOPY(t_bool, DG_BOOL) TCOPY(t_i32, DG_I32) TCOPY(t_i64, DG_I64) TCOPY(t_f64, DG_F64)
/* fills made on the device itself */
F(fill_i32, dg_full(DG_SHAPE(5, 3), -7, DG_I32))
F(fill_bool, dg_full(DG_SHAPE(4, 6), 1, DG_BOOL))
F(fill_i64, dg_full(DG_SHAPE(9), 123456789012.0, DG_I64))
/* where over 1-byte and 8-byte elements */
F(where_bool, dg_where(in[2], dg_greater(in[0], in[1]), dg_equal(in[0], in[1])))
F(where_i64, dg_where(in[2], dg_cast(in[0], DG_I64), dg_cast(in[1], DG_I64)))
/* gathers over 1- and 8-byte elements with i64 and i32 indices, f64 gradients */
F(isel_bool_64, dg_index_select(dg_greater(in[0], in[1]), in[2], 0))
F(isel_bool_32, dg_index_select(dg_greater(in[0], in[1]), in[2], 1))
F(isel_i64_64, dg_index_select(dg_cast(in[0], DG_I64), in[2], 0))
F(isel_i64_32, dg_index_select(dg_cast(in[0], DG_I64), in[2], 1))
F(isel_f64, dg_index_select(in[0], in[1], 0))
F(gather_bool, dg_gather(dg_greater(in[0], in[1]), in[2], 1))
F(gather_i64, dg_gather(dg_cast(in[0], DG_I64), in[2], 1))
F(gather_f, dg_gather(in[0], in[1], 1))
F(ce, dg_cross_entropy(in[0], in[1]))
/* ---- reductions: each op under each schedule ---- */
static const int last[1] = { -1 }, first[1] = { 0 };
F(r_sum_l, dg_sum(in[0], last, 1, false)) F(r_max_l, dg_max(in[0], last, 1, false)) F(r_min_l, dg_min(in[0], last, 1, false))
F(r_amax_l, dg_argmax(in[0], -1, false)) F(r_amin_l, dg_argmin(in[0], -1, false))
F(r_sum_f, dg_sum(in[0], first, 1, false)) F(r_max_f, dg_max(in[0], first, 1, false)) F(r_min_f, dg_min(in[0], first, 1, false))
F(r_amax_f, dg_argmax(in[0], 0, false)) F(r_amin_f, dg_argmin(in[0], 0, false))
F(sm, dg_softmax(in[0], -1))
F(lsm, dg_log_softmax(in[0], -1))
/* ---- the rest ---- */
F(mm, dg_matmul(in[0], in[1]))
static dg_tensor *conv_empty_plane(dg_tensor *const *in) {
    dg_conv2d_params cvp = dg_conv2d_default_params();
    cvp.padding[0] = cvp.padding[1] = 1;
    return dg_conv2d(in[0], in[1], in[2], cvp);
}
static dg_tensor *avg_ceil(dg_tensor *const *in) {
    dg_pool2d_params plp = dg_pool2d_default_params();
    plp.kernel[0] = plp.kernel[1] = 2;
    plp.ceil_mode = true;
    return dg_avg_pool2d(in[0], plp);
}
static dg_tensor *bn_eval(dg_tensor *const *in) {
    dg_dtype dt = dg_dtype_of(in[0]);
    dg_tensor *rm = dg_full(DG_SHAPE(3), 0.1, dt), *rv = dg_full(DG_SHAPE(3), 1.5, dt);
    return dg_batch_norm(in[0], rm, rv, in[1], in[2], dg_batch_norm_default_params());
}

/* training mode without affine parameters: the running statistics are updated in place (axpy) */
static dg_tensor *bn_train_plain(dg_tensor *const *in) {
    dg_dtype dt = dg_dtype_of(in[0]);
    dg_tensor *rm = dg_full(DG_SHAPE(3), 0.1, dt), *rv = dg_full(DG_SHAPE(3), 1.5, dt);
    dg_batch_norm_params bnp = dg_batch_norm_default_params();
    bnp.training = true;
    bnp.momentum = 0.3;
    dg_tensor *y = dg_batch_norm(in[0], rm, rv, NULL, NULL, bnp);
    return y ? dg_add(y, dg_unsqueeze(dg_unsqueeze(dg_add(rm, rv), -1), -1)) : NULL;
}

#define RED(name, fn, ...) { name, fn, 1, IN(__VA_ARGS__), GT_RED, GT_RED }
#define RED_EX(name, fn, ...) { name, fn, 1, IN(__VA_ARGS__), GT_EXACT, GT_EW }

static const gt_op_case cases[] = {
    { "exp f64", f_exp, 1, IN(G64(6, 7)), GT_F64, GT_F64 },
    { "log f64", f_log, 1, IN(P64(6, 7)), GT_F64, GT_F64 },
    { "sqrt f64", f_sqrt, 1, IN(P64(6, 7)), GT_F64, GT_F64 },
    { "abs f64", f_abs, 1, IN(G64(6, 7)), GT_EXACT, GT_EXACT },
    { "relu f64", f_relu, 1, IN(G64(6, 7)), GT_EXACT, GT_EXACT },
    { "sigmoid f64", f_sigmoid, 1, IN(G64(6, 7)), GT_F64, GT_F64 },
    { "tanh f64", f_tanh, 1, IN(G64(6, 7)), GT_F64, GT_F64 },
    { "gelu f64", f_gelu, 1, IN(G64(6, 7)), GT_F64, GT_F64 },
    { "gelu tanh f64", f_gelu_tanh, 1, IN(G64(6, 7)), GT_F64, GT_F64 },
    { "leaky relu f64", f_leaky, 1, IN(G64(6, 7)), GT_EXACT, GT_EXACT },
    { "clip f64", f_clip, 1, IN(G64(6, 7)), GT_EXACT, GT_EXACT },
    { "affine f64", f_affine, 1, IN(G64(6, 7)), GT_EXACT, GT_EXACT },
    { "neg f32", f_neg, 1, IN(G(6, 7)), GT_EXACT, GT_EXACT },
    { "rdiv f64", f_rdiv, 1, IN(P64(6, 7)), GT_F64, GT_F64 },
    { "pow_scalar f64", f_pows, 1, IN(P64(6, 7)), GT_F64, GT_F64 },
    { "add f64 broadcast", f_add, 2, IN(G64(6, 7), G64(7)), GT_EXACT, GT_EXACT },
    { "sub f64", f_sub, 2, IN(G64(6, 7), G64(6, 7)), GT_EXACT, GT_EXACT },
    { "mul f64", f_mul, 2, IN(G64(6, 7), G64(6, 1)), GT_F64, GT_F64 },
    { "div f64", f_div, 2, IN(G64(6, 7), P64(6, 7)), GT_F64, GT_F64 },
    { "maximum f64", f_maximum, 2, IN(G64(6, 7), G64(6, 7)), GT_EXACT, GT_EXACT },
    { "minimum f64", f_minimum, 2, IN(G64(6, 7), G64(6, 7)), GT_EXACT, GT_EXACT },
    { "pow f64", f_pow, 2, IN(P64(6, 7), G64(6, 7)), GT_F64, GT_F64 },
    { "add_relu f64", f_add_relu, 2, IN(G64(6, 7), G64(6, 7)), GT_EXACT, GT_EXACT },
    { "x*x f64 (gradients accumulate)", f_square_twice, 1, IN(G64(6, 7)), GT_F64, GT_F64 },
    { "greater f64", f_greater, 2, IN(G64(6, 7), G64(6, 7)), GT_EXACT, GT_EXACT },
    { "equal i64 vs i32", f_equal, 2, IN(INTS(6, 7), INTS(6, 7)), GT_EXACT, GT_EXACT },
#define CROW(fn) { "cast " #fn, fn, 1, IN(INTS(5, 6)), GT_EXACT, GT_EXACT }
    CROW(c_f32_f64), CROW(c_f32_i64), CROW(c_f32_i32), CROW(c_f32_b), CROW(c_f64_f32), CROW(c_f64_i64), CROW(c_f64_i32),
    CROW(c_f64_b), CROW(c_i64_f32), CROW(c_i64_f64), CROW(c_i64_i32), CROW(c_i64_b), CROW(c_i32_f32), CROW(c_i32_f64),
    CROW(c_i32_i64), CROW(c_i32_b), CROW(c_b_f32), CROW(c_b_f64), CROW(c_b_i64), CROW(c_b_i32),
    CROW(t_bool), CROW(t_i32), CROW(t_i64), CROW(t_f64),
    { "full i32 on the device", fill_i32, 0, NONE, GT_EXACT, GT_EXACT },
    { "full bool on the device", fill_bool, 0, NONE, GT_EXACT, GT_EXACT },
    { "full i64 on the device", fill_i64, 0, NONE, GT_EXACT, GT_EXACT },
    { "where over bools", where_bool, 3, IN(INTS(5, 6), INTS(5, 6), MASK(5, 6)), GT_EXACT, GT_EXACT },
    { "where over i64", where_i64, 3, IN(INTS(5, 6), INTS(5, 6), MASK(5, 6)), GT_EXACT, GT_EXACT },
    { "index_select bool, i64 index", isel_bool_64, 3, IN(INTS(5, 6), INTS(5, 6), LAB(5, 7)), GT_EXACT, GT_EXACT },
    { "index_select bool, i32 index", isel_bool_32, 3, IN(INTS(5, 6), INTS(5, 6), LAB32(6, 7)), GT_EXACT, GT_EXACT },
    { "index_select i64, i64 index", isel_i64_64, 3, IN(INTS(5, 6), INTS(5, 6), LAB(5, 7)), GT_EXACT, GT_EXACT },
    { "index_select i64, i32 index", isel_i64_32, 3, IN(INTS(5, 6), INTS(5, 6), LAB32(6, 7)), GT_EXACT, GT_EXACT },
    { "index_select f64 (index_add), i64 index", isel_f64, 2, IN(G64(5, 6), LAB(5, 9)), GT_EXACT, GT_F64 },
    { "index_select f64 (index_add), i32 index", isel_f64, 2, IN(G64(5, 6), LAB32(5, 9)), GT_EXACT, GT_F64 },
    { "gather bool", gather_bool, 3, IN(INTS(5, 6), INTS(5, 6), LAB(6, 5, 4)), GT_EXACT, GT_EXACT },
    { "gather i64", gather_i64, 3, IN(INTS(5, 6), INTS(5, 6), LAB32(6, 5, 4)), GT_EXACT, GT_EXACT },
    { "gather f32 (scatter_add), i32 index", gather_f, 2, IN(G(5, 6), LAB32(6, 5, 4)), GT_EXACT, GT_EW },
    { "gather f64 (scatter_add), i64 index", gather_f, 2, IN(G64(5, 6), LAB(6, 5, 4)), GT_EXACT, GT_F64 },
    { "gather f64 (scatter_add), i32 index", gather_f, 2, IN(G64(5, 6), LAB32(6, 5, 4)), GT_EXACT, GT_F64 },
    { "cross entropy f32, i32 labels", ce, 2, IN(G(6, 5), LAB32(5, 6)), GT_RED, GT_RED },
    { "cross entropy f64, i64 labels", ce, 2, IN(G64(6, 5), LAB(5, 6)), GT_RED, GT_RED },
    { "cross entropy f64, i32 labels", ce, 2, IN(G64(6, 5), LAB32(5, 6)), GT_RED, GT_RED },
    /* THREAD: short rows; BLOCK: many long rows; SPLIT: few very long rows; COLUMNS: over the batch */
    RED("sum thread f32", r_sum_l, G(50, 8)), RED("sum block f32", r_sum_l, G(300, 100)),
    RED("sum split f32", r_sum_l, G(3, 9000)), RED("sum columns f32", r_sum_f, G(3000, 5)),
    RED_EX("max thread f32", r_max_l, G(50, 8)), RED_EX("max block f32", r_max_l, G(300, 100)),
    RED_EX("max split f32", r_max_l, G(3, 9000)), RED_EX("max columns f32", r_max_f, G(3000, 5)),
    RED_EX("min thread f32", r_min_l, G(50, 8)), RED_EX("min block f32", r_min_l, G(300, 100)),
    RED_EX("min split f32", r_min_l, G(3, 9000)), RED_EX("min columns f32", r_min_f, G(3000, 5)),
    RED_EX("argmax thread f32", r_amax_l, G(50, 8)), RED_EX("argmax block f32", r_amax_l, G(300, 100)),
    RED_EX("argmax split f32", r_amax_l, G(3, 9000)), RED_EX("argmax columns f32", r_amax_f, G(3000, 5)),
    RED_EX("argmin thread f32", r_amin_l, G(50, 8)), RED_EX("argmin block f32", r_amin_l, G(300, 100)),
    RED_EX("argmin split f32", r_amin_l, G(3, 9000)), RED_EX("argmin columns f32", r_amin_f, G(3000, 5)),
    RED("sum thread f64", r_sum_l, G64(50, 8)), RED("sum block f64", r_sum_l, G64(300, 100)),
    RED("sum split f64", r_sum_l, G64(3, 9000)), RED("sum columns f64", r_sum_f, G64(3000, 5)),
    RED_EX("max thread f64", r_max_l, G64(50, 8)), RED_EX("max block f64", r_max_l, G64(300, 100)),
    RED_EX("max split f64", r_max_l, G64(3, 9000)), RED_EX("max columns f64", r_max_f, G64(3000, 5)),
    RED_EX("min thread f64", r_min_l, G64(50, 8)), RED_EX("min block f64", r_min_l, G64(300, 100)),
    RED_EX("min split f64", r_min_l, G64(3, 9000)), RED_EX("min columns f64", r_min_f, G64(3000, 5)),
    RED_EX("argmax thread f64", r_amax_l, G64(50, 8)), RED_EX("argmax block f64", r_amax_l, G64(300, 100)),
    RED_EX("argmax split f64", r_amax_l, G64(3, 9000)), RED_EX("argmax columns f64", r_amax_f, G64(3000, 5)),
    RED_EX("argmin thread f64", r_amin_l, G64(50, 8)), RED_EX("argmin block f64", r_amin_l, G64(300, 100)),
    RED_EX("argmin split f64", r_amin_l, G64(3, 9000)), RED_EX("argmin columns f64", r_amin_f, G64(3000, 5)),
    { "softmax f64 by warp", sm, 1, IN(G64(9, 100)), GT_RED, GT_RED },
    { "softmax f64 by block", sm, 1, IN(G64(3, 2000)), GT_RED, GT_RED },
    { "log_softmax f64 by warp", lsm, 1, IN(G64(9, 100)), GT_RED, GT_RED },
    { "log_softmax f64 by block", lsm, 1, IN(G64(3, 2000)), GT_RED, GT_RED },
    { "matmul with k = 0 f32", mm, 2, IN(G(3, 0), G(0, 4)), GT_EXACT, GT_EXACT },
    { "matmul with k = 0 f64", mm, 2, IN(G64(3, 0), G64(0, 4)), GT_EXACT, GT_EXACT },
    { "conv over an empty plane, padding 1 (bias only) f32", conv_empty_plane, 3, IN(G(2, 3, 0, 4), G(5, 3, 1, 1), G(5)),
      GT_EXACT, GT_RED },
    { "conv over an empty plane, padding 1 (bias only) f64", conv_empty_plane, 3, IN(G64(2, 3, 4, 0), G64(5, 3, 1, 1), G64(5)),
      GT_EXACT, GT_RED },
    { "avg pool ceil mode f64", avg_ceil, 1, IN(G64(2, 3, 7, 7)), GT_F64, GT_F64 },
    { "batch norm training without affine f64", bn_train_plain, 1, IN(G64(4, 3, 5, 5)), GT_F64, GT_RED },
    { "gather bool, i32 index", gather_bool, 3, IN(INTS(5, 6), INTS(5, 6), LAB32(6, 5, 4)), GT_EXACT, GT_EXACT },
    { "batch norm eval with gradients f32", bn_eval, 3, IN(G(4, 3, 5, 5), G(3), G(3)), GT_EW, GT_RED },
    { "batch norm eval with gradients f64", bn_eval, 3, IN(G64(4, 3, 5, 5), G64(3), G64(3)), GT_F64, GT_RED },
};

GT_TABLE_TESTS(gpu_dtypes, cases, gt_expect_op_matches_cpu, 13000)

/* The fused optimizer kernel in f64: ten Adam steps on the CPU and on the device. */
Test(gpu_dtypes, adam_f64_steps) {
    gt_gpu_begin();
    dg_manual_seed(77);
    dg_tensor *pc = dg_uniform(DG_SHAPE(40, 3), -1, 1, DG_F64);
    cr_assert(pc && dg_set_requires_grad(pc, true) == 0, "%s", dg_last_error());
    dg_tensor *pg = gt_to_gpu(pc, true, "adam f64");
    dg_tensor *p[2] = { pc, pg };
    const char *dev[2] = { "cpu", gt_dut_name() };
    for (int d = 0; d < 2; d++) {
        gt_use(dev[d]);
        dg_adam_params adp = dg_adam_default_params();
        adp.lr = 0.05;
        adp.weight_decay = 0.01;
        dg_optimizer *o = dg_adam(&p[d], 1, adp);
        cr_assert(o, "%s", dg_last_error());
        for (int s = 0; s < 10; s++) {
            dg_scope *sc = dg_scope_begin();
            dg_tensor *loss = dg_sum_all(dg_mul(p[d], dg_tanh(p[d])));
            cr_assert(loss && dg_backward(loss) == 0, "%s", dg_last_error());
            cr_assert_eq(dg_optimizer_step(o), 0, "%s", dg_last_error());
            dg_optimizer_clear_grad(o);
            dg_scope_end(sc);
        }
        dg_optimizer_free(o);
    }
    gt_use("cpu");
    gt_compare("adam f64", "parameter after 10 steps", pc, pg, (gt_tol){ 1e-12, 1e-13, false });
}
