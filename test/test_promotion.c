/* test/test_promotion.c — integer arithmetic and PyTorch's type promotion on the CPU (the cases are
 * in test/int_promotion_cases.h, shared with the GPU suite). */
#include "test_util.h"
#include "int_promotion_cases.h"

Test(promotion, integer_arithmetic_and_torch_promotion_on_the_cpu) {
    size_t live = dg_live_tensors();
    ip_all_cases(dg_cpu());
    cr_assert_eq(dg_live_tensors(), live, "promoted ops left %zu tensors alive", dg_live_tensors() - live);
}
