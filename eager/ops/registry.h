/* eager/ops/registry.h — the one definition of every built-in op: its id, its name, the
 * attributes its tape node keeps, its autocast policy, whether it is a primitive (a backward rule
 * of its own) or a composite (made of other ops), its ONNX mapping, and the backend entries it
 * calls. Everything that needs an op's name or policy reads it from here: tape records
 * (dg_record_op), the entry path (op_entry.c: autocast, profiler, anomaly checks), the trace and
 * the ONNX exporter (eager/onnx/map_ops.c builds its table from the ONNX column), and the
 * registry harness (test/test_registry.c, which fails when an op has no harness entry).
 *
 * Adding an op: one line here; its forward and backward rule in an eager/ops/ file, entered
 * through dg_op_enter / dg_op_leave (op_entry.h); a kernel per backend when it needs a new
 * entry; one line in the harness. A line here whose ONNX column names a mapper that does not
 * exist, or an attribute type that does not fit a node, fails the build.
 *
 * Columns: X(ID, name, attributes, autocast, kind, onnx, backend entries)
 *   attributes  the type kept in dg_node_attr (size checked against DG_NODE_ATTR_BYTES), or
 *               for a composite the attributes it describes itself to a trace with; dg_no_attr
 *   autocast    WHITE (runs in the region's low dtype), BLACK (float32), FOLLOW (its inputs'
 *               dtype; a region's custom lists may move it), NONE (never cast: shape, index,
 *               integer and dtype ops; a custom list naming it is refused)
 *   kind        PRIM (records its own node or makes a value with no gradient), COMPOSITE (made
 *               of other ops, which record the nodes), PART (a record another op makes for a
 *               trace, with no entry of its own: sort's and topk's indices)
 *   onnx        ONNX(mapper) written as one ONNX operator by that mapper (eager/onnx/);
 *               PARTS: exported as the ops it is made of; NO_ONNX: not exportable (an error).
 *               Composites that build index or constant tensors inside their forward (flip,
 *               tile, logsumexp, std, norm, group_norm, conv1d's reshaped weight) are NO_ONNX:
 *               the exporter refuses a tensor it cannot trace rather than bake it in.
 *   entries     the backend entries it calls itself (BE(x) | ...; 0 for a composite), checked
 *               on the input's backend before the op runs
 */
#ifndef DG_OPS_REGISTRY_H
#define DG_OPS_REGISTRY_H

#include "op_attrs.h"

typedef struct { char unused; } dg_no_attr;

#define DG_OPS(X) \
    /* elementwise.c: binary */ \
    X(ADD, "add", dg_bin_attr, FOLLOW, PRIM, ONNX(m_binary), BE(binary) | BE(copy)) \
    X(SUB, "sub", dg_bin_attr, FOLLOW, PRIM, ONNX(m_binary), BE(binary) | BE(copy)) \
    X(MUL, "mul", dg_bin_attr, FOLLOW, PRIM, ONNX(m_binary), BE(binary) | BE(copy)) \
    X(DIV, "div", dg_bin_attr, FOLLOW, PRIM, ONNX(m_binary), BE(binary) | BE(copy)) \
    X(MAXIMUM, "maximum", dg_bin_attr, FOLLOW, PRIM, ONNX(m_binary), BE(binary) | BE(where)) \
    X(MINIMUM, "minimum", dg_bin_attr, FOLLOW, PRIM, ONNX(m_binary), BE(binary) | BE(where)) \
    X(POW, "pow", dg_bin_attr, FOLLOW, PRIM, ONNX(m_binary), BE(binary)) \
    X(ADD_RELU, "add_relu", dg_bin_attr, FOLLOW, PRIM, ONNX(m_add_relu), BE(binary)) \
    X(GREATER, "greater", dg_no_attr, NONE, PRIM, ONNX(ox_map_compare), BE(binary)) \
    X(EQUAL, "equal", dg_no_attr, NONE, PRIM, ONNX(ox_map_compare), BE(binary)) \
    X(WHERE, "where", dg_no_attr, FOLLOW, PRIM, ONNX(ox_map_where), BE(where)) \
    /* elementwise.c: unary */ \
    X(ADD_SCALAR, "add_scalar", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(SUB_SCALAR, "sub_scalar", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(RSUB_SCALAR, "rsub_scalar", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(MUL_SCALAR, "mul_scalar", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(DIV_SCALAR, "div_scalar", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(RDIV_SCALAR, "rdiv_scalar", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(POW_SCALAR, "pow_scalar", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(NEG, "neg", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(EXP, "exp", dg_scal_attr, BLACK, PRIM, ONNX(m_unary), BE(unary)) \
    X(LOG, "log", dg_scal_attr, BLACK, PRIM, ONNX(m_unary), BE(unary)) \
    X(SQRT, "sqrt", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(ABS, "abs", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(CLIP, "clip", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(RELU, "relu", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(LEAKY_RELU, "leaky_relu", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(SIGMOID, "sigmoid", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(TANH, "tanh", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(GELU, "gelu", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(ELU, "elu", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(SOFTPLUS, "softplus", dg_scal_attr, BLACK, PRIM, ONNX(m_unary), BE(unary)) \
    X(SILU, "silu", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(LOG1P, "log1p", dg_scal_attr, BLACK, PRIM, ONNX(m_unary), BE(unary)) \
    X(RSQRT, "rsqrt", dg_scal_attr, BLACK, PRIM, ONNX(m_unary), BE(unary)) \
    X(SIN, "sin", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    X(COS, "cos", dg_scal_attr, FOLLOW, PRIM, ONNX(m_unary), BE(unary)) \
    /* matmul.c */ \
    X(MATMUL, "matmul", dg_mm_attr, WHITE, PRIM, ONNX(m_matmul), BE(gemm) | BE(copy)) \
    X(LINEAR, "linear", dg_no_attr, WHITE, COMPOSITE, ONNX(m_linear), 0) \
    /* softmax.c */ \
    X(SOFTMAX, "softmax", dg_sm_attr, BLACK, PRIM, ONNX(m_softmax), BE(softmax) | BE(softmax_backward)) \
    X(LOG_SOFTMAX, "log_softmax", dg_sm_attr, BLACK, PRIM, ONNX(m_softmax), BE(softmax) | BE(softmax_backward)) \
    /* reduce.c */ \
    X(SUM, "sum", dg_red_attr, BLACK, PRIM, ONNX(m_reduce), BE(reduce)) \
    X(MAX, "max", dg_red_attr, NONE, PRIM, ONNX(m_reduce), BE(reduce) | BE(binary)) \
    X(MIN, "min", dg_red_attr, NONE, PRIM, ONNX(m_reduce), BE(reduce) | BE(binary)) \
    X(MEAN, "mean", dg_mean_trace_attr, BLACK, COMPOSITE, ONNX(m_mean), 0) \
    X(SUM_ALL, "sum_all", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(MEAN_ALL, "mean_all", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(ARGMAX, "argmax", dg_axis_trace_attr, NONE, PRIM, ONNX(ox_map_arg), BE(reduce)) \
    X(ARGMIN, "argmin", dg_axis_trace_attr, NONE, PRIM, ONNX(ox_map_arg), BE(reduce)) \
    /* scan.c */ \
    X(CUMSUM, "cumsum", dg_axis_trace_attr, NONE, COMPOSITE, ONNX(ox_map_cumsum), 0) \
    X(PROD, "prod", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    /* shape.c */ \
    X(CONTIGUOUS, "contiguous", dg_no_attr, NONE, PRIM, ONNX(m_identity), BE(copy)) \
    X(CLONE, "clone", dg_no_attr, NONE, PRIM, ONNX(m_identity), BE(copy)) \
    X(CAST, "cast", dg_shape_attr, NONE, PRIM, ONNX(m_cast), BE(copy)) \
    X(TO_DEVICE, "to_device", dg_shape_attr, NONE, PRIM, ONNX(m_identity), BE(copy)) \
    X(RESHAPE, "reshape", dg_shape_attr, NONE, PRIM, ONNX(m_reshape), BE(copy)) \
    X(FLATTEN, "flatten", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(PERMUTE, "permute", dg_shape_attr, NONE, PRIM, ONNX(m_permute), 0) \
    X(TRANSPOSE, "transpose", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(SQUEEZE, "squeeze", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(UNSQUEEZE, "unsqueeze", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(EXPAND, "expand", dg_shape_attr, NONE, PRIM, ONNX(m_expand), 0) \
    X(SLICE, "slice", dg_shape_attr, NONE, PRIM, ONNX(m_slice), 0) \
    X(CONCAT, "concat", dg_shape_attr, NONE, PRIM, ONNX(m_concat), BE(copy)) \
    X(SPLIT, "split", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    /* tri.c */ \
    X(TRIL, "tril", dg_tri_attr, FOLLOW, PRIM, ONNX(m_trilu), BE(where)) \
    X(TRIU, "triu", dg_tri_attr, FOLLOW, PRIM, ONNX(m_trilu), BE(where)) \
    /* index.c, scatter.c, sort.c */ \
    X(INDEX_SELECT, "index_select", dg_ix_attr, NONE, PRIM, ONNX(m_index), BE(index_select) | BE(index_add)) \
    X(GATHER, "gather", dg_ix_attr, NONE, PRIM, ONNX(m_index), BE(gather) | BE(scatter_add)) \
    X(ONE_HOT, "one_hot", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(SCATTER_ADD, "scatter_add", dg_ix_attr, NONE, PRIM, ONNX(ox_map_scatter), BE(scatter_add) | BE(gather)) \
    X(SCATTER, "scatter", dg_axis_trace_attr, NONE, COMPOSITE, ONNX(ox_map_scatter), 0) \
    X(ARGSORT, "argsort", dg_topk_trace_attr, NONE, PRIM, ONNX(ox_map_topk), BE(argsort)) \
    X(SORT, "sort", dg_topk_trace_attr, NONE, COMPOSITE, ONNX(ox_map_topk), 0) \
    X(SORT_INDICES, "sort_indices", dg_topk_trace_attr, NONE, PART, ONNX(ox_map_topk), 0) \
    X(TOPK, "topk", dg_topk_trace_attr, NONE, COMPOSITE, ONNX(ox_map_topk), 0) \
    X(TOPK_INDICES, "topk_indices", dg_topk_trace_attr, NONE, PART, ONNX(ox_map_topk), 0) \
    /* compose.c */ \
    X(FLIP, "flip", dg_no_attr, NONE, COMPOSITE, NO_ONNX, 0) \
    X(TILE, "tile", dg_no_attr, NONE, COMPOSITE, NO_ONNX, 0) \
    X(MASKED_FILL, "masked_fill", dg_fill_trace_attr, NONE, COMPOSITE, ONNX(ox_map_masked_fill), 0) \
    X(LOGSUMEXP, "logsumexp", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(VAR, "var", dg_no_attr, FOLLOW, COMPOSITE, PARTS, 0) \
    X(STD, "std", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(NORM, "norm", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(PAD, "pad", dg_pad_trace_attr, NONE, COMPOSITE, ONNX(m_pad), 0) \
    /* embedding.c, feature_norm.c, norm.c, dropout.c */ \
    X(EMBEDDING, "embedding", dg_emb_attr, FOLLOW, PRIM, ONNX(m_embedding), BE(index_select) | BE(index_add)) \
    X(LAYER_NORM, "layer_norm", dg_ln_trace_attr, FOLLOW, COMPOSITE, ONNX(m_layer_norm), 0) \
    X(GROUP_NORM, "group_norm", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(BATCH_NORM, "batch_norm", dg_bn_attr, FOLLOW, PRIM, ONNX(m_batch_norm), BE(batch_norm) | BE(batch_norm_backward)) \
    X(BATCH_NORM_RELU, "batch_norm_relu", dg_bn_attr, FOLLOW, PRIM, ONNX(m_batch_norm), BE(batch_norm) | BE(batch_norm_backward)) \
    X(DROPOUT, "dropout", dg_no_attr, NONE, PRIM, ONNX(m_identity), BE(random) | BE(binary)) \
    X(DROPOUT2D, "dropout2d", dg_no_attr, NONE, PRIM, ONNX(m_identity), BE(random) | BE(binary)) \
    /* random.c: samples (no gradient) */ \
    X(MULTINOMIAL, "multinomial", dg_no_attr, NONE, PRIM, NO_ONNX, 0) \
    /* loss.c */ \
    X(MSE_LOSS, "mse_loss", dg_no_attr, BLACK, COMPOSITE, PARTS, 0) \
    X(SQUARE_ERROR_COST, "square_error_cost", dg_no_attr, FOLLOW, COMPOSITE, PARTS, 0) \
    X(L1_LOSS, "l1_loss", dg_no_attr, FOLLOW, COMPOSITE, PARTS, 0) \
    X(NLL_LOSS, "nll_loss", dg_nll_attr, BLACK, PRIM, NO_ONNX, BE(nll) | BE(nll_backward)) \
    X(CROSS_ENTROPY, "cross_entropy", dg_no_attr, BLACK, COMPOSITE, NO_ONNX, 0) \
    X(BCE_WITH_LOGITS, "binary_cross_entropy_with_logits", dg_no_attr, BLACK, COMPOSITE, NO_ONNX, 0) \
    X(BCE, "binary_cross_entropy", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(SMOOTH_L1_LOSS, "smooth_l1_loss", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(HUBER_LOSS, "huber_loss", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(KL_DIV, "kl_div", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    X(ACCURACY, "accuracy", dg_no_attr, NONE, COMPOSITE, NO_ONNX, 0) \
    /* conv.c, conv_transpose.c */ \
    X(CONV2D, "conv2d", dg_conv2d_geom, WHITE, PRIM, ONNX(m_conv), BE(conv2d) | BE(conv2d_backward_data) | BE(conv2d_backward_filter)) \
    X(CONV_TRANSPOSE2D, "conv_transpose2d", dg_ct_attr, FOLLOW, PRIM, ONNX(m_conv_transpose), BE(conv2d) | BE(conv2d_backward_data) | BE(conv2d_backward_filter)) \
    X(CONV1D, "conv1d", dg_no_attr, FOLLOW, COMPOSITE, NO_ONNX, 0) \
    /* eval-mode Conv+ReLU for passes without gradients (dygraph/extension.h; nn/fuse.c picks its dtype) */ \
    X(CONV2D_RELU, "conv2d_relu", dg_no_attr, NONE, PRIM, NO_ONNX, BE(conv2d) | BE(unary)) \
    /* pool.c, pool_indices.c, pool1d.c */ \
    X(MAX_POOL2D, "max_pool2d", dg_pool_attr, NONE, PRIM, ONNX(m_pool), BE(max_pool2d) | BE(max_pool2d_backward)) \
    X(AVG_POOL2D, "avg_pool2d", dg_pool_attr, NONE, PRIM, ONNX(m_pool), BE(avg_pool2d) | BE(avg_pool2d_backward)) \
    X(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", dg_pool_attr, NONE, PRIM, ONNX(m_pool), BE(adaptive_avg_pool2d) | BE(adaptive_avg_pool2d_backward)) \
    X(MAX_POOL2D_WITH_INDICES, "max_pool2d_with_indices", dg_pool_idx_attr, NONE, PRIM, ONNX(m_pool_idx), BE(max_pool2d_with_indices) | BE(max_pool2d_indices_backward)) \
    X(ADAPTIVE_MAX_POOL2D, "adaptive_max_pool2d", dg_pool_idx_attr, NONE, PRIM, ONNX(m_pool_idx), BE(adaptive_max_pool2d) | BE(max_pool2d_indices_backward)) \
    X(MAX_POOL1D, "max_pool1d", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(MAX_POOL1D_WITH_INDICES, "max_pool1d_with_indices", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(AVG_POOL1D, "avg_pool1d", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(ADAPTIVE_MAX_POOL1D, "adaptive_max_pool1d", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    X(ADAPTIVE_AVG_POOL1D, "adaptive_avg_pool1d", dg_no_attr, NONE, COMPOSITE, PARTS, 0) \
    /* tensor.c: values made like another tensor (no gradient) */ \
    /* rnn.c */ \
    X(RNN, "rnn", dg_rnn_attr, BLACK, PRIM, ONNX(ox_map_rnn), BE(rnn_cell) | BE(rnn_cell_backward) | BE(gemm) | BE(copy) | BE(fill) | BE(reduce)) \
    X(ZEROS_LIKE, "zeros_like", dg_fill_trace_attr, NONE, PRIM, ONNX(ox_map_fill_like), BE(fill)) \
    X(ONES_LIKE, "ones_like", dg_fill_trace_attr, NONE, PRIM, ONNX(ox_map_fill_like), BE(fill))

typedef enum dg_op_id {
#define DG_OP_ENUM_(ID, name, attr, ac, kind, onnx, be) DG_OP_##ID,
    DG_OPS(DG_OP_ENUM_)
#undef DG_OP_ENUM_
    DG_OP_COUNT,
    DG_OP_CUSTOM = -1   /* a node recorded through dg_record (a user's op, recompute, sync batch norm) */
} dg_op_id;

enum { DG_AC_NONE, DG_AC_FOLLOW, DG_AC_WHITE, DG_AC_BLACK };
enum { DG_OPK_PRIM, DG_OPK_COMPOSITE, DG_OPK_PART };
enum { DG_ONNX_NONE, DG_ONNX_PARTS, DG_ONNX_MAPPED };

typedef struct dg_op_info {
    const char *name;
    unsigned short attr_bytes;
    unsigned char autocast;        /* DG_AC_* */
    unsigned char kind;            /* DG_OPK_* */
    unsigned char onnx;            /* DG_ONNX_* */
    uint64_t entries;              /* bit k: backend entry k of dg_be_entry */
} dg_op_info;

/* eager/ops/op_entry.c */
extern const dg_op_info dg_op_table[DG_OP_COUNT];
static inline const char *dg_op_name(dg_op_id op) {
    return (unsigned)op < DG_OP_COUNT ? dg_op_table[op].name : "(custom op)";
}
/* the op named `name`, or -1 */
int dg_op_find(const char *name);
/* How often this thread entered each op (dg_op_enter) or, for a PART op, traced it: the
 * registry harness (test/registry_cases.h) checks that every op it runs passed the entry path
 * under its own id. One thread-local increment per op. */
extern _Thread_local uint32_t dg_op_seen_count[DG_OP_COUNT];
/* How many tape nodes this thread recorded under each id (dg_record_op): the harness checks that
 * an op needing a gradient recorded under its own id, not another op's. */
extern _Thread_local uint32_t dg_op_recorded_count[DG_OP_COUNT];

#endif
