/* test/gpu/test_gpu_registry.c — the registry harness (test/registry_cases.h) on gpu:0: every op
 * line in every float dtype, forward against the CPU's float64 result, gradients against the CPU's
 * float64 gradients (which the CPU suite checks by finite differences), the entry path under the
 * op's own id, and ownership. */
#include "gpu_compare.h"
#include "../registry_cases.h"

Test(gpu_registry, every_op_in_every_dtype_on_the_gpu, .init = gt_gpu_begin) {
    rc_report r = { 0 };
    int n = rc_run_device(gt_dut(), false, &r);
    fprintf(stderr, "registry harness: %d ops, %d op x dtype runs on gpu:0, %d failed\n", RC_N_CASES, n, r.failed);
    cr_assert_eq(r.failed, 0, "%d failures; first: %s | %s | %s | %s", r.failed, r.first[0], r.first[1], r.first[2], r.first[3]);
}
