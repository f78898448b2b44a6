/* test/test_errors.c — the error model of include/dygraph/core.h: a new failure replaces the
 * message and status, a NULL handed down a chain of ops keeps the failure that produced it, a
 * successful call clears nothing, and the places that wrap or add to a callee's message do so
 * only for a failure of that call (never for an older, unrelated one). */
#include "test_util.h"
#include <dygraph/nn.h>
#include <dygraph/data.h>

/* Op A fails, an unrelated op B fails: the message and status are B's. */
Test(errors, a_new_failure_replaces_the_message) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(5), DG_F32);
    cr_assert_null(dg_add(a, b));
    cr_assert(strstr(dg_last_error(), "add:") == dg_last_error(), "%s", dg_last_error());
    cr_assert_eq(dg_last_status(), DG_EINVAL);
    cr_assert_null(dg_matmul(a, a));
    cr_assert(strstr(dg_last_error(), "matmul:") == dg_last_error(), "B's message, not A's: %s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "3 vs 2"), "%s", dg_last_error());
    /* a different status replaces the status too */
    cr_assert_null(dg_load_safetensors("build/no/such/file.safetensors"));
    cr_assert_eq(dg_last_status(), DG_EIO);
    cr_assert(strstr(dg_last_error(), "load_safetensors"), "%s", dg_last_error());
    dg_clear_error();
    dg_scope_end(s);
}

/* A NULL passed through three ops still reports the op that failed, even with an older
 * failure recorded before it. */
Test(errors, null_through_a_chain_reports_the_first_failure) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(5), DG_F32);
    cr_assert_null(dg_reshape(a, DG_SHAPE(7)));   /* an unrelated, earlier failure */
    cr_assert(strstr(dg_last_error(), "reshape"), "%s", dg_last_error());
    dg_tensor *y = dg_mean_all(dg_relu(dg_exp(dg_add(a, b))));
    cr_assert_null(y);
    cr_assert(strstr(dg_last_error(), "add:") == dg_last_error(), "the add, not the reshape or a NULL: %s", dg_last_error());
    cr_assert_neq(dg_backward(y), 0);
    cr_assert(isnan(dg_item(y)));
    cr_assert(strstr(dg_last_error(), "add:") == dg_last_error(), "still the add: %s", dg_last_error());
    /* with nothing recorded, a NULL says it is NULL and names the op that got it */
    dg_clear_error();
    cr_assert_null(dg_exp(NULL));
    cr_assert(strstr(dg_last_error(), "exp") && strstr(dg_last_error(), "NULL"), "%s", dg_last_error());
    dg_clear_error();
    dg_scope_end(s);
}

/* A successful call leaves the last failure readable; only dg_clear_error forgets it. */
Test(errors, a_successful_call_does_not_clear) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32);
    cr_assert_null(dg_slice(a, 5, 0, 1, 1));
    char first[512];
    snprintf(first, sizeof first, "%s", dg_last_error());
    cr_assert(strstr(first, "slice"), "%s", first);
    cr_assert_not_null(dg_add(a, a));
    cr_assert_str_eq(dg_last_error(), first, "a success does not clear");
    cr_assert_eq(dg_last_status(), DG_EINVAL);
    dg_clear_error();
    cr_assert_str_eq(dg_last_error(), "");
    cr_assert_eq(dg_last_status(), 0);
    dg_scope_end(s);
}

/* Layers: a layer's own error is a new failure; a forward that returns NULL without saying why
 * is reported as such even when an older message is recorded; a NULL input keeps the message of
 * the failure that made it. */
static dg_tensor *silent_forward(dg_layer *self, const dg_tensor *x) { return NULL; }

Test(errors, layer_errors_and_propagation) {
    dg_scope *s = dg_scope_begin();
    dg_clear_error();
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32);
    cr_assert_null(dg_reshape(a, DG_SHAPE(7)));   /* an older failure */
    dg_layer *fc = dg_nn_linear(4, 2);
    cr_assert_null(dg_forward(fc, a));            /* 3 features, want 4 */
    cr_assert(strstr(dg_last_error(), "Linear") == dg_last_error(), "the layer's error: %s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "expected 4"), "%s", dg_last_error());

    static const dg_layer_class silent_class = DG_LAYER_CLASS("Silent");
    dg_layer *silent = dg_layer_new(&silent_class, silent_forward, NULL, NULL);
    cr_assert_null(dg_reshape(a, DG_SHAPE(7)));
    cr_assert_null(dg_forward(silent, a));
    cr_assert(strstr(dg_last_error(), "Silent") && strstr(dg_last_error(), "without an error message"),
              "not the older reshape message: %s", dg_last_error());

    /* the input is NULL because the add failed: the add's message stands */
    cr_assert_null(dg_forward(fc, dg_add(a, dg_ones(DG_SHAPE(5), DG_F32))));
    cr_assert(strstr(dg_last_error(), "add:") == dg_last_error(), "%s", dg_last_error());
    /* a constructor handed a failed constructor keeps that one's message */
    cr_assert_null(dg_nn_sequential(2, dg_nn_linear(-1, 2), dg_nn_relu()));
    cr_assert(strstr(dg_last_error(), "Linear") && strstr(dg_last_error(), "in_features"), "%s", dg_last_error());
    dg_layer_free(fc);
    dg_layer_free(silent);
    dg_clear_error();
    dg_scope_end(s);
}

/* A dataset whose get fails without a message: dg_dataset_get says so, rather than wrapping an
 * older, unrelated message as if it were this get's. One that says why is wrapped once. */
static int64_t ds_len(void *self) { return 4; }
static int ds_get_silent(void *self, int64_t index, uint64_t seed, dg_sample *out) { return DG_EFORMAT; }
static int ds_get_says(void *self, int64_t index, uint64_t seed, dg_sample *out) {
    return dg_dataset_error("record %lld is truncated", (long long)index);
}

Test(errors, dataset_get_wraps_only_its_own_failure) {
    dg_clear_error();
    dg_dataset *silent = dg_dataset_new(&(dg_dataset_vtable){ .len = ds_len, .get = ds_get_silent }, NULL, "silent");
    dg_dataset *says = dg_dataset_new(&(dg_dataset_vtable){ .len = ds_len, .get = ds_get_says }, NULL, "says");
    cr_assert(silent && says, "%s", dg_last_error());
    dg_tensor *a = dg_ones(DG_SHAPE(2), DG_F32);
    cr_assert_null(dg_reshape(a, DG_SHAPE(3)));   /* older and unrelated */
    dg_sample smp;
    cr_assert_eq(dg_dataset_get(silent, 1, 0, &smp), DG_EFORMAT);
    cr_assert(strstr(dg_last_error(), "dataset 'silent' index 1: get failed without a message"), "%s", dg_last_error());
    cr_assert_null(strstr(dg_last_error(), "reshape"), "%s", dg_last_error());
    cr_assert_eq(dg_dataset_get(says, 2, 0, &smp), DG_EFORMAT);
    cr_assert(strstr(dg_last_error(), "dataset 'says' index 2: record 2 is truncated"), "%s", dg_last_error());
    cr_assert_eq(dg_last_status(), DG_EFORMAT);
    dg_tensor_free(a);
    dg_dataset_free(silent);
    dg_dataset_free(says);
    dg_clear_error();
}

/* A failure the library handles itself (a launcher's GPU flag on a machine without one falls
 * back to the CPU) leaves the caller's last message exactly as it was: neither replaced nor
 * cleared. */
Test(errors, a_handled_failure_leaves_the_last_message_alone) {
    bool gpu = dg_set_device("gpu:0") == 0;
    dg_set_device("cpu");
    if (gpu) { cr_log_warn("a GPU is usable here: nothing to check"); return; }
    dg_tensor *a = dg_ones(DG_SHAPE(2), DG_F32);
    cr_assert_null(dg_reshape(a, DG_SHAPE(3)));
    char before[512];
    snprintf(before, sizeof before, "%s", dg_last_error());
    setenv("FLAGS_selected_gpus", "0", 1);
    unsetenv("DG_DEVICE");
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    cr_assert_eq(dg_init(&ip), 0, "%s", dg_last_error());
    unsetenv("FLAGS_selected_gpus");
    cr_assert_str_eq(dg_last_error(), before, "the fallback's own failure left no trace");
    cr_assert_eq(dg_last_status(), DG_EINVAL);
    dg_tensor_free(a);
    dg_clear_error();
}

/* Asking for a missing GPU names the call and keeps the backend's reason. */
Test(errors, set_device_keeps_the_backends_reason) {
    if (dg_set_device("gpu:0") == 0) { dg_set_device("cpu"); cr_log_warn("a GPU is usable here"); return; }
    dg_tensor *a = dg_ones(DG_SHAPE(2), DG_F32);
    cr_assert_null(dg_reshape(a, DG_SHAPE(3)));
    cr_assert_eq(dg_set_device("gpu:1"), DG_EDEVICE);
    const char *m = dg_last_error();
    cr_assert(strstr(m, "set_device") && strstr(m, "gpu:1"), "%s", m);
    cr_assert_null(strstr(m, "reshape"), "%s", m);
    dg_tensor_free(a);
    dg_clear_error();
}

/* Messages that say what is wrong: a NULL source, an axis out of range, a repeated axis. */
Test(errors, unclear_cases_name_what_is_wrong) {
    dg_tensor *t = dg_zeros(DG_SHAPE(2, 3), DG_F32);
    cr_assert_eq(dg_copy_from_host(t, NULL, 8), DG_EINVAL);
    cr_expect(strstr(dg_last_error(), "copy_from_host: src is NULL"), "%s", dg_last_error());
    cr_expect_eq(dg_dim(t, 100), -1);
    cr_expect(strstr(dg_last_error(), "dim: axis 100 out of range for [2, 3]"), "%s", dg_last_error());
    cr_expect_eq(dg_dim(t, -1), 3, "a negative axis counts from the end");
    int axes[2] = { 1, -1 };
    cr_expect_null(dg_sum(t, axes, 2, false));
    cr_expect(strstr(dg_last_error(), "sum: axis 1 of [2, 3] appears more than once"), "%s", dg_last_error());
    cr_expect_null(dg_mean(t, axes, 2, false));
    cr_expect(strstr(dg_last_error(), "mean: axis 1"), "%s", dg_last_error());
    dg_tensor_free(t);
}
