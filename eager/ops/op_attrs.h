/* eager/ops/op_attrs.h — the attribute layouts the ops keep in their tape nodes
 * (dg_node_attr), and those of the composite ops that describe themselves to a trace
 * (eager/trace.h). Shared between each op's file, which writes them, and the ONNX exporter
 * (eager/onnx/), which reads them from traced nodes: one definition, so the exporter can never
 * read a layout the op no longer writes. */
#ifndef DG_OPS_OP_ATTRS_H
#define DG_OPS_OP_ATTRS_H

#include "../backend.h"

/* elementwise.c: unary ops' scalars (affine: y = p0 * x + p1; clip: [p0, p1]; leaky_relu: p0 the
 * slope; gelu: p1 = 1 for the tanh form; pow_scalar: p0 the exponent; rdiv: p0 / x) */
typedef struct { double p0, p1; } dg_scal_attr;
/* elementwise.c: binary ops: which of a, b, y the node saved, by slot (-1: not saved) */
typedef struct { int8_t slot[3]; } dg_bin_attr;
/* loss.c: nll_loss over [rows, cols] */
typedef struct { int64_t rows, cols, ignore; } dg_nll_attr;
/* shape.c: slice (a axis, b start, c step), concat (a axis), permute (perm), to_device (dev) */
typedef struct { int64_t a, b, c, d; int perm[DG_MAX_DIMS]; dg_dtype dt; dg_device dev; } dg_shape_attr;
/* matmul.c */
typedef struct { bool ta, tb; } dg_mm_attr;
/* softmax.c */
typedef struct { int axis; bool log; } dg_sm_attr;
/* norm.c: batch norm (eps kept for export: backward does not need it) */
typedef struct { bool training, has_weight, relu; int64_t n, c, inner; double eps; } dg_bn_attr;
/* pool.c */
enum { DG_POOL_MAX, DG_POOL_AVG, DG_POOL_ADAPT };
typedef struct { int kind; dg_pool2d_geom g; } dg_pool_attr;
/* pool_indices.c */
typedef struct { bool adaptive; dg_pool2d_geom g; } dg_pool_idx_attr;
/* reduce.c: the reduced axes of sum / max / min */
typedef struct { int n_axes; int axes[DG_MAX_DIMS]; } dg_red_attr;
/* index.c: index_select / gather */
typedef struct { int axis; } dg_ix_attr;
/* embedding.c */
typedef struct { bool has_pad, sparse; int64_t pad; } dg_emb_attr;
/* conv_transpose.c: cg the convolution it is the transpose of; h/w: x's own size (cg.oh/ow may be more) */
typedef struct { dg_conv2d_geom cg; int64_t h, w; } dg_ct_attr;
/* rnn.c: one layer and direction (mode a dg_rnn_mode) */
typedef struct { int mode; bool reverse, has_len; int64_t T, N, I, H; } dg_rnn_attr;

/* tri.c: tril / triu keep the elements with col - row <= diagonal (tril) or >= diagonal (triu) */
typedef struct { int64_t diagonal; bool upper; } dg_tri_attr;

/* ---- composites (eager/trace.h): ops made of other ops that tell a trace what they are ---- */
/* feature_norm.c: layer_norm over the last k axes */
typedef struct { int k; double eps; } dg_ln_trace_attr;
/* reduce.c: mean over axes (mask), keepdim */
typedef struct { bool mask[DG_MAX_DIMS]; bool keepdim; } dg_mean_trace_attr;
/* compose.c: pad; pads as dg_pad takes them (left, right per axis from the last) */
typedef struct { int npads; int64_t pads[2 * DG_MAX_DIMS]; int mode; double value; } dg_pad_trace_attr;
/* sort.c: topk / sort values (composites) and their indices (trace values: topk_indices,
 * sort_indices, argsort): the first k along axis, largest first or smallest first; paired: the
 * indices record comes just before the values' composite, so one TopK writes both */
typedef struct { int64_t k; int axis; bool largest, paired; } dg_topk_trace_attr;
/* argmax / argmin (trace values), cumsum, scatter and scatter_add (composites): the axis */
typedef struct { int axis; bool keepdim; } dg_axis_trace_attr;
/* masked_fill (composite) and zeros_like / ones_like (trace values, eager/tensor.c): the fill */
typedef struct { double value; } dg_fill_trace_attr;

#endif
