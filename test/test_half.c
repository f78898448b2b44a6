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
