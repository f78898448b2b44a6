/* eager/module_shim.c — built into every module (never into the core): the module's entry
 * dg_module_init, and the core functions the module's sources call, each forwarding to the
 * function the core handed over by name (dygraph/module.h). Hidden like everything in a module,
 * so they never collide with the core's own definitions in the same process. */
#include <dygraph/module.h>

#include "backend.h"
#include <stdarg.h>

static dg_module_host g_host;   /* a copy: the core's may not outlive the init call */

void *dg_module_host_symbol(const char *name) {
    void *fn = g_host.host_symbol ? g_host.host_symbol(name) : NULL;
    /* a module built against a newer core asking an older one: the build pairs them, so this is
     * a packaging error worth naming rather than a crash */
    if (!fn) fprintf(stderr, "dygraph module: the core does not provide %s (core and module from different builds)\n", name);
    return fn;
}

DG_MODULE_EXPORT int dg_module_init(const dg_module_host *host, char *err, size_t errlen) {
    if (!host || host->abi != DG_MODULE_ABI || host->tensor_size != sizeof(struct dg_tensor) ||
        host->backend_size != sizeof(dg_backend)) {
        snprintf(err, errlen, "module interface %d, core interface %d (tensor %zu/%zu bytes, backend table %zu/%zu bytes): "
                 "core and module come from different builds", DG_MODULE_ABI, host ? host->abi : -1,
                 sizeof(struct dg_tensor), host ? host->tensor_size : 0, sizeof(dg_backend), host ? host->backend_size : 0);
        return DG_EUNSUPPORTED;
    }
    g_host = *host;
    return 0;
}

void dg_set_error_at(int status, const char *file, int line, const char *fmt, ...) {
    DG_MODULE_FN(void (*)(int, const char *, int, const char *, ...), "dg_set_error_at");
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (fn) fn(status, file, line, "%s", msg);
}

void dg_error_save(dg_error_saved *s) { DG_MODULE_FN(void (*)(dg_error_saved *), "dg_error_save"); if (fn) fn(s); }
void dg_error_restore(const dg_error_saved *s) { DG_MODULE_FN(void (*)(const dg_error_saved *), "dg_error_restore"); if (fn) fn(s); }
bool dg_has_error(void) { DG_MODULE_FN(bool (*)(void), "dg_has_error"); return fn && fn(); }
void dg_clear_error(void) { DG_MODULE_FN(void (*)(void), "dg_clear_error"); if (fn) fn(); }
const char *dg_last_error(void) { DG_MODULE_FN(const char *(*)(void), "dg_last_error"); return fn ? fn() : ""; }
int dg_last_status(void) { DG_MODULE_FN(int (*)(void), "dg_last_status"); return fn ? fn() : DG_EUNSUPPORTED; }
const char *dg_dtype_name(dg_dtype dt) { DG_MODULE_FN(const char *(*)(dg_dtype), "dg_dtype_name"); return fn ? fn(dt) : "?"; }
size_t dg_dtype_size(dg_dtype dt) { DG_MODULE_FN(size_t (*)(dg_dtype), "dg_dtype_size"); return fn ? fn(dt) : 0; }
void *dg_tensor_ptr(const dg_tensor *t) { DG_MODULE_FN(void *(*)(const dg_tensor *), "dg_tensor_ptr"); return fn ? fn(t) : NULL; }
char *dg_shape_fmt(const int64_t *shape, int ndim, char *buf, size_t len) {
    DG_MODULE_FN(char *(*)(const int64_t *, int, char *, size_t), "dg_shape_fmt");
    if (fn) return fn(shape, ndim, buf, len);
    if (len) buf[0] = 0;
    return buf;
}
bool dg_get_allow_tf32(void) { DG_MODULE_FN(bool (*)(void), "dg_get_allow_tf32"); return fn && fn(); }
bool dg_get_exact_gpu_conv(void) { DG_MODULE_FN(bool (*)(void), "dg_get_exact_gpu_conv"); return fn && fn(); }
dg_device dg_get_device(void) { DG_MODULE_FN(dg_device (*)(void), "dg_get_device"); return fn ? fn() : (dg_device){ DG_CPU, 0 }; }
