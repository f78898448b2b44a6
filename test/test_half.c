/* test/test_half.c — float16 and bfloat16 tensors on the CPU: casts bit for bit as torch's, ops
 * against f32 on the same values (test/half_cases.h, shared with the GPU suite), printing, the
 * safetensors F16/BF16 entries, and what half tensors are refused for. */
#include "test_util.h"
#include "half_cases.h"
#include <unistd.h>
#include <dygraph/extension.h>

Test(half, casts_and_ops_on_the_cpu) {
    size_t live = dg_live_tensors();
    hc_all_cases(dg_cpu());
    cr_assert_eq(dg_live_tensors(), live, "half cases left %zu tensors alive", dg_live_tensors() - live);
}

/* On the CPU every elementwise result is the f32 result rounded once: bit for bit. */
Test(half, cpu_elementwise_is_f32_rounded_once) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_cast(dg_randn(DG_SHAPE(5, 1000), DG_F32), DG_BF16), *y = dg_cast(dg_randn(DG_SHAPE(1000), DG_F32), DG_BF16);
    dg_tensor *got = dg_mul(dg_tanh(x), y);
    /* tanh rounds, then mul rounds: compare against the same two roundings */
    dg_tensor *want = dg_cast(dg_mul(dg_cast(dg_cast(dg_tanh(dg_cast(x, DG_F32)), DG_BF16), DG_F32), dg_cast(y, DG_F32)), DG_BF16);
    cr_assert(got && want);
    cr_expect(memcmp(dg_data(got), dg_data(want), 5000 * 2) == 0, "bf16 tanh*mul differs from f32 rounded once per op");
    dg_scope_end(s);
}

Test(half, prints_four_significant_digits) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *t = dg_cast(dg_from_data(DG_SHAPE(3), DG_F32, (float[]){ 1.0f / 3.0f, -2.0f, 1000.5f }), DG_BF16);
    char *txt = dg_to_string(t);
    cr_assert(txt, "%s", dg_last_error());
    cr_expect(strstr(txt, "dtype=bfloat16") && strstr(txt, "0.334") && strstr(txt, "-2") && strstr(txt, "1000"), "%s", txt);
    free(txt);
    dg_scope_end(s);
}

Test(half, safetensors_f16_and_bf16_round_trip) {
    dg_scope *s = dg_scope_begin();
    dg_tensor_dict *d = dg_tensor_dict_new();
    dg_tensor *a = dg_cast(dg_randn(DG_SHAPE(3, 4), DG_F32), DG_F16), *b = dg_cast(dg_randn(DG_SHAPE(5), DG_F32), DG_BF16);
    cr_assert_eq(dg_tensor_dict_set(d, "a", dg_clone(a)), 0);
    cr_assert_eq(dg_tensor_dict_set(d, "b", dg_clone(b)), 0);
    char path[] = "/tmp/dg_half_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(dg_save_safetensors(path, d), 0, "%s", dg_last_error());
    dg_tensor_dict *r = dg_load_safetensors(path);
    cr_assert(r, "%s", dg_last_error());
    dg_tensor *ra = dg_tensor_dict_get(r, "a"), *rb = dg_tensor_dict_get(r, "b");
    cr_assert(ra && rb);
    cr_expect(dg_dtype_of(ra) == DG_F16 && dg_dtype_of(rb) == DG_BF16);
    cr_expect(memcmp(dg_data(ra), dg_data(a), 12 * 2) == 0 && memcmp(dg_data(rb), dg_data(b), 5 * 2) == 0);
    dg_tensor_dict_free(r);
    dg_tensor_dict_free(d);
    unlink(path);
    dg_scope_end(s);
}

/* The optimizer's rules run in f32/f64: a half parameter goes through f32 master weights
 * (optim/), and the raw step refuses half buffers with a reason. */
Test(half, fused_update_refuses_half_buffers) {
    dg_update_params u = { .kind = DG_UPD_SGD };
    uint16_t p[2] = { 0 }, g[2] = { 0 };
    dg_update_tensor t = { .p = p, .g = g, .n = 2, .step_size = 0.1 };
    cr_expect_neq(dg_fused_update(dg_cpu(), DG_BF16, &u, &t, 1), 0);
    cr_expect(strstr(dg_last_error(), "bfloat16"), "%s", dg_last_error());
    dg_clear_error();
}

/* ---- pooling: the CPU kernels run f16/bf16 natively (eager/cpu/pool.c, pool_indices.c) ----
 * Each half op is held to the f32 op on the widened input, rounded to the half type, bit for
 * bit, forward and backward. That holds for average pooling too, not only within an ulp: the
 * half kernels add the loaded values in the f32 kernel's own order and precision (f64 window
 * sums, f32 gradient planes) and round once, so no summation order differs. The inputs are
 * multiples of 1/4, so windows hold ties (the first maximum must win, forward and backward),
 * and one NaN (it must win its windows and take their gradients). */

/* [2, 3, h, w] values in {-2, -1.75, ..., 2}, one NaN */
static dg_tensor *pool_input(int h, int w) {
    int64_t n = 2 * 3 * (int64_t)h * w;
    float *v = malloc((size_t)n * sizeof(float));
    uint32_t r = 12345;
    for (int64_t i = 0; i < n; i++) { r = r * 1664525u + 1013904223u; v[i] = (float)((int)(r >> 24) % 17 - 8) / 4.0f; }
    v[n / 3 + w + 1] = NAN;
    dg_tensor *t = dg_from_data(DG_SHAPE(2, 3, h, w), DG_F32, v);
    free(v);
    return t;
}

/* got (half) against want (f32) rounded to got's dtype: bit for bit; the first difference */
static void expect_rounded(const dg_tensor *got, const dg_tensor *want, const char *what) {
    cr_assert(got && want, "%s: %s", what, dg_last_error());
    dg_tensor *w = dg_contiguous(dg_cast(want, dg_dtype_of(got)));
    const dg_tensor *g = dg_contiguous(got);
    cr_assert(w && g && dg_numel(g) == dg_numel(w));
    const uint16_t *a = dg_data(g), *b = dg_data(w);
    for (int64_t i = 0; i < dg_numel(w); i++)
        if (a[i] != b[i]) {
            cr_expect_fail("%s %s: element %lld is 0x%04x, f32 rounded is 0x%04x", what, dg_dtype_name(dg_dtype_of(got)),
                           (long long)i, a[i], b[i]);
            return;
        }
}

enum { P_MAX, P_AVG, P_ADAPT_AVG, P_MAX_IDX, P_ADAPT_MAX };
typedef struct pool_case {
    const char *what;
    int kind, h, w;
    dg_pool2d_params p;   /* P_MAX, P_AVG, P_MAX_IDX */
    int oh, ow;           /* the adaptive ones */
} pool_case;

static dg_tensor *run_pool(const pool_case *c, const dg_tensor *x, dg_tensor **idx) {
    switch (c->kind) {
        case P_MAX: return dg_max_pool2d(x, c->p);
        case P_AVG: return dg_avg_pool2d(x, c->p);
        case P_ADAPT_AVG: return dg_adaptive_avg_pool2d(x, c->oh, c->ow);
        case P_MAX_IDX: return dg_max_pool2d_with_indices(x, c->p, idx);
        default: return dg_adaptive_max_pool2d(x, c->oh, c->ow, idx);
    }
}

/* forward and the gradient of sum(y * u) for a random upstream u, in dt and in f32 */
static void check_pool(const pool_case *c, dg_dtype dt) {
    dg_scope *s = dg_scope_begin();
    dg_tensor *x = dg_cast(pool_input(c->h, c->w), dt), *x32 = dg_cast(x, DG_F32);   /* widening is exact */
    cr_assert(x && x32);
    dg_set_requires_grad(x, true);
    dg_set_requires_grad(x32, true);
    dg_tensor *i16 = NULL, *i32 = NULL;
    dg_tensor *y = run_pool(c, x, &i16), *y32 = run_pool(c, x32, &i32);
    cr_assert(y && y32, "%s %s: %s", c->what, dg_dtype_name(dt), dg_last_error());
    cr_expect_eq(dg_dtype_of(y), dt);
    expect_rounded(y, y32, c->what);
    if (i16) {
        cr_assert(i32 && dg_numel(i16) == dg_numel(i32));
        cr_expect(memcmp(dg_data(i16), dg_data(i32), (size_t)dg_numel(i32) * sizeof(int64_t)) == 0,
                  "%s %s: indices differ from f32's", c->what, dg_dtype_name(dt));
    }
    dg_tensor *u = dg_cast(dg_randn(dg_shape_of(y32), DG_F32), dt), *u32 = dg_cast(u, DG_F32);
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y, u))), 0, "%s", dg_last_error());
    cr_assert_eq(dg_backward(dg_sum_all(dg_mul(y32, u32))), 0, "%s", dg_last_error());
    cr_expect_eq(dg_dtype_of(dg_grad(x)), dt);
    char what[96];
    snprintf(what, sizeof what, "%s backward", c->what);
    expect_rounded(dg_grad(x), dg_grad(x32), what);
    dg_scope_end(s);
}

static dg_pool2d_params pool_p(int k, int stride, int pad, bool include_pad) {
    dg_pool2d_params p = dg_pool2d_default_params();
    p.kernel[0] = p.kernel[1] = k;
    p.stride[0] = p.stride[1] = stride;
    p.padding[0] = p.padding[1] = pad;
    p.count_include_pad = include_pad;
    return p;
}

Test(half, cpu_pooling_is_f32_rounded_bit_for_bit) {
    const pool_case cases[] = {
        { "max 2x2/s2 (odd plane)", P_MAX, 9, 11, pool_p(2, 2, 0, false), 0, 0 },
        { "max 3x3/s2/p1 (ResNet stem)", P_MAX, 12, 13, pool_p(3, 2, 1, false), 0, 0 },
        { "max 3x3/s1 (overlapping)", P_MAX, 9, 11, pool_p(3, 1, 0, false), 0, 0 },
        { "max 3x3/s1/p1 on a 130x130 plane (widened path)", P_MAX, 130, 130, pool_p(3, 1, 1, false), 0, 0 },
        { "avg 3x3/s2/p1 count_include_pad", P_AVG, 9, 11, pool_p(3, 2, 1, true), 0, 0 },
        { "avg 3x3/s2/p1 excluding pad", P_AVG, 9, 11, pool_p(3, 2, 1, false), 0, 0 },
        { "avg 3x3/s1 (overlapping)", P_AVG, 9, 11, pool_p(3, 1, 0, false), 0, 0 },
        { "adaptive avg to 1x1", P_ADAPT_AVG, 9, 11, { { 0 } }, 1, 1 },
        { "adaptive avg to 4x5", P_ADAPT_AVG, 9, 11, { { 0 } }, 4, 5 },
        { "max with indices 3x3/s1/p1", P_MAX_IDX, 9, 11, pool_p(3, 1, 1, false), 0, 0 },
        { "adaptive max to 4x5", P_ADAPT_MAX, 9, 11, { { 0 } }, 4, 5 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_pool(&cases[i], DG_BF16);
        check_pool(&cases[i], DG_F16);
    }
}
