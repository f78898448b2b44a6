/* dist/ps/table_sparse.h — a shard of a sparse table (table_sparse.c): rows of `dim` float32
 * keyed by int64 id, made on first use from (seed, id) alone, each stepped by the table's rule
 * (SGD, Adagrad or Adam, with the optimizer state of each row beside it) when a gradient for it
 * arrives, and counters per row for the entry threshold and for eviction. Servers hold their
 * shards in these; a geo-mode worker holds its own copy of the rows in one. */
#ifndef DG_DIST_PS_TABLE_SPARSE_H
#define DG_DIST_PS_TABLE_SPARSE_H

#include "proto.h"
#include <stdbool.h>

typedef struct dg_ps_sparse_table dg_ps_sparse_table;

/* A row's counters: the rule's steps (Adam's bias correction is per row, as in Paddle's sparse
 * Adam), the pushes that named it (the entry threshold counts these) and the table version when
 * it was last pulled or pushed (eviction's age). */
typedef struct dg_ps_row_meta { int64_t steps, count; uint64_t last; } dg_ps_row_meta;

dg_ps_sparse_table *dg_ps_sparse_table_new(const dg_ps_sparse_msg *m);
void dg_ps_sparse_table_free(dg_ps_sparse_table *t);
const dg_ps_sparse_msg *dg_ps_sparse_table_settings(const dg_ps_sparse_table *t);
/* The index of id's row, made now if new (its meta zero); -1 when out of memory. */
int64_t dg_ps_sparse_table_index(dg_ps_sparse_table *t, int64_t id);
/* The row of id (made now if new), or NULL when out of memory. */
float *dg_ps_sparse_table_row(dg_ps_sparse_table *t, int64_t id);
/* The row of id if it was made, else NULL. */
float *dg_ps_sparse_table_find(const dg_ps_sparse_table *t, int64_t id);
/* One step of the table's rule on row k with gradient g (dim floats). */
int dg_ps_sparse_table_step_at(dg_ps_sparse_table *t, int64_t k, const float *g);
/* The same on id's row (made now if new). */
int dg_ps_sparse_table_step(dg_ps_sparse_table *t, int64_t id, const float *g);
int64_t dg_ps_sparse_table_rows(const dg_ps_sparse_table *t);
/* Row k (in the order rows were made): its id, values, rule state (s0: Adagrad's sum or Adam's
 * exp_avg; s1: Adam's exp_avg_sq, NULL for the other rules) and counters. */
int64_t dg_ps_sparse_table_id(const dg_ps_sparse_table *t, int64_t k);
float *dg_ps_sparse_table_row_at(dg_ps_sparse_table *t, int64_t k);
float *dg_ps_sparse_table_s0_at(dg_ps_sparse_table *t, int64_t k);
float *dg_ps_sparse_table_s1_at(dg_ps_sparse_table *t, int64_t k);
dg_ps_row_meta *dg_ps_sparse_table_meta_at(dg_ps_sparse_table *t, int64_t k);
/* Drops every row whose meta.last is more than max_age versions before `now`; the rest keep their
 * order. Returns how many were dropped. */
int64_t dg_ps_sparse_table_evict(dg_ps_sparse_table *t, uint64_t now, uint64_t max_age);

#endif
