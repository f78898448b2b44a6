/* dygraph/module.h — the contract between the library and the modules it opens on first use:
 * the CUDA backend (libdygraph-cuda.so.0), the NCCL transport (libdygraph-nccl.so.0), the MPI
 * transport (libdygraph-mpi.so.0) and the parameter server's ZeroMQ transport
 * (libdygraph-zmq.so.0), or a module of an embedder's own. A CPU-only program never maps CUDA,
 * cuDNN, NCCL, MPI or ZeroMQ; a program that asks for a GPU or a transport gets the module,
 * or an error naming the file and the folders searched.
 *
 * A module links nothing of the library. At init the library hands it `host_symbol`, which
 * returns the library's functions by name; the module defines the functions its sources call
 * as forwarders to them (DG_MODULE_FN). So the library may be a static archive or
 * libdygraph.so, and its internals stay out of the dynamic symbol table.
 *
 * Search order: the folders of $DG_MODULE_PATH (colon-separated); the folder of the object
 * holding the library (libdygraph.so, or the program linked with libdygraph.a) and its ../lib;
 * the library folder the build was configured for; then the dynamic linker's own search. */
#ifndef DYGRAPH_MODULE_H
#define DYGRAPH_MODULE_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped whenever a structure shared with modules or a function handed through host_symbol
 * changes, so that a module built from other sources is refused instead of misread. */
#define DG_MODULE_ABI 5

typedef struct dg_module_host {
    int abi;
    size_t tensor_size, backend_size;   /* sizeof as the library was built: a second guard */
    void *(*host_symbol)(const char *name);   /* "NAME", or "module:NAME" for another module's entry */
} dg_module_host;

/* What every module exports besides the entries its users look up: 0, or an error with a
 * message in err. Called once, before any other entry. */
typedef int (*dg_module_init_fn)(const dg_module_host *host, char *err, size_t errlen);
#define DG_MODULE_INIT_SYMBOL "dg_module_init"
/* Marks a module's entries for the dynamic symbol table (modules build with hidden visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define DG_MODULE_EXPORT __attribute__((visibility("default")))
#else
#define DG_MODULE_EXPORT
#endif

/* The entry `symbol` of module `name` ("cuda", "nccl", "mpi", "zmq"), opening and initialising the
 * module on first use; NULL with a message saying where it was looked for and why it failed. A
 * failure is remembered: later calls report it again without searching. Thread-safe. */
DG_API void *dg_module_symbol(const char *name, const char *symbol);
/* The entry when the module is already open, else NULL (nothing is opened, no error). */
DG_API void *dg_module_symbol_if_open(const char *name, const char *symbol);
/* Whether the module's file is present on the search path (nothing is loaded). */
DG_API bool dg_module_present(const char *name);
/* Adds a function modules may ask for by name (the layers that open a module provide what it
 * needs of them first, e.g. the rendezvous store for the NCCL transport). */
DG_API int dg_module_provide(const char *name, void *fn);

/* ---- inside a module ----
 * The module's init (built into it from eager/module_shim.c for the library's own modules)
 * keeps the host; dg_module_host_symbol asks it. DG_MODULE_FN(T, "name") declares `fn`, the
 * library's function `name` of type T, looked up once (lookups are idempotent, so threads racing
 * the first call store the same pointer). */
void *dg_module_host_symbol(const char *name);
#define DG_MODULE_FN(T, name)                                                            \
    static void *volatile slot_;                                                         \
    void *p_ = __atomic_load_n(&slot_, __ATOMIC_ACQUIRE);                                \
    if (!p_) { p_ = dg_module_host_symbol(name); __atomic_store_n(&slot_, p_, __ATOMIC_RELEASE); } \
    __typeof__(T) fn = (T)p_

#ifdef __cplusplus
}
#endif

#endif
