/* test/test_numerics.c — results equal to PyTorch 1.13's at the edges of the dtypes and shapes, on
 * the CPU (the cases are in test/numerics_cases.h, shared with the GPU suite): exact int64
 * comparisons, comparisons under type promotion, integer scalars outside the tensor's range,
 * where with mixed dtypes, and the empty cases of group_norm, logsumexp, embedding and mean. */
#include "test_util.h"
#include "numerics_cases.h"

/* Each case runs with no scope open and must leave no tensor alive. */
#define NUMERICS_TEST(name, fn)                                                                  \
    Test(numerics, name) {                                                                       \
        size_t live = dg_live_tensors();                                                         \
        fn(dg_cpu());                                                                            \
        cr_assert_eq(dg_live_tensors(), live, #fn " left %zu tensors alive", dg_live_tensors() - live); \
    }

NUMERICS_TEST(int64_comparisons_are_exact, nc_int64_compare)
NUMERICS_TEST(comparisons_promote_as_arithmetic, nc_compare_promotion)
NUMERICS_TEST(int32_scalar_out_of_range_wraps, nc_scalar_wrap_i32)
NUMERICS_TEST(int64_scalar_up_to_2p63_stays_integer, nc_scalar_big_i64)
NUMERICS_TEST(group_norm_empty_batch, nc_group_norm_empty)
NUMERICS_TEST(where_promotes_mixed_dtypes, nc_where_promotion)
NUMERICS_TEST(logsumexp_empty_axis_is_minus_inf, nc_logsumexp_empty)
NUMERICS_TEST(embedding_max_norm_empty_ids, nc_embedding_max_norm_empty)
NUMERICS_TEST(mean_of_nothing_is_nan, nc_mean_empty)
NUMERICS_TEST(int64_casts_round_once, nc_int64_cast)
