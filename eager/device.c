/* eager/device.c — the device registry: which backend table serves a device. The CPU table is
 * part of the core; the CUDA table comes from the CUDA module, opened the first time a GPU is
 * asked for (dygraph/module.h), so a CPU-only program never loads CUDA. */
#include "backend.h"
#include <dygraph/module.h>

typedef const dg_backend *(*backend_get_fn)(int index);

const dg_backend *dg_backend_for(dg_device d) {
    if (d.type == DG_CPU) return &dg_cpu_backend;
    if (d.type == DG_CUDA) {
        backend_get_fn get = (backend_get_fn)dg_module_symbol("cuda", "dg_cuda_backend_get");
        if (!get) {   /* say which device was asked for, keeping the loader's reason and location */
            char msg[DG_ERROR_MSG_LEN];
            snprintf(msg, sizeof msg, "%s", dg_last_error());
            const char *file = __FILE__;
            int line = __LINE__;
            dg_error_split_location(msg, &file, &line);
            dg_set_error_at(DG_EDEVICE, file, line, "gpu:%d requested but %s", d.index, msg);
            return NULL;
        }
        return get(d.index);
    }
    DG_ERR(DG_EDEVICE, "device type %d is not one this library knows (cpu, gpu)", (int)d.type);
    return NULL;
}

/* The backends that have started (for dg_shutdown and the memory calls): the CPU always; the
 * CUDA instances only when its module is open and has started them, so neither call ever
 * loads CUDA. */
int dg_backends_started(const dg_backend **out, int cap) {
    int n = 0;
    if (n < cap) out[n++] = &dg_cpu_backend;
    int (*started)(const dg_backend **, int) =
        (int (*)(const dg_backend **, int))dg_module_symbol_if_open("cuda", "dg_cuda_backends_started");
    if (started && n < cap) n += started(out + n, cap - n);
    return n;
}
