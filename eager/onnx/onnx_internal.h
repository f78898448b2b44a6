/* eager/onnx/onnx_internal.h — what the ONNX exporter's files share: the protobuf builder
 * (builder.c: an arena that owns every message, node, attribute and initializer helpers, the
 * file writer), the export context (export.c: value names, the batch axis of each value) and
 * the op mappers (map_ops.c: one traced op -> ONNX nodes). */
#ifndef DG_ONNX_INTERNAL_H
#define DG_ONNX_INTERNAL_H

#include "../trace.h"
#include "../ops/op_attrs.h"
#include <dygraph/onnx.h>
#include "onnx.pb-c.h"

/* ---- builder.c ---- */
typedef struct ox_graph {
    void **blocks;                 /* every allocation, freed together */
    size_t n_blocks, cap_blocks;
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    int counter;                   /* for unique names */
    bool oom;
} ox_graph;

void *ox_alloc(ox_graph *g, size_t n);   /* zeroed; NULL (and g->oom) when memory is gone */
char *ox_fmt(ox_graph *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ox_free(ox_graph *g);
/* A node op_type(in...) -> out appended to the graph (NULL inputs are written as "", ONNX's
 * absent optional input). */
Onnx__NodeProto *ox_node(ox_graph *g, const char *op_type, const char *const *in, int n_in, const char *out);
/* The same with n_out outputs (TopK's values and indices). */
Onnx__NodeProto *ox_node_outs(ox_graph *g, const char *op_type, const char *const *in, int n_in, const char *const *out, int n_out);
void ox_attr_i(ox_graph *g, Onnx__NodeProto *n, const char *name, int64_t v);
void ox_attr_f(ox_graph *g, Onnx__NodeProto *n, const char *name, float v);
void ox_attr_ints(ox_graph *g, Onnx__NodeProto *n, const char *name, const int64_t *v, int cnt);
void ox_attr_s(ox_graph *g, Onnx__NodeProto *n, const char *name, const char *s);
void ox_attr_strs(ox_graph *g, Onnx__NodeProto *n, const char *name, const char *const *v, int cnt);   /* not copied */
/* An initializer named name (copied) of ONNX data type dt, raw little-endian data; returns its name. */
const char *ox_init(ox_graph *g, const char *name, int dt, const int64_t *dims, int ndim, const void *data, size_t nbytes);
const char *ox_const_f(ox_graph *g, float v);                        /* a 0-d float constant */
const char *ox_const_fv(ox_graph *g, const float *v, int64_t n);     /* 1-D float */
const char *ox_const_i64(ox_graph *g, const int64_t *v, int n);      /* 1-D int64 */
const char *ox_tmp(ox_graph *g, const char *hint);                   /* a fresh value name */
/* A graph input or output description: elem type, dims, and the axis named "N" (-1: none). */
Onnx__ValueInfoProto *ox_value_info(ox_graph *g, const char *name, int elem, const int64_t *dims, int ndim, int dyn_axis);
/* Packs the model and writes it at path through a temporary beside it. */
int ox_write_model(ox_graph *g, const char *path, int opset, const char *producer, Onnx__ValueInfoProto *in,
                   Onnx__ValueInfoProto *out);
int ox_onnx_dtype(dg_dtype dt);   /* 0 when ONNX export has no such type */

/* ---- export.c: the context a mapper works in ---- */
typedef struct ox_ctx ox_ctx;
struct ox_ctx {
    ox_graph g;
    dg_onnx_export_params p;
    const dg_trace *tr;
};
/* The name of tensor t as a graph value (emitting its producer first); NULL with an error
 * naming `op` and the input's position. */
const char *ox_value(ox_ctx *c, const dg_trace_rec *r, const dg_tensor *t, int pos);
/* The axis of t's value that is the batch (dynamic batch only; -1: none, or not dynamic). */
int ox_bdim(ox_ctx *c, const dg_tensor *t);
/* Names t's value (an op writing two outputs, TopK, names the other one it made). */
void ox_bind(ox_ctx *c, const dg_tensor *t, const char *name, int bdim);
/* The record that made t (a plain op's, not a composite's), or NULL. */
const dg_trace_rec *ox_producer(ox_ctx *c, const dg_tensor *t);
/* How many traced ops read t's value. */
int ox_uses(ox_ctx *c, const dg_tensor *t);
/* The state-dict name of a parameter or buffer, or NULL. */
const char *ox_param_name(ox_ctx *c, const dg_tensor *t);
/* Whether t is the graph's output. */
bool ox_is_output(ox_ctx *c, const dg_tensor *t);

/* A malloc'd contiguous host copy of t's values (float32 for a float tensor, int64 for an integer
 * one), *n elements; NULL with an error. */
void *ox_host_copy(const dg_tensor *t, int64_t *n);
/* An error naming the op record r (and its input), always returned as a negative status. */
int ox_fail(const dg_trace_rec *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- map_ops.c ---- */
/* Writes r's ONNX nodes producing the value named *out, asking for its inputs' names with
 * ox_value (an op that passes its input on unchanged, dropout in eval, sets *out to its input's
 * name instead). *bdim: the output's batch axis, when the op knows it (left at -2: the first
 * batched input's, aligned to the output's rank). 0 or a negative status with an error. */
int ox_map(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
/* ---- map_select.c: comparisons, where, fills, arg extremes, topk / sort, cumsum, scatter ---- */
int ox_map_compare(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
int ox_map_where(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
int ox_map_masked_fill(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
int ox_map_fill_like(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
int ox_map_arg(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
int ox_map_topk(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
int ox_map_cumsum(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);
int ox_map_scatter(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);

/* ---- map_rnn.c: the rnn op as ONNX's LSTM / GRU / RNN ---- */
int ox_map_rnn(ox_ctx *c, const dg_trace_rec *r, const char **out, int *bdim);

/* Whether a composite is written as one operator in this export (else its parts are). */
bool ox_composite_accepted(ox_ctx *c, const dg_trace_rec *r);

#endif
