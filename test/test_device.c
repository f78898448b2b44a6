/* test/test_device.c — device selection on a machine without a usable GPU: asking for one is an
 * error with a message, never a crash; a launcher's FLAGS_selected_gpus falls back to the CPU
 * with a notice. (On a GPU machine `make test-gpu` covers the CUDA backend.) */
#include "test_util.h"

static bool gpu_usable(void) {
    bool ok = dg_set_device("gpu:0") == 0;
    dg_set_device("cpu");
    dg_clear_error();
    return ok;
}

Test(device, explicit_gpu_request_is_an_error_without_a_gpu) {
    if (gpu_usable()) { cr_log_warn("a GPU is usable here: nothing to check"); return; }
    dg_clear_error();
    cr_assert_eq(dg_set_device("gpu"), DG_EDEVICE);
    cr_assert(strstr(dg_last_error(), "gpu:0"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_eq(dg_set_device("gpu:3"), DG_EDEVICE);
    dg_clear_error();
    cr_assert_eq(dg_get_device().type, DG_CPU, "the device stays the CPU");
    dg_tensor *host = dg_ones(DG_SHAPE(2), DG_F32);
    cr_assert_null(dg_to_device(host, (dg_device){ DG_CUDA, 0 }));
    dg_tensor_free(host);
    cr_assert(strstr(dg_last_error(), "gpu"), "%s", dg_last_error());
    dg_clear_error();
    dg_init_params ip = dg_init_default_params();
    ip.device = "gpu";
    cr_assert_eq(dg_init(&ip), DG_EDEVICE);
    dg_clear_error();
}

Test(device, launcher_flag_falls_back_to_cpu) {
    if (gpu_usable()) { cr_log_warn("a GPU is usable here: nothing to check"); return; }
    setenv("FLAGS_selected_gpus", "0", 1);
    unsetenv("DG_DEVICE");
    dg_init_params ip2 = dg_init_default_params();
    ip2.quiet = true;
    cr_assert_eq(dg_init(&ip2), 0, "%s", dg_last_error());
    cr_assert_eq(dg_get_device().type, DG_CPU);
    cr_assert_str_eq(dg_last_error(), "", "no error left behind");
    unsetenv("FLAGS_selected_gpus");
    dg_memory_stats st;
    cr_assert_eq(dg_memory_stats_get(dg_cpu(), &st), 0);
    cr_assert_eq(st.allocated, 0);
    cr_assert_eq(dg_synchronize(dg_cpu()), 0);
}

Test(device, pinned_memory_falls_back_to_host_memory_on_the_cpu) {
    dg_set_device("cpu");
    char *p = dg_pinned_alloc(1000, NULL);
    cr_assert_not_null(p, "%s", dg_last_error());
    cr_assert_eq((uintptr_t)p % 64, 0, "64-byte aligned");
    memset(p, 7, 1000);   /* ASan checks the whole range is ours */
    dg_pinned_free(p, NULL);
    dg_pinned_free(NULL, NULL);
}

Test(device, tf32_switch_defaults_off) {
    cr_assert_not(dg_get_allow_tf32());
    dg_set_allow_tf32(true);
    cr_assert(dg_get_allow_tf32());
    dg_set_allow_tf32(false);
}

Test(device, exact_gpu_conv_switch_defaults_off_and_resets) {
    cr_assert_not(dg_get_exact_gpu_conv());
    dg_set_exact_gpu_conv(true);
    cr_assert(dg_get_exact_gpu_conv());
    dg_shutdown();
    cr_assert_not(dg_get_exact_gpu_conv(), "dg_shutdown puts the switch back to its default");
}

Test(device, thread_counts_are_clamped) {
    dg_set_num_threads(100000);   /* libgomp crashed making this many */
    int n = dg_get_num_threads();
    cr_expect(n >= 1 && n <= 4 * 1024, "thread count %d", n);
    dg_scope *s = dg_scope_begin();
    dg_tensor *a = dg_randn(DG_SHAPE(64, 64), DG_F32);
    dg_tensor *p = dg_matmul(a, a);
    cr_expect(p && isfinite(dg_item(dg_sum_all(p))), "%s", dg_last_error());
    dg_scope_end(s);
    dg_set_num_threads(0);
    cr_expect_geq(dg_get_num_threads(), 1);
    dg_set_num_threads(-5);
    cr_expect_geq(dg_get_num_threads(), 1);
}

/* The core's own CPUID check agrees with what the kernel reports in /proc/cpuinfo: bf16 is
 * offered exactly where AVX512-BF16 or AMX-BF16 is. */
Test(device, cpu_bf16_offered_exactly_where_the_cpu_has_it) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) cr_skip_test("no /proc/cpuinfo");
    char line[8192];
    bool has = false;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "flags", 5) == 0) { has = strstr(line, " avx512_bf16") || strstr(line, " amx_bf16"); break; }
    fclose(f);
    int rc = dg_set_cpu_bf16(true);
    cr_expect_eq(rc == 0, has, "dg_set_cpu_bf16: %d (%s); cpuinfo says bf16 %s", rc, dg_last_error(), has ? "yes" : "no");
    dg_clear_error();
    dg_set_cpu_bf16(false);
}
