/* eager/module_shim.h — for the forwarders a module defines (eager/module_shim.c,
 * dist/module_shim.c): each looks its core function up once, by name. */
#ifndef DG_EAGER_MODULE_SHIM_H
#define DG_EAGER_MODULE_SHIM_H

#include <stdatomic.h>

void *dg_shim_host_symbol(const char *name);

/* Declares `fn`, the core's function `name` of type T, resolved on first use. Lookups are
 * idempotent, so two threads racing the first call store the same pointer. */
#define DG_SHIM_FN(T, name)                                                              \
    static _Atomic(void *) slot_;                                                        \
    void *p_ = atomic_load_explicit(&slot_, memory_order_acquire);                       \
    if (!p_) { p_ = dg_shim_host_symbol(name); atomic_store_explicit(&slot_, p_, memory_order_release); } \
    __typeof__(T) fn = (T)p_

#endif
