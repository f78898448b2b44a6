/* test/test_backend_table.c — what a backend table declares (eager/backend_entries.h,
 * eager/backend.c): the entry list's names and kinds, dg_backend_has by entry number, the
 * load-time check that refuses an incomplete table (directly, and end to end: a stand-in CUDA
 * module whose table lacks gemm and conv2d makes gpu:0 unavailable with a message naming them,
 * on every request), dg_backend_require's messages for a missing entry and an unsupported dtype,
 * and the shared half-precision wrappers' mechanics (eager/half_via_f32.h) on a test table:
 * operands kept or widened as `keep` says, a kernel declining a kept call, scratch failure. */
#include <criterion/criterion.h>
#include <limits.h>
#include <unistd.h>
#include "../eager/half_via_f32.h"
#include "backend_check.h"

static void expect_error(const char *want) {
    cr_assert(strstr(dg_last_error(), want), "wanted \"%s\" in: %s", want, dg_last_error());
}

Test(backend_table, entry_list_names_and_kinds) {
    cr_assert_eq(DG_BE_alloc, 0);
    cr_assert_str_eq(dg_backend_entry_name(DG_BE_gemm), "gemm");
    cr_assert_str_eq(dg_backend_entry_name(DG_BE_batch_norm_relu_backward), "batch_norm_relu_backward");
    cr_assert_str_eq(dg_backend_entry_name(DG_BE_fused_update), "fused_update");
    cr_assert_str_eq(dg_backend_entry_name(DG_BE_COUNT), "?");
    cr_assert(dg_backend_entry_required(DG_BE_gemm));
    cr_assert(dg_backend_entry_required(DG_BE_copy));
    cr_assert(!dg_backend_entry_required(DG_BE_copy_peer));
    cr_assert(!dg_backend_entry_required(DG_BE_batch_norm_relu));
    cr_assert(!dg_backend_entry_required(DG_BE_supports));
    cr_assert(!dg_backend_entry_required(DG_BE_COUNT));
    /* the last entry is the struct's last field */
    cr_assert_eq(DG_BE_ENTRY_OFFSET(DG_BE_fused_update), offsetof(dg_backend, fused_update));
    cr_assert_eq(sizeof(dg_backend), DG_BE_ENTRY_OFFSET(DG_BE_COUNT));
}

Test(backend_table, has_reads_the_entry_by_number) {
    const dg_backend *cpu = &dg_cpu_backend;
    for (int e = 0; e < DG_BE_COUNT; e++) {
        void (*fn)(void);
        memcpy(&fn, (const char *)cpu + DG_BE_ENTRY_OFFSET(e), sizeof fn);
        cr_assert_eq(dg_backend_has(cpu, (dg_be_entry)e), fn != NULL, "%s", dg_backend_entry_name((dg_be_entry)e));
    }
    cr_assert(dg_backend_has(cpu, DG_BE_gemm));
    cr_assert(dg_backend_has(cpu, DG_BE_batch_norm_relu));
    cr_assert(!dg_backend_has(cpu, DG_BE_copy_peer));   /* the CPU has no peers */
    cr_assert(!dg_backend_has(cpu, DG_BE_host_alloc));
    dg_backend t = dg_cpu_backend;
    t.argsort = NULL;
    cr_assert(!dg_backend_has(&t, DG_BE_argsort));
    cr_assert(dg_backend_has(&t, DG_BE_nll));
}

Test(backend_table, the_cpu_table_passes_its_check) {
    cr_assert_eq(dg_backend_validate(&dg_cpu_backend), 0, "%s", dg_last_error());
    cr_assert_eq(dg_backend_for(dg_cpu()), &dg_cpu_backend);
    for (int e = 0; e < DG_BE_COUNT; e++)
        if (dg_backend_entry_required((dg_be_entry)e)) cr_assert(dg_backend_has(&dg_cpu_backend, (dg_be_entry)e));
}

Test(backend_table, a_table_missing_required_entries_is_refused_naming_them) {
    dg_backend t = dg_cpu_backend;
    t.gemm = NULL;
    t.conv2d_backward_filter = NULL;
    cr_assert_eq(dg_backend_validate(&t), DG_EDEVICE);
    cr_assert_eq(dg_last_status(), DG_EDEVICE);
    expect_error("backend 'cpu' for cpu lacks the required entries gemm, conv2d_backward_filter");
    t = dg_cpu_backend;
    t.index = 3;
    t.type = DG_CUDA;
    t.name = "mydev";
    t.fill = NULL;
    cr_assert_eq(dg_backend_validate(&t), DG_EDEVICE);
    expect_error("backend 'mydev' for gpu:3 lacks the required entry fill:");
    /* optional entries may be absent */
    t = dg_cpu_backend;
    t.batch_norm_relu = NULL;
    t.batch_norm_relu_backward = NULL;
    t.memory_stats = NULL;
    t.supports = NULL;
    cr_assert_eq(dg_backend_validate(&t), 0, "%s", dg_last_error());
}

static void *fake_host_alloc(const dg_backend *be, size_t n) { return NULL; }

Test(backend_table, host_alloc_without_host_free_is_refused) {
    dg_backend t = dg_cpu_backend;
    t.host_alloc = fake_host_alloc;
    cr_assert_eq(dg_backend_validate(&t), DG_EDEVICE);
    expect_error("has host_alloc without host_free");
}

Test(backend_table, a_half_wrapper_without_a_kernel_behind_it_is_refused) {
    /* the CPU's table with a descriptor whose kernels lack reduce and softmax */
    static dg_backend kernels;
    kernels = *((const dg_half_via_f32 *)dg_cpu_backend.half)->kernels;
    kernels.reduce = NULL;
    kernels.softmax = NULL;
    dg_half_via_f32 h = *(const dg_half_via_f32 *)dg_cpu_backend.half;
    h.kernels = &kernels;
    dg_backend t = dg_cpu_backend;
    t.half = &h;
    cr_assert_eq(dg_backend_validate(&t), DG_EDEVICE);
    expect_error("points reduce, softmax at the half-precision wrappers with no kernel behind them");
    /* and a table that points at the wrappers with no descriptor at all */
    t = dg_cpu_backend;
    t.half = NULL;
    cr_assert_eq(dg_backend_validate(&t), DG_EDEVICE);
    expect_error("points reduce, softmax, softmax_backward");
}

Test(backend_table, require_names_the_op_the_entry_the_dtype_and_the_device) {
    const dg_backend *cpu = &dg_cpu_backend;
    dg_be_entry mm[] = { DG_BE_gemm, DG_BE_copy };
    cr_assert_eq(dg_backend_require(cpu, mm, 2, DG_F32, "matmul"), 0, "%s", dg_last_error());
    cr_assert_eq(dg_backend_require(cpu, mm, 2, DG_BF16, "matmul"), 0, "%s", dg_last_error());
    dg_be_entry sort[] = { DG_BE_argsort };
    cr_assert_eq(dg_backend_require(cpu, sort, 1, DG_I32, "argsort"), 0, "%s", dg_last_error());
    cr_assert_eq(dg_backend_require(cpu, sort, 1, DG_BOOL, "argsort"), DG_EUNSUPPORTED);
    expect_error("op argsort needs backend entry 'argsort' for dtype bool, which cpu on cpu does not provide");
    dg_be_entry upd[] = { DG_BE_fused_update };
    cr_assert_eq(dg_backend_require(cpu, upd, 1, DG_F16, "sgd_step"), DG_EUNSUPPORTED);
    expect_error("op sgd_step needs backend entry 'fused_update' for dtype float16, which cpu on cpu does not provide");
    dg_be_entry peer[] = { DG_BE_copy, DG_BE_copy_peer };
    cr_assert_eq(dg_backend_require(cpu, peer, 2, DG_F32, "to_device"), DG_EUNSUPPORTED);
    expect_error("op to_device needs backend entry 'copy_peer', which cpu on cpu does not provide");
    /* a table without `supports` is asked for presence only */
    dg_backend t = dg_cpu_backend;
    t.supports = NULL;
    cr_assert_eq(dg_backend_require(&t, upd, 1, DG_F16, "sgd_step"), 0, "%s", dg_last_error());
    dg_be_entry bad[] = { (dg_be_entry)DG_BE_COUNT };
    cr_assert_eq(dg_backend_require(cpu, bad, 1, DG_F32, "odd"), DG_EINVAL);
    expect_error("op odd lists backend entry");
    cr_assert_eq(dg_backend_require(NULL, mm, 2, DG_F32, "matmul"), DG_EINVAL);
}

Test(backend_table, the_cpu_declares_what_its_kernels_take) {
    const dg_backend *cpu = &dg_cpu_backend;
    cr_assert(cpu->supports(cpu, DG_BE_reduce, DG_BF16));     /* widened by the half wrappers */
    cr_assert(!cpu->supports(cpu, DG_BE_reduce, DG_I64));
    cr_assert(cpu->supports(cpu, DG_BE_argsort, DG_I64));
    cr_assert(cpu->supports(cpu, DG_BE_gather, DG_BOOL));     /* moved by element size */
    cr_assert(!cpu->supports(cpu, DG_BE_index_add, DG_I32));
    cr_assert(cpu->supports(cpu, DG_BE_alloc, DG_BOOL));      /* no data dtype */
    cr_assert(!cpu->supports(cpu, DG_BE_COUNT, DG_F32));
    cr_assert(!cpu->supports(cpu, DG_BE_copy, (dg_dtype)40));
}

Test(backend_table, the_cpu_supports_answers_as_its_kernels_do) {
    check_supports_matches_kernels(dg_cpu());
}

/* ---- end to end: the device registry and a module whose table is incomplete ---- */
Test(backend_table, an_incomplete_module_table_makes_the_device_unavailable) {
    char exe[PATH_MAX], dir[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    cr_assert(n > 0);
    exe[n] = 0;
    *strrchr(exe, '/') = 0;
    snprintf(dir, sizeof dir, "%s/../test_modules", exe);   /* built by the Makefile beside bin/ */
    cr_assert_eq(access(dir, F_OK), 0, "%s is missing (make builds it with the test program)", dir);
    setenv("DG_MODULE_PATH", dir, 1);
    cr_assert_eq(dg_set_device("gpu:0"), DG_EDEVICE);
    expect_error("backend 'cuda' for gpu:0 lacks the required entries gemm, conv2d");
    char first[DG_ERROR_MSG_LEN];
    snprintf(first, sizeof first, "%s", dg_last_error());
    dg_clear_error();
    /* the device stays unavailable, with the same reason, for tensors too */
    dg_tensor *c = dg_zeros(DG_SHAPE(2), DG_F32);
    cr_assert_null(dg_to_device(c, (dg_device){ DG_CUDA, 0 }));
    dg_tensor_free(c);
    expect_error("backend 'cuda' for gpu:0 lacks the required entries gemm, conv2d");
    cr_assert_null(dg_backend_for((dg_device){ DG_CUDA, 1 }));
    expect_error("backend 'cuda' for gpu:1 lacks the required entries gemm, conv2d");
    cr_assert_null(dg_backend_for((dg_device){ DG_CUDA, 0 }));
    cr_assert(strstr(first, dg_last_error()), "the same reason each time: \"%s\" then \"%s\"", first, dg_last_error());
    cr_assert_eq(dg_get_device().type, DG_CPU);
}

/* ---- the shared half wrappers on a test table ---- */
typedef struct call_log { int n; dg_dtype x[4], y[4]; } call_log;
static call_log g_log;
static bool g_decline;

/* reduce kernel of the test table: records the dtypes it sees; a half x is declined when
 * g_decline, else summed from f16; an f32 x is summed into y (f32 or f16) */
static int test_reduce(const dg_backend *be, dg_reduce_op op, const dg_kview *x, dg_kview *y) {
    if (g_log.n < 4) { g_log.x[g_log.n] = x->dtype; g_log.y[g_log.n] = y->dtype; }
    g_log.n++;
    if (x->dtype == DG_F16 && g_decline) return DG_HALF_DECLINED;
    float s = 0;
    for (int64_t i = 0; i < x->numel; i++)
        s += x->dtype == DG_F16 ? dg_f16_to_f32(((const uint16_t *)x->data)[i]) : ((const float *)x->data)[i];
    if (y->dtype == DG_F16) *(uint16_t *)y->data = dg_f32_to_f16(s);
    else *(float *)y->data = s;
    return 0;
}
static unsigned g_keep;
static unsigned test_keep(const dg_backend *be, const dg_half_call *c) {
    cr_assert_eq(c->entry, DG_BE_reduce);
    cr_assert_eq(c->n, 2);
    cr_assert_eq(c->op, DG_RED_SUM);
    return g_keep;
}
static int g_scratch_live, g_scratch_fail;
static void *test_scratch(const dg_backend *be, size_t n) {
    if (g_scratch_fail) { DG_ERR(DG_ENOMEM, "test scratch: refused %zu bytes", n); return NULL; }
    g_scratch_live++;
    return malloc(n);
}
static void test_scratch_free(const dg_backend *be, void *p) { g_scratch_live--; free(p); }

/* The CPU table with reduce's kernel, scratch and keep replaced by the ones above. */
static dg_backend test_kernels;
static dg_half_via_f32 test_half;
static dg_backend test_table(void) {
    const dg_half_via_f32 *cpu = dg_cpu_backend.half;
    test_kernels = *cpu->kernels;
    test_kernels.reduce = test_reduce;
    test_half = (dg_half_via_f32){ .kernels = &test_kernels, .wrappers = &dg_half_wrappers,
                                   .scratch_alloc = test_scratch, .scratch_free = test_scratch_free, .keep = test_keep };
    dg_backend t = dg_cpu_backend;
    t.half = &test_half;
    cr_assert_eq(t.reduce, dg_half_reduce);
    return t;
}

static dg_kview view1d(void *data, dg_dtype dt, int64_t n) {
    dg_kview v = { .data = data, .dtype = dt, .ndim = 1, .numel = n };
    v.shape[0] = n;
    v.stride[0] = 1;
    return v;
}

static void reset(unsigned keep, bool decline) {
    memset(&g_log, 0, sizeof g_log);
    g_keep = keep;
    g_decline = decline;
    g_scratch_live = g_scratch_fail = 0;
}

Test(half_via_f32, keep_decides_which_operands_are_widened) {
    dg_backend t = test_table();
    cr_assert_eq(dg_backend_validate(&t), 0, "%s", dg_last_error());
    uint16_t xh[3] = { dg_f32_to_f16(1.5f), dg_f32_to_f16(2.25f), dg_f32_to_f16(-0.5f) }, yh = 0;
    float xf[3] = { 1.5f, 2.25f, -0.5f }, yf = 0;
    dg_kview x = view1d(xh, DG_F16, 3), y = view1d(&yh, DG_F16, 1);
    /* nothing kept: x widened (loaded), y widened (rounded back), both freed */
    reset(0, false);
    cr_assert_eq(t.reduce(&t, DG_RED_SUM, &x, &y), 0);
    cr_assert_eq(g_log.n, 1);
    cr_assert(g_log.x[0] == DG_F32 && g_log.y[0] == DG_F32);
    cr_assert_eq(dg_f16_to_f32(yh), 3.25f);
    cr_assert_eq(g_scratch_live, 0);
    /* x kept: the kernel reads f16 x and writes the f32 copy of y */
    reset(1u << 0, false);
    yh = 0;
    cr_assert_eq(t.reduce(&t, DG_RED_SUM, &x, &y), 0);
    cr_assert(g_log.x[0] == DG_F16 && g_log.y[0] == DG_F32);
    cr_assert_eq(dg_f16_to_f32(yh), 3.25f);
    /* everything kept: the call as it is, no scratch */
    reset(DG_HALF_KEEP_ALL, false);
    yh = 0;
    cr_assert_eq(t.reduce(&t, DG_RED_SUM, &x, &y), 0);
    cr_assert(g_log.n == 1 && g_log.x[0] == DG_F16 && g_log.y[0] == DG_F16);
    cr_assert_eq(dg_f16_to_f32(yh), 3.25f);
    /* no half operand: straight to the kernel, keep never asked (g_keep would assert on c) */
    reset(0, false);
    dg_kview xv = view1d(xf, DG_F32, 3), yv = view1d(&yf, DG_F32, 1);
    cr_assert_eq(t.reduce(&t, DG_RED_SUM, &xv, &yv), 0);
    cr_assert(g_log.n == 1 && g_log.x[0] == DG_F32 && yf == 3.25f);
}

Test(half_via_f32, a_declined_call_is_widened_and_run_again) {
    dg_backend t = test_table();
    uint16_t xh[2] = { dg_f32_to_f16(4.0f), dg_f32_to_f16(0.125f) }, yh = 0;
    dg_kview x = view1d(xh, DG_F16, 2), y = view1d(&yh, DG_F16, 1);
    reset(DG_HALF_KEEP_ALL, true);
    cr_assert_eq(t.reduce(&t, DG_RED_SUM, &x, &y), 0);
    cr_assert_eq(g_log.n, 2);
    cr_assert(g_log.x[0] == DG_F16 && g_log.x[1] == DG_F32 && g_log.y[1] == DG_F32);
    cr_assert_eq(dg_f16_to_f32(yh), 4.125f);
    cr_assert_eq(g_scratch_live, 0);
}

Test(half_via_f32, scratch_failure_reports_the_allocator_and_skips_the_kernel) {
    dg_backend t = test_table();
    uint16_t xh[2] = { 0, 0 }, yh = 0x1234;
    dg_kview x = view1d(xh, DG_F16, 2), y = view1d(&yh, DG_F16, 1);
    reset(0, false);
    g_scratch_fail = 1;
    cr_assert_eq(t.reduce(&t, DG_RED_SUM, &x, &y), DG_ENOMEM);
    expect_error("test scratch: refused 8 bytes");
    cr_assert_eq(g_log.n, 0);
    cr_assert_eq(yh, 0x1234);   /* the output is left alone */
}

/* the CPU's bf16 convolution through oneDNN applies a fused ReLU as every other path does (it
 * returned oneDNN's output unrectified before the wrappers were folded) */
Test(half_via_f32, cpu_bf16_conv_with_fused_relu_is_rectified) {
    dg_manual_seed(1);
    dg_tensor *x = dg_cast(dg_randn(DG_SHAPE(2, 16, 8, 8), DG_F32), DG_BF16);
    dg_tensor *w = dg_cast(dg_randn(DG_SHAPE(16, 16, 3, 3), DG_F32), DG_BF16);
    dg_tensor *fused = dg_conv2d_relu_nograd(x, w, NULL, dg_conv2d_default_params());
    dg_tensor *plain = dg_relu(dg_conv2d(x, w, NULL, dg_conv2d_default_params()));
    cr_assert(fused && plain, "%s", dg_last_error());
    dg_tensor *f = dg_cast(fused, DG_F32), *p = dg_cast(plain, DG_F32);
    const float *fv = dg_tensor_ptr(f), *pv = dg_tensor_ptr(p);
    int negative = 0;
    for (int64_t i = 0; i < dg_numel(f); i++) {
        negative += fv[i] < 0;
        cr_assert_eq(fv[i], pv[i], "element %lld: fused %g, conv then relu %g", (long long)i, fv[i], pv[i]);
    }
    cr_assert_eq(negative, 0);
    dg_tensor_free(x); dg_tensor_free(w); dg_tensor_free(fused); dg_tensor_free(plain); dg_tensor_free(f); dg_tensor_free(p);
}
