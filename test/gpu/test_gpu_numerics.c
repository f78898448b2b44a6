/* test/gpu/test_gpu_numerics.c — the PyTorch-edge cases of test/numerics_cases.h on gpu:0: exact
 * int64 comparisons and comparisons under promotion (the device's compare kernel), integer
 * scalars outside the tensor's range, where with mixed dtypes, and the empty cases of
 * group_norm, logsumexp, embedding's max_norm and mean. Expected values are torch 1.13's. */
#include "gpu_compare.h"
#include "../numerics_cases.h"

Test(gpu_numerics, int64_comparisons_are_exact, .init = gt_gpu_begin) { nc_int64_compare(gt_dut()); }
Test(gpu_numerics, comparisons_promote_as_arithmetic, .init = gt_gpu_begin) { nc_compare_promotion(gt_dut()); }
Test(gpu_numerics, int32_scalar_out_of_range_wraps, .init = gt_gpu_begin) { nc_scalar_wrap_i32(gt_dut()); }
Test(gpu_numerics, int64_scalar_up_to_2p63_stays_integer, .init = gt_gpu_begin) { nc_scalar_big_i64(gt_dut()); }
Test(gpu_numerics, group_norm_empty_batch, .init = gt_gpu_begin) { nc_group_norm_empty(gt_dut()); }
Test(gpu_numerics, where_promotes_mixed_dtypes, .init = gt_gpu_begin) { nc_where_promotion(gt_dut()); }
Test(gpu_numerics, logsumexp_empty_axis_is_minus_inf, .init = gt_gpu_begin) { nc_logsumexp_empty(gt_dut()); }
Test(gpu_numerics, embedding_max_norm_empty_ids, .init = gt_gpu_begin) { nc_embedding_max_norm_empty(gt_dut()); }
Test(gpu_numerics, mean_of_nothing_is_nan, .init = gt_gpu_begin) { nc_mean_empty(gt_dut()); }
Test(gpu_numerics, int64_casts_round_once, .init = gt_gpu_begin) { nc_int64_cast(gt_dut()); }
