/* test/test_registry.c — the registry harness on the CPU (test/registry_cases.h): every op of
 * eager/ops/registry.h has a line there, and every line passes in every float dtype, with float64
 * gradients checked by finite differences and each exportable op written to ONNX. */
#include "registry_cases.h"

/* Every op of the registry has a harness line: a new op without one fails here, by name. */
Test(registry, every_op_has_a_harness_line) {
    char missing[2048] = "";
    for (int op = 0; op < DG_OP_COUNT; op++) {
        bool found = false;
        for (int k = 0; k < RC_N_CASES && !found; k++) found = rc_cases[k].op == (dg_op_id)op;
        if (!found) snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", dg_op_name(op));
    }
    cr_assert(!missing[0], "registry ops with no line in test/registry_cases.h:%s", missing);
}

/* Names are unique and each op's registry line is self-consistent. */
Test(registry, names_are_unique_and_lines_consistent) {
    for (int a = 0; a < DG_OP_COUNT; a++) {
        cr_assert_eq(dg_op_find(dg_op_name(a)), a, "op %d '%s' is not found by its name (a duplicate?)", a, dg_op_name(a));
        const dg_op_info *i = &dg_op_table[a];
        cr_assert(i->kind != DG_OPK_COMPOSITE || i->entries == 0, "%s: a composite calls no backend entry itself", i->name);
        cr_assert(i->kind != DG_OPK_PRIM || i->onnx != DG_ONNX_PARTS, "%s: a primitive has no parts to export", i->name);
    }
}

Test(registry, every_op_in_every_dtype_on_the_cpu) {
    rc_report r = { 0 };
    int n = rc_run_device(dg_cpu(), true, &r);
    fprintf(stderr, "registry harness: %d ops, %d op x dtype runs on cpu, %d ONNX exports, %d failed\n", RC_N_CASES, n, r.onnx,
            r.failed);
    cr_assert_eq(r.failed, 0, "%d failures; first: %s | %s | %s | %s", r.failed, r.first[0], r.first[1], r.first[2], r.first[3]);
}
