/* test/compile_fail/kcall_entry.c — DG_KCALL takes required entries only (eager/backend.h).
 * `make test-run` compiles this twice: with ENTRY=batch_norm (required) it must compile, with
 * ENTRY=batch_norm_relu (optional, same signature) it must not. */
#include "../../eager/backend.h"

/* one level more, so that ENTRY is replaced before DG_KCALL pastes it */
#define KCALL(t, entry, ...) DG_KCALL(t, entry, __VA_ARGS__)

int call_entry(const dg_tensor *x, dg_tensor *y, dg_tensor *mean, dg_tensor *invstd) {
    return KCALL(x, ENTRY, DG_KV(x), NULL, NULL, DG_KV(y), DG_KV(mean), DG_KV(invstd), true, 1e-5, 1, 1, 1);
}
