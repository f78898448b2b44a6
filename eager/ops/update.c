/* eager/ops/update.c — the optimizer step as one op (dg_fused_update): the device's backend
 * runs the element rules of eager/update_rule.h over every parameter of a group in one call. */
#include "../backend.h"

int dg_fused_update(dg_device device, dg_dtype dtype, const dg_update_params *u, const dg_update_tensor *t, int n) {
    DG_CHECK_INT(u && (t || n == 0) && n >= 0, "fused_update: params or tensors are NULL");
    DG_CHECK_INT(dtype == DG_F32 || dtype == DG_F64, "fused_update: parameters are %s; the rules run in float32/float64 (half parameters are stepped through f32 master weights)",
                 dg_dtype_name(dtype));
    DG_CHECK_INT((unsigned)u->kind <= DG_UPD_ADADELTA, "fused_update: unknown rule %d", (int)u->kind);
    if (n == 0) return 0;
    const dg_backend *be = dg_backend_for(device);
    if (!be) return dg_last_status() ? dg_last_status() : DG_EDEVICE;
    if (!be->fused_update) {
        DG_ERR(DG_EUNSUPPORTED, "fused_update: the %s backend has no fused update", be->name);
        return DG_EUNSUPPORTED;
    }
    return be->fused_update(be, u, dtype, t, n);
}
