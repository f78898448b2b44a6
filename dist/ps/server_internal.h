/* dist/ps/server_internal.h — a parameter server's state, shared by its request handler
 * (server.c) and its save / load (server_io.c). */
#ifndef DG_DIST_PS_SERVER_INTERNAL_H
#define DG_DIST_PS_SERVER_INTERNAL_H

#include <dygraph.h>
#include "proto.h"
#include "server.h"
#include "table_sparse.h"

typedef struct ps_table {
    bool made;
    /* a sparse table (SPARSE_INIT) instead of a dense one: its rows, and in sync mode the sum of
     * this version's pushes so far as rows of a second table that starts at zero */
    dg_ps_sparse_table *sparse, *pending;
    dg_ps_init_msg init;      /* the INIT it was made with: geometry, mode, optimizer */
    dg_tensor *value;          /* [len] f32 leaf */
    dg_optimizer *opt;
    uint64_t version;          /* steps applied */
    float *acc;                /* sync: the sum of this version's pushes so far */
    unsigned char *pushed;     /* sync: which workers pushed for this version */
    uint32_t n_pushed;
} ps_table;

struct dg_ps_server {
    ps_table t[DG_PS_MAX_TABLES];
    int n_workers;             /* from the environment; every INIT must agree */
    unsigned char stopped[DG_PS_MAX_WORKERS];
    int n_stopped;
};

void dg_ps_table_clear(ps_table *t);
/* The optimizer a dense table runs: the worker's, rebuilt from its settings (server.c). */
dg_optimizer *dg_ps_make_opt(dg_tensor *v, const dg_ps_init_msg *m);
/* A sync table's pushes of this version: the accumulator and who pushed (server.c). */
int dg_ps_table_sync_buffers(ps_table *t, int n_workers);

#endif
