/* dist/ps/table_sparse.h — a server's shard of a sparse table (table_sparse.c): rows of `dim`
 * float32 keyed by int64 id, made on first use from (seed, id) alone, each stepped by the table's
 * rule (SGD or Adagrad) when a gradient for it arrives. */
#ifndef DG_DIST_PS_TABLE_SPARSE_H
#define DG_DIST_PS_TABLE_SPARSE_H

#include "proto.h"
#include <stdbool.h>

typedef struct dg_ps_sparse_table dg_ps_sparse_table;

dg_ps_sparse_table *dg_ps_sparse_table_new(const dg_ps_sparse_msg *m);
void dg_ps_sparse_table_free(dg_ps_sparse_table *t);
const dg_ps_sparse_msg *dg_ps_sparse_table_settings(const dg_ps_sparse_table *t);
/* The row of id (made now if new), or NULL when out of memory. */
float *dg_ps_sparse_table_row(dg_ps_sparse_table *t, int64_t id);
/* The row of id if it was made, else NULL. */
float *dg_ps_sparse_table_find(const dg_ps_sparse_table *t, int64_t id);
/* One step of the table's rule on id's row with gradient g (dim floats). */
int dg_ps_sparse_table_step(dg_ps_sparse_table *t, int64_t id, const float *g);
int64_t dg_ps_sparse_table_rows(const dg_ps_sparse_table *t);
/* id's Adagrad accumulators (its row made now if new), NULL when out of memory. */
float *dg_ps_sparse_table_acc(dg_ps_sparse_table *t, int64_t id);
/* Row k (in the order rows were made), its accumulators and its id. */
float *dg_ps_sparse_table_acc_at(dg_ps_sparse_table *t, int64_t k);
int64_t dg_ps_sparse_table_id(const dg_ps_sparse_table *t, int64_t k);
float *dg_ps_sparse_table_row_at(dg_ps_sparse_table *t, int64_t k);

#endif
