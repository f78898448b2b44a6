/* test/modules/incomplete_cuda.c — a stand-in for the CUDA module whose table lacks two required
 * entries (gemm, conv2d), built as libdygraph-cuda.so.0 into $(BUILD)/test_modules. The device
 * registry must refuse its instances with a message naming them (test/test_backend_table.c);
 * its entries are never called, so every present one is the same do-nothing function. */
#include <dygraph/module.h>

#include "../../eager/backend.h"

static void never_called(void) {}
static dg_backend g_table;

DG_MODULE_EXPORT int dg_module_init(const dg_module_host *host, char *err, size_t errlen) {
    if (!host || host->abi != DG_MODULE_ABI || host->backend_size != sizeof(dg_backend)) {
        snprintf(err, errlen, "incomplete_cuda: built against another interface");
        return DG_EUNSUPPORTED;
    }
    return 0;
}

DG_MODULE_EXPORT const dg_backend *dg_cuda_backend_get(int index) {
    g_table = (dg_backend){ .name = "cuda", .type = DG_CUDA, .index = index };
    void (*fn)(void) = never_called;
    for (int e = 0; e < DG_BE_COUNT; e++)
        if (e != DG_BE_gemm && e != DG_BE_conv2d && e != DG_BE_host_alloc && e != DG_BE_host_free)
            memcpy((char *)&g_table + DG_BE_ENTRY_OFFSET(e), &fn, sizeof fn);
    return &g_table;
}
