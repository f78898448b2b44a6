/* eager/device.c — the device registry: which backend table serves a device. The CPU table is
 * part of the core; the CUDA table comes from the CUDA module, opened the first time a GPU is
 * asked for (dygraph/module.h), so a CPU-only program never loads CUDA. Every instance passes
 * dg_backend_validate before it is handed out, so an op never meets a NULL required entry. */
#include "backend.h"
#include <dygraph/module.h>

typedef const dg_backend *(*backend_get_fn)(int index);

/* Instances that passed the check: each is checked once, and the registry's hot path (every GPU
 * tensor asks it) costs a few compares. One that fails is never remembered here, so every later
 * request for its device fails again with the same message. Past the slots (more instances than
 * any build makes) the check simply runs on every request. */
#define CHECKED_SLOTS 32
static const dg_backend *g_checked[CHECKED_SLOTS];

static const dg_backend *checked(const dg_backend *be) {
    if (!be) return NULL;
    for (int i = 0; i < CHECKED_SLOTS; i++) {
        const dg_backend *c = __atomic_load_n(&g_checked[i], __ATOMIC_ACQUIRE);
        if (c == be) return be;
        if (!c) break;
    }
    if (dg_backend_validate(be)) return NULL;
    for (int i = 0; i < CHECKED_SLOTS; i++) {
        const dg_backend *expect = NULL;
        if (__atomic_compare_exchange_n(&g_checked[i], &expect, be, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE) || expect == be) break;
    }
    return be;
}

const dg_backend *dg_backend_for(dg_device d) {
    if (d.type == DG_CPU) return checked(&dg_cpu_backend);
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
        return checked(get(d.index));
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
