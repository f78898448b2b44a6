/* test/gpu/gpu_main.c — entry point of dygraph_gpu_tests. The suite needs gpu:0: where none is
 * usable (no driver, no device, a build without the CUDA backend) it prints one line saying why
 * and exits 0, so `make test` on a CPU-only machine shows the skip instead of a wall of failures.
 * `--probe` only answers whether a GPU is usable (exit 0) or not (exit 77, with the same line),
 * for the Makefile steps that need a GPU too (the MNIST sample, compute-sanitizer).
 *
 * Criterion runs every test in a worker started by exec, which does not run this main(): the
 * workers select gpu:0 themselves (gt_gpu_begin), and the CUDA context made here for the check is
 * never inherited across the fork.
 *
 * DG_GPU_TESTS_ON_CPU=1 runs the whole suite with the CPU as the device under test: a self-check
 * of the harness and the case tables for machines without a GPU (CPU against CPU must agree
 * exactly), not a test of the CUDA backend. */
#include "gpu_compare.h"

#define GT_SKIP_STATUS 77

int main(int argc, char **argv) {
    bool probe = false;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strcmp(argv[i], "--probe") == 0) probe = true;
        else argv[n++] = argv[i];
    }
    argc = n;
    argv[argc] = NULL;

    /* --probe answers for the GPU itself, whatever the self-check variable says */
    if (gt_on_cpu_selfcheck() && !probe) {
        printf("dygraph_gpu_tests: DG_GPU_TESTS_ON_CPU is set: the CPU stands in for gpu:0 (harness self-check)\n");
        fflush(stdout);
    } else if (dg_set_device("gpu:0") != 0) {
        printf("dygraph_gpu_tests: no usable GPU (%s): skipped\n", dg_last_error());
        fflush(stdout);
        return probe ? GT_SKIP_STATUS : 0;
    }
    if (dg_set_device("cpu") != 0) {
        fprintf(stderr, "dygraph_gpu_tests: set_device(cpu): %s\n", dg_last_error());
        return 1;
    }
    if (probe) return 0;

    struct criterion_test_set *tests = criterion_initialize();
    int rc = 0;
    if (criterion_handle_args(argc, argv, true)) rc = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return rc;
}
