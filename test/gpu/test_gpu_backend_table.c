/* test/gpu/test_gpu_backend_table.c — the device under test's backend table as the registry hands
 * it out: it passes the load-time check, its `supports` answers as its kernels do
 * (test/backend_check.h), and on the CUDA table the optional entries it has and lacks and
 * dg_backend_require's message naming it. */
#include "gpu_compare.h"
#include "../../eager/backend.h"
#include "../backend_check.h"

Test(gpu_backend_table, the_table_passes_its_check_and_supports_answers_as_the_kernels_do) {
    gt_gpu_begin();
    const dg_backend *be = dg_backend_for(gt_dut());
    cr_assert(be, "%s", dg_last_error());
    cr_assert_eq(dg_backend_validate(be), 0, "%s", dg_last_error());
    check_supports_matches_kernels(gt_dut());
}

Test(gpu_backend_table, the_cuda_table_declares_its_optional_entries_and_dtypes) {
    gt_gpu_begin();
    if (gt_on_cpu_selfcheck()) return;   /* the CPU's table is checked in the main suite */
    const dg_backend *be = dg_backend_for((dg_device){ DG_CUDA, 0 });
    cr_assert(be, "%s", dg_last_error());
    cr_assert(dg_backend_has(be, DG_BE_copy_peer) && dg_backend_has(be, DG_BE_host_alloc) && dg_backend_has(be, DG_BE_stream));
    cr_assert(!dg_backend_has(be, DG_BE_batch_norm_relu) && !dg_backend_has(be, DG_BE_batch_norm_relu_backward));
    dg_be_entry fused[] = { DG_BE_batch_norm_relu };
    cr_assert_eq(dg_backend_require(be, fused, 1, DG_F32, "batch_norm_relu"), DG_EUNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "op batch_norm_relu needs backend entry 'batch_norm_relu', which cuda on gpu:0 does not provide"),
              "%s", dg_last_error());
    dg_be_entry draw[] = { DG_BE_random };
    cr_assert_eq(dg_backend_require(be, draw, 1, DG_BF16, "rand"), 0, "%s", dg_last_error());
    cr_assert_eq(dg_backend_require(be, draw, 1, DG_I64, "randint"), DG_EUNSUPPORTED);
    cr_assert(strstr(dg_last_error(), "op randint needs backend entry 'random' for dtype int64, which cuda on gpu:0 does not provide"),
              "%s", dg_last_error());
}
