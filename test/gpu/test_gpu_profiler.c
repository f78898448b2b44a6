/* test/gpu/test_gpu_profiler.c — the profiler on the device under test: a small network trained a
 * few steps on it under dg_profiler_start. On a GPU each backward rule also has its device time,
 * an event pair on the compute stream read at stop ("kernel" rows, one call per rule run, on the
 * row "gpu:0 stream (device time)" of the trace, nested as on the host), and the GPU's caching
 * allocator is a memory counter; on the CPU (the suite's self-check) there is no kernel row. The
 * test ends with dg_shutdown, which destroys the device's pooled timing events. */
#include "gpu_compare.h"
#include <unistd.h>

#define STEPS 3

static const dg_profiler_stat *find(const dg_profiler_stat *s, int n, const char *name, dg_profiler_category cat) {
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0 && s[i].category == cat) return &s[i];
    return NULL;
}

Test(gpu_profiler, device_time_of_the_backward_rules) {
    gt_gpu_begin();
    gt_use(gt_dut_name());
    dg_manual_seed(3);
    dg_layer *net = dg_nn_sequential(3, dg_nn_linear(8, 16), dg_nn_relu(), dg_nn_linear(16, 4));
    int n = 0;
    dg_tensor **ps = dg_layer_parameters(net, &n);
    dg_optimizer *opt = ps ? dg_sgd(ps, n, dg_sgd_default_params()) : NULL;
    free(ps);
    cr_assert(net && opt, "%s", dg_last_error());
    char path[] = "/tmp/dg_gpu_profXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    dg_profiler_params p = dg_profiler_default_params();
    p.trace_path = path;
    cr_assert_eq(dg_profiler_start(p), 0, "%s", dg_last_error());
    for (int step = 0; step < STEPS; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *x = dg_uniform(DG_SHAPE(32, 8), -1, 1, DG_F32);
        dg_tensor *loss = dg_mse_loss(dg_forward(net, x), dg_zeros(DG_SHAPE(32, 4), DG_F32));
        cr_assert(loss && dg_backward(loss) == 0 && dg_optimizer_step(opt) == 0, "step %d: %s", step, dg_last_error());
        dg_optimizer_clear_grad(opt);
        dg_scope_end(s);
    }
    cr_assert_eq(dg_profiler_stop(), 0, "%s", dg_last_error());
    dg_profiler_stat st[64];
    int rows = dg_profiler_key_averages(st, 64);
    cr_assert(rows > 0 && rows <= 64, "%d rows: %s", rows, dg_last_error());
    const dg_profiler_stat *host = find(st, rows, "relu_backward", DG_PROFILER_OP_BACKWARD),
                           *dev = find(st, rows, "relu_backward", DG_PROFILER_KERNEL),
                           *mm = find(st, rows, "matmul_backward", DG_PROFILER_KERNEL);
    cr_assert(host && host->calls == STEPS, "relu_backward's host rows");
    FILE *f = fopen(path, "r");
    cr_assert(f);
    static char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = 0;
    fclose(f);
    unlink(path);
    if (gt_dut().type == DG_CPU) {
        for (int i = 0; i < rows; i++) cr_assert_neq(st[i].category, DG_PROFILER_KERNEL, "a kernel row on the CPU: %s", st[i].name);
    } else {
        cr_assert(dev, "no device time for relu_backward");
        cr_assert_eq(dev->calls, STEPS, "relu_backward's device time: %lld calls", (long long)dev->calls);
        cr_assert(mm && mm->calls == 2 * STEPS, "matmul_backward's device time: %lld calls", mm ? (long long)mm->calls : -1LL);
        cr_assert(dev->total_us > 0 && dev->total_us < 60e6, "relu_backward's device time %.3f us", dev->total_us);
        cr_assert(strstr(buf, "\"args\":{\"name\":\"gpu:0 stream (device time)\"}"), "no row for the GPU's stream");
        cr_assert(strstr(buf, "\"name\":\"relu_backward\",\"cat\":\"kernel\""), "no kernel event in the trace");
        cr_assert(strstr(buf, "{\"ph\":\"C\",\"name\":\"memory gpu:0\""), "no memory counter of the GPU");
    }
    dg_optimizer_free(opt);
    dg_layer_free(net);
    gt_use("cpu");
    dg_shutdown();   /* the device's profiler events go with the rest of its state */
}
