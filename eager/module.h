/* eager/module.h — the contract between the core library and the modules it opens on first use:
 * the CUDA backend (libdygraph-cuda.so.0), the NCCL transport (libdygraph-nccl.so.0) and the MPI
 * transport (libdygraph-mpi.so.0). A CPU-only program never maps CUDA, cuDNN, NCCL or MPI; a
 * program that asks for a GPU or a transport gets the module, or an error naming what is missing.
 *
 * A module links nothing of the core. The core hands it one function at init, `host_symbol`,
 * that returns the core's functions by name; the module's eager/module_shim.c (and
 * dist/module_shim.c) define the internal functions its sources call (dg_set_error_at,
 * dg_tensor_ptr, ...) as forwarders to them. So the same sources build into the core statically
 * or into a module, the core can be a static library or libdygraph.so, and the core's internals
 * stay hidden from the dynamic symbol table. */
#ifndef DG_EAGER_MODULE_H
#define DG_EAGER_MODULE_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever dg_backend, dg_tensor or a function handed through host_symbol changes, so a
 * module built from other sources is refused instead of misread. */
#define DG_MODULE_ABI 1

typedef struct dg_module_host {
    int abi;
    size_t tensor_size, backend_size;   /* sizeof as the core was built: a second guard */
    void *(*host_symbol)(const char *name);
} dg_module_host;

/* What every module exports (besides the entries named by its loader): 0, or an error with a
 * message in err. Called once, before any other entry. */
typedef int (*dg_module_init_fn)(const dg_module_host *host, char *err, size_t errlen);
#define DG_MODULE_INIT_SYMBOL "dg_module_init"
/* Marks a module's entries for the dynamic symbol table (modules build with hidden visibility). */
#define DG_MODULE_EXPORT __attribute__((visibility("default")))

/* The entry `symbol` of module `name` ("cuda", "nccl", "mpi"), opening and initialising the
 * module on first use; NULL with a message saying where it was looked for and why it failed.
 * A failure is remembered: later calls report it again without searching. Thread-safe. */
void *dg_module_symbol(const char *name, const char *symbol);
/* The entry when the module is already open, else NULL (nothing is opened, no error). */
void *dg_module_symbol_if_open(const char *name, const char *symbol);
/* Whether the module's file is present on the search path (nothing is loaded). */
bool dg_module_present(const char *name);
/* Adds a function modules may ask for by name (the layers above eager/, e.g. dist/, provide
 * theirs before opening a module that needs them). */
int dg_module_provide(const char *name, void *fn);

#ifdef __cplusplus
}
#endif

#endif
