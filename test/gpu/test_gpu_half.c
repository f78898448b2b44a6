/* test/gpu/test_gpu_half.c — float16 and bfloat16 on gpu:0: test/half_cases.h's cases run on the
 * device (each op against f32 on the same values), casts between every pair of dtypes bit for bit
 * equal to the CPU's, raw strided 2-byte copies, fills and where, and each op family in f16 and
 * bf16 against the CPU's half result, forward and gradients to f32 leaves through dg_cast (what
 * autocast records): elementwise ops, comparisons, reductions, softmax, cross entropy, matmul
 * (cuBLAS GemmEx, f32 compute) including an empty one (k = 0), convolutions (cuDNN with HALF /
 * BFLOAT16 data and FLOAT compute), pools, batch norm with f32 parameters, index ops, argsort.
 *
 * Tolerances. Both devices compute in f32 and round once to the half type, so a result can differ
 * by one unit in the last place where the two f32 values (summed in another order, or a math
 * library's last bit) fall on either side of a rounding boundary: 2^-7 relative for bf16 (8
 * significant bits), 2^-10 for f16. A convolution with a bias rounds twice on the GPU (cuDNN adds
 * the bias to the rounded convolution; the CPU adds it before its one rounding): two units, and
 * sums with cancellation are measured against the largest value (atol_of_max). Gradients pass
 * through several half roundings on the way back (each op's gradient is itself half): four units
 * of the largest gradient. */
#include "gpu_compare.h"
#include "../half_cases.h"

Test(gpu_half, half_cases_on_the_device) {
    gt_gpu_begin();
    size_t live = dg_live_tensors();
    hc_all_cases(gt_dut());
    cr_assert_eq(dg_live_tensors(), live, "half cases left %zu tensors alive", dg_live_tensors() - live);
}

static bool is_half(dg_dtype dt) { return dt == DG_F16 || dt == DG_BF16; }

/* every cast with a half side, CPU and device bit for bit, from values that cover rounding ties,
 * overflow to inf, subnormals, NaN, negative zero and integers past 2^24 */
Test(gpu_half, casts_bit_equal_to_the_cpu) {
    gt_gpu_begin();
    static const float vals[] = { 0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e5f, 3e-8f, 1e-40f, 1.00390625f, 1.01171875f,
                                  1.00048828125f, 3.39e38f, INFINITY, -INFINITY, NAN, 0.1f, -0.3333333f, 255.5f, -7.0f,
                                  16777217.0f, 1e10f, -1e10f, 0.5f, 2.5f, 3.5f };
    int n = (int)(sizeof vals / sizeof *vals);
    static const dg_dtype dts[] = { DG_F32, DG_F64, DG_I64, DG_I32, DG_BOOL, DG_F16, DG_BF16 };
    dg_scope *s = dg_scope_begin();
    dg_tensor *base = dg_from_data(DG_SHAPE(n), DG_F32, vals);
    for (size_t i = 0; i < 7; i++)
        for (size_t j = 0; j < 7; j++) {
            dg_dtype a = dts[i], b = dts[j];
            if (a == b || !(is_half(a) || is_half(b))) continue;
            /* integer sources from integer values (casting inf / NaN to an integer is undefined in C) */
            dg_tensor *src = (a == DG_I64 || a == DG_I32 || a == DG_BOOL)
                                 ? dg_cast(dg_from_data(DG_SHAPE(6), DG_F64, (double[]){ 0, 1, -3, 70000, 257, 16777217 }), a)
                                 : dg_cast(base, a);
            if (b == DG_I64 || b == DG_I32)   /* to integers: finite, in range */
                src = dg_cast(dg_cast(dg_from_data(DG_SHAPE(5), DG_F64, (double[]){ 0, 1.5, -3.25, 300, -2048 }), DG_F32), a);
            cr_assert(src, "%s", dg_last_error());
            dg_tensor *cpu = dg_cast(src, b);
            dg_tensor *gpu = dg_to_device(dg_cast(dg_to_device(src, gt_dut()), b), dg_cpu());
            cr_assert(cpu && gpu, "cast %s -> %s: %s", dg_dtype_name(a), dg_dtype_name(b), dg_last_error());
            size_t bytes = (size_t)dg_numel(cpu) * dg_dtype_size(b);
            cr_expect(memcmp(dg_data(cpu), dg_data(gpu), bytes) == 0, "cast %s -> %s: the device's bits differ from the CPU's",
                      dg_dtype_name(a), dg_dtype_name(b));
        }
    dg_scope_end(s);
}

#define X(i) dg_cast(in[i], DT)
/* name_bf16 and name_f16: expr on the inputs cast to the half type, the result cast back to f32 */
#define HF(name, expr)                                                                                   \
    static dg_tensor *name##_bf16(dg_tensor *const *in) { const dg_dtype DT = DG_BF16; return dg_cast((expr), DG_F32); } \
    static dg_tensor *name##_f16(dg_tensor *const *in) { const dg_dtype DT = DG_F16; return dg_cast((expr), DG_F32); }
#define IN(...) { __VA_ARGS__ }
#define G(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0, 0 }
#define POS(...) { GT_GRAD, GT_SHAPE(__VA_ARGS__), 0.25, 2 }
#define LAB(hi, ...) { GT_LABELS, GT_SHAPE(__VA_ARGS__), 0, hi }
#define LAB32(hi, ...) { GT_LABELS32, GT_SHAPE(__VA_ARGS__), 0, hi }
#define MASK(...) { GT_MASK, GT_SHAPE(__VA_ARGS__), 0, 0 }
/* one unit in the last place (see the top comment), two, and the gradients' four */
#define B1 { 0x1p-7, 1e-7, false }
#define H1 { 0x1p-10, 1e-7, false }
#define B2M { 0x1p-6, 0x1p-7, true }
#define H2M { 0x1p-9, 0x1p-10, true }
#define BG { 0x1p-5, 0x1p-6, true }
#define HG { 0x1p-8, 0x1p-9, true }

static dg_conv2d_params conv_p(void) {
    dg_conv2d_params p = dg_conv2d_default_params();
    p.padding[0] = p.padding[1] = 1;
    return p;
}
static dg_pool2d_params pool_p(int k) {
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = k;
    return p;
}
static dg_tensor *bn_half(dg_tensor *const *in, dg_dtype dt) {
    dg_batch_norm_params bp = dg_batch_norm_default_params();
    bp.training = true;
    dg_tensor *rm = dg_zeros(DG_SHAPE(3), DG_F32), *rv = dg_ones(DG_SHAPE(3), DG_F32);
    return dg_cast(dg_batch_norm(dg_cast(in[0], dt), rm, rv, in[1], in[2], bp), DG_F32);
}
static dg_tensor *bn_bf16(dg_tensor *const *in) { return bn_half(in, DG_BF16); }
static dg_tensor *bn_f16(dg_tensor *const *in) { return bn_half(in, DG_F16); }
static dg_tensor *mpi_half(dg_tensor *const *in, dg_dtype dt) {
    dg_tensor *idx = NULL;
    dg_tensor *y = dg_max_pool2d_with_indices(dg_cast(in[0], dt), pool_p(2), &idx);
    return dg_add(dg_cast(y, DG_F32), dg_mul_scalar(dg_cast(idx, DG_F32), 1e-3));
}
static dg_tensor *mpi_bf16(dg_tensor *const *in) { return mpi_half(in, DG_BF16); }
static dg_tensor *mpi_f16(dg_tensor *const *in) { return mpi_half(in, DG_F16); }
static dg_tensor *amp_half(dg_tensor *const *in, dg_dtype dt) { return dg_cast(dg_adaptive_max_pool2d(dg_cast(in[0], dt), 3, 2, NULL), DG_F32); }
static dg_tensor *amp_bf16(dg_tensor *const *in) { return amp_half(in, DG_BF16); }
static dg_tensor *amp_f16(dg_tensor *const *in) { return amp_half(in, DG_F16); }

HF(h_exp, dg_exp(X(0)))
HF(h_log, dg_log(X(0)))
HF(h_tanh, dg_tanh(X(0)))
HF(h_gelu, dg_gelu(X(0), true))
HF(h_sigmoid, dg_sigmoid(X(0)))
HF(h_relu, dg_relu(X(0)))
HF(h_add, dg_add(X(0), X(1)))
HF(h_mul, dg_mul(X(0), X(1)))
HF(h_div, dg_div(X(0), X(1)))
HF(h_max, dg_maximum(X(0), X(1)))
HF(h_greater, dg_greater(X(0), X(1)))
HF(h_where, dg_where(in[2], X(0), X(1)))
HF(h_transpose, dg_contiguous(dg_transpose(X(0), 0, 1)))   /* a raw strided 2-byte copy */
HF(h_fill, dg_full(DG_SHAPE(3, 5), 1.0 / 3.0, DT))
HF(h_sum, dg_sum(X(0), (int[]){ 1 }, 1, false))
HF(h_mean, dg_mean(X(0), (int[]){ 0 }, 1, true))
HF(h_amax, dg_max(X(0), (int[]){ 1 }, 1, false))
HF(h_argmax, dg_argmax(X(0), -1, false))
HF(h_softmax, dg_softmax(X(0), -1))
HF(h_logsoftmax, dg_log_softmax(X(0), -1))
HF(h_ce, dg_cross_entropy(X(0), in[1]))
HF(h_mm, dg_matmul(X(0), X(1)))
HF(h_bmm_t, dg_matmul(X(0), dg_transpose(X(1), 1, 2)))
HF(h_conv, dg_conv2d(X(0), X(1), X(2), conv_p()))
HF(h_conv_nb, dg_conv2d(X(0), X(1), NULL, conv_p()))
HF(h_maxpool, dg_max_pool2d(X(0), pool_p(2)))
HF(h_avgpool, dg_avg_pool2d(X(0), pool_p(3)))
HF(h_aavg, dg_adaptive_avg_pool2d(X(0), 2, 3))
HF(h_isel, dg_index_select(X(0), in[1], 0))
HF(h_gather, dg_gather(X(0), in[1], 1))
HF(h_scatter, dg_scatter_add(X(0), 1, in[1], X(2)))
HF(h_argsort, dg_argsort(X(0), -1, true))

#define PAIR(name, fn, n, ins, tb, th, gb, gh) \
    { name " bf16", fn##_bf16, n, ins, tb, gb }, { name " f16", fn##_f16, n, ins, th, gh }

static const gt_op_case cases[] = {
    PAIR("exp", h_exp, 1, IN(G(6, 7)), B1, H1, BG, HG),
    PAIR("log", h_log, 1, IN(POS(6, 7)), B1, H1, BG, HG),
    PAIR("tanh", h_tanh, 1, IN(G(6, 7)), B1, H1, BG, HG),
    PAIR("gelu (tanh)", h_gelu, 1, IN(G(6, 7)), B1, H1, BG, HG),
    PAIR("sigmoid", h_sigmoid, 1, IN(G(6, 7)), B1, H1, BG, HG),
    PAIR("relu", h_relu, 1, IN(G(6, 7)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("add, broadcast", h_add, 2, IN(G(4, 6, 7), G(6, 1)), B1, H1, BG, HG),
    PAIR("mul", h_mul, 2, IN(G(6, 7), G(6, 7)), B1, H1, BG, HG),
    PAIR("div", h_div, 2, IN(G(6, 7), POS(6, 7)), B1, H1, BG, HG),
    PAIR("maximum", h_max, 2, IN(G(6, 7), G(6, 7)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("greater", h_greater, 2, IN(G(6, 7), G(6, 7)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("where", h_where, 3, IN(G(6, 7), G(6, 7), MASK(6, 7)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("transpose + contiguous", h_transpose, 1, IN(G(5, 9)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("full", h_fill, 0, IN({ 0 }), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("sum over rows", h_sum, 1, IN(G(5, 300)), B2M, H2M, BG, HG),
    PAIR("mean over columns", h_mean, 1, IN(G(300, 5)), B2M, H2M, BG, HG),
    PAIR("max", h_amax, 1, IN(G(5, 40)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("argmax", h_argmax, 1, IN(G(5, 40)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("softmax", h_softmax, 1, IN(G(6, 50)), B1, H1, BG, HG),
    PAIR("log_softmax", h_logsoftmax, 1, IN(G(6, 50)), B1, H1, BG, HG),
    PAIR("cross_entropy", h_ce, 2, IN(G(8, 10), LAB(10, 8)), B1, H1, BG, HG),
    PAIR("matmul", h_mm, 2, IN(G(17, 40), G(40, 9)), B2M, H2M, BG, HG),
    PAIR("batched matmul, transposed", h_bmm_t, 2, IN(G(3, 7, 20), G(3, 5, 20)), B2M, H2M, BG, HG),
    PAIR("matmul with k = 0", h_mm, 2, IN(G(3, 0), G(0, 4)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("conv2d with bias", h_conv, 3, IN(G(2, 3, 8, 9), G(6, 3, 3, 3), G(6)), B2M, H2M, BG, HG),
    PAIR("conv2d", h_conv_nb, 2, IN(G(2, 4, 7, 7), G(5, 4, 3, 3)), B2M, H2M, BG, HG),
    PAIR("max_pool2d", h_maxpool, 1, IN(G(2, 3, 8, 8)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("avg_pool2d", h_avgpool, 1, IN(G(2, 3, 9, 9)), B1, H1, BG, HG),
    PAIR("adaptive_avg_pool2d", h_aavg, 1, IN(G(2, 3, 7, 8)), B1, H1, BG, HG),
    PAIR("max_pool2d with indices", mpi, 1, IN(G(2, 3, 8, 8)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("adaptive_max_pool2d", amp, 1, IN(G(2, 3, 7, 8)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
    PAIR("batch_norm, f32 weight and bias", bn, 3, IN(G(4, 3, 5, 5), G(3), G(3)), B2M, H2M, BG, HG),
    PAIR("index_select", h_isel, 2, IN(G(6, 4), LAB(6, 9)), GT_EXACT, GT_EXACT, BG, HG),
    PAIR("gather", h_gather, 2, IN(G(5, 6), LAB(6, 5, 4)), GT_EXACT, GT_EXACT, BG, HG),
    PAIR("index_select, i32 indices", h_isel, 2, IN(G(6, 4), LAB32(6, 9)), GT_EXACT, GT_EXACT, BG, HG),
    PAIR("gather, i32 indices", h_gather, 2, IN(G(5, 6), LAB32(6, 5, 4)), GT_EXACT, GT_EXACT, BG, HG),
    PAIR("scatter_add", h_scatter, 3, IN(G(5, 6), LAB(6, 5, 3), G(5, 3)), B1, H1, BG, HG),
    PAIR("argsort", h_argsort, 1, IN(G(4, 33)), GT_EXACT, GT_EXACT, GT_EXACT, GT_EXACT),
};
GT_TABLE_TESTS(gpu_half, cases, gt_expect_op_matches_cpu, 21000)
