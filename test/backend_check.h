/* test/backend_check.h — one check shared by the CPU suite (test_backend_table.c) and the GPU
 * suite (gpu/test_gpu_backend_table.c): a table's `supports` answers as its kernels do. For the
 * entries whose every operation takes the same dtypes (random, reduce's sum, argsort, unary's
 * relu), each dtype is sent through the table on a small tensor of the device, and whether the
 * entry accepted it must equal what `supports` says. Needs eager/backend.h and Criterion. */
#ifndef DG_TEST_BACKEND_CHECK_H
#define DG_TEST_BACKEND_CHECK_H

static dg_tensor *bc_on(dg_tensor *t, dg_device dev) {
    if (dev.type == DG_CPU) return t;
    dg_tensor *d = dg_to_device(t, dev);
    dg_tensor_free(t);
    return d;
}

static void bc_expect(const dg_backend *be, dg_be_entry e, dg_dtype dt, int rc) {
    bool says = be->supports(be, e, dt);
    cr_assert_eq(rc == 0, says, "%s on %s: the kernel answered %d (%s) but supports says %s", dg_backend_entry_name(e),
                 dg_dtype_name(dt), rc, rc ? dg_last_error() : "accepted", says ? "yes" : "no");
    if (rc) cr_assert_eq(rc, DG_EUNSUPPORTED, "%s on %s: %s", dg_backend_entry_name(e), dg_dtype_name(dt), dg_last_error());
    dg_clear_error();
}

static void check_supports_matches_kernels(dg_device dev) {
    const dg_backend *be = dg_backend_for(dev);
    cr_assert(be && be->supports, "%s", dg_last_error());
    static const dg_dtype all[] = { DG_F32, DG_F64, DG_I64, DG_I32, DG_F16, DG_BF16, DG_BOOL };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        dg_dtype dt = all[i];
        dg_tensor *x = bc_on(dg_zeros(DG_SHAPE(2, 3), dt), dev), *y = bc_on(dg_zeros(DG_SHAPE(2, 3), dt), dev);
        dg_tensor *s = bc_on(dg_zeros(DG_SHAPE(2, 1), dt), dev), *idx = bc_on(dg_zeros(DG_SHAPE(2, 3), DG_I64), dev);
        cr_assert(x && y && s && idx, "%s: %s", dg_dtype_name(dt), dg_last_error());
        bc_expect(be, DG_BE_random, dt, be->random(be, DG_RAND_UNIFORM, DG_KV(y), 0, 1, 1, 0));
        bc_expect(be, DG_BE_reduce, dt, be->reduce(be, DG_RED_SUM, DG_KV(x), DG_KV(s)));
        bc_expect(be, DG_BE_argsort, dt, be->argsort(be, DG_KV(x), DG_KV(idx), 2, 3, 1, false));
        bc_expect(be, DG_BE_unary, dt, be->unary(be, DG_UN_RELU, DG_KV(x), DG_KV(y), 0, 0));
        cr_assert_eq(be->synchronize(be), 0, "%s", dg_last_error());
        dg_tensor_free(x); dg_tensor_free(y); dg_tensor_free(s); dg_tensor_free(idx);
    }
}

#endif
