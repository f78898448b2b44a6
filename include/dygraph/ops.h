/* dygraph/ops.h — the differentiable ops. All take and return tensors; all are recorded on the
 * tape when an input requires grad and grad mode is on. Binary ops broadcast like NumPy. Axes may
 * be negative. A failure returns NULL with a message (see core.h). */
#ifndef DYGRAPH_OPS_H
#define DYGRAPH_OPS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise arithmetic ---- */
DG_API dg_tensor *dg_add(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_sub(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_mul(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_div(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_maximum(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_minimum(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_pow(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_add_scalar(const dg_tensor *a, double s);
DG_API dg_tensor *dg_sub_scalar(const dg_tensor *a, double s);     /* a - s */
DG_API dg_tensor *dg_rsub_scalar(const dg_tensor *a, double s);    /* s - a */
DG_API dg_tensor *dg_mul_scalar(const dg_tensor *a, double s);
DG_API dg_tensor *dg_div_scalar(const dg_tensor *a, double s);     /* a / s */
DG_API dg_tensor *dg_rdiv_scalar(const dg_tensor *a, double s);    /* s / a */
DG_API dg_tensor *dg_pow_scalar(const dg_tensor *a, double exponent);
DG_API dg_tensor *dg_neg(const dg_tensor *a);
DG_API dg_tensor *dg_exp(const dg_tensor *a);
DG_API dg_tensor *dg_log(const dg_tensor *a);
DG_API dg_tensor *dg_sqrt(const dg_tensor *a);
DG_API dg_tensor *dg_abs(const dg_tensor *a);
DG_API dg_tensor *dg_clip(const dg_tensor *a, double min, double max);
/* torch.log1p, torch.rsqrt (1/sqrt(x)), torch.sin, torch.cos; integer inputs give float32, as torch's */
DG_API dg_tensor *dg_log1p(const dg_tensor *a);
DG_API dg_tensor *dg_rsqrt(const dg_tensor *a);
DG_API dg_tensor *dg_sin(const dg_tensor *a);
DG_API dg_tensor *dg_cos(const dg_tensor *a);
/* torch.tril / torch.triu over the last two dims (x has at least 2; batch dims any): keeps the
 * elements with col - row <= diagonal (tril) or >= diagonal (triu), zeroes the rest; any dtype;
 * the gradient is masked the same way. */
DG_API dg_tensor *dg_tril(const dg_tensor *x, int64_t diagonal);
DG_API dg_tensor *dg_triu(const dg_tensor *x, int64_t diagonal);
/* comparisons (not differentiable): DG_BOOL result. Operands of two dtypes are promoted as the
 * arithmetic's are and compared in that dtype (int64 exactly), as torch's. */
DG_API dg_tensor *dg_greater(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_equal(const dg_tensor *a, const dg_tensor *b);

/* ---- activations ---- */
DG_API dg_tensor *dg_relu(const dg_tensor *x);
DG_API dg_tensor *dg_add_relu(const dg_tensor *a, const dg_tensor *b);  /* relu(a + b) in one pass (residual blocks) */
DG_API dg_tensor *dg_leaky_relu(const dg_tensor *x, double negative_slope);
DG_API dg_tensor *dg_sigmoid(const dg_tensor *x);
DG_API dg_tensor *dg_tanh(const dg_tensor *x);
DG_API dg_tensor *dg_gelu(const dg_tensor *x, bool approximate_tanh);
/* torch.nn.functional.elu (x > 0 ? x : alpha * (exp(x) - 1); torch's default alpha 1), silu
 * (x * sigmoid(x)) and softplus (log(1 + exp(beta * x)) / beta, and x itself where
 * beta * x > threshold; torch's defaults beta 1, threshold 20). Float dtypes only, as torch's. */
DG_API dg_tensor *dg_elu(const dg_tensor *x, double alpha);
DG_API dg_tensor *dg_silu(const dg_tensor *x);
DG_API dg_tensor *dg_softplus(const dg_tensor *x, double beta, double threshold);
DG_API dg_tensor *dg_softmax(const dg_tensor *x, int axis);
DG_API dg_tensor *dg_log_softmax(const dg_tensor *x, int axis);

/* ---- linear algebra ---- */
/* Batched matrix product over the last two dims; batch dims broadcast. A 1-D operand is a
 * vector as in paddle.matmul/numpy. */
DG_API dg_tensor *dg_matmul(const dg_tensor *a, const dg_tensor *b);
DG_API dg_tensor *dg_matmul_t(const dg_tensor *a, const dg_tensor *b, bool transpose_a, bool transpose_b);
/* x @ w^T (+ b) as torch.nn.functional.linear: x [..., in], w [out, in] (the layout of
 * dg_nn_linear's weight and of torch's and Paddle's state dicts), b [out] or NULL. */
DG_API dg_tensor *dg_linear(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b);

/* ---- reductions ---- */
/* axes: NULL/n_axes 0 reduces every axis. Over no elements the sum is 0 and the mean NaN, as
 * torch's; max and min refuse an empty axis, as torch's do. */
DG_API dg_tensor *dg_sum(const dg_tensor *x, const int *axes, int n_axes, bool keepdim);
DG_API dg_tensor *dg_mean(const dg_tensor *x, const int *axes, int n_axes, bool keepdim);
DG_API dg_tensor *dg_max(const dg_tensor *x, const int *axes, int n_axes, bool keepdim);
DG_API dg_tensor *dg_min(const dg_tensor *x, const int *axes, int n_axes, bool keepdim);
DG_API dg_tensor *dg_sum_all(const dg_tensor *x);
DG_API dg_tensor *dg_mean_all(const dg_tensor *x);
DG_API dg_tensor *dg_argmax(const dg_tensor *x, int axis, bool keepdim);   /* DG_I64 */
DG_API dg_tensor *dg_argmin(const dg_tensor *x, int axis, bool keepdim);   /* DG_I64 */

/* ---- shape and indexing (views where possible) ---- */
DG_API dg_tensor *dg_reshape(const dg_tensor *x, dg_shape shape);          /* one dim may be -1 */
DG_API dg_tensor *dg_flatten(const dg_tensor *x, int start_axis, int stop_axis);
DG_API dg_tensor *dg_transpose(const dg_tensor *x, int axis0, int axis1);
DG_API dg_tensor *dg_permute(const dg_tensor *x, const int *perm);         /* perm has ndim entries */
DG_API dg_tensor *dg_squeeze(const dg_tensor *x, int axis);                /* axis out of range of size-1 dims: all */
DG_API dg_tensor *dg_unsqueeze(const dg_tensor *x, int axis);
DG_API dg_tensor *dg_expand(const dg_tensor *x, dg_shape shape);           /* -1 keeps a dim */
DG_API dg_tensor *dg_slice(const dg_tensor *x, int axis, int64_t start, int64_t end, int64_t step);
DG_API dg_tensor *dg_contiguous(const dg_tensor *x);
DG_API dg_tensor *dg_concat(dg_tensor *const *xs, int n, int axis);
/* Splits into n parts of the given sizes (sizes NULL: equal parts); writes n tensors to out. */
DG_API int dg_split(const dg_tensor *x, int n, const int64_t *sizes, int axis, dg_tensor **out);
DG_API dg_tensor *dg_index_select(const dg_tensor *x, const dg_tensor *index, int axis);  /* index 1-D int */
/* torch.gather: index has x's rank and may be smaller than x off the axis (the leading part is read) */
DG_API dg_tensor *dg_gather(const dg_tensor *x, const dg_tensor *index, int axis);
DG_API dg_tensor *dg_one_hot(const dg_tensor *labels, int64_t num_classes);              /* f32 */
/* a where cond is nonzero, else b; a and b of two dtypes are promoted as the arithmetic's are. */
DG_API dg_tensor *dg_where(const dg_tensor *cond, const dg_tensor *a, const dg_tensor *b);

/* ---- composite ops (eager/ops/compose.c): built from the ops above, so they run on every
 * backend, f32 and f64, with gradients; torch's semantics ---- */
/* torch.flip: reverses x along each of the n axes (n 0: a copy). */
DG_API dg_tensor *dg_flip(const dg_tensor *x, const int *axes, int n);
/* torch.tile, which is Tensor.repeat(*reps) when n >= ndim: x repeated reps[i] times along each
 * axis (reps >= 0). Fewer reps than dims repeat the last axes (reps padded with leading 1s); more
 * add leading axes to x. No repetition at all still returns a copy. */
DG_API dg_tensor *dg_tile(const dg_tensor *x, const int64_t *reps, int n);
/* Tensor.masked_fill: value where the bool mask (broadcast to x's shape; it may not grow x) is
 * true, x elsewhere. The gradient is 0 where filled. */
DG_API dg_tensor *dg_masked_fill(const dg_tensor *x, const dg_tensor *mask, double value);
/* torch.logsumexp over axes (n 0: all): log(sum(exp(x - m))) + m with m the max, as a constant
 * (and 0 where infinite), so large inputs do not overflow. Gradient softmax(x) over the axes.
 * Over an empty axis: -inf (log 0), as torch's. */
DG_API dg_tensor *dg_logsumexp(const dg_tensor *x, const int *axes, int n, bool keepdim);
/* torch.var / torch.std over axes (n 0: all), divided by N - 1 when unbiased (torch's default),
 * else N; N - 1 = 0 gives NaN as torch's. std's gradient where the variance is 0 is 0 (torch 1.13's,
 * not the chain rule's NaN). */
DG_API dg_tensor *dg_var(const dg_tensor *x, const int *axes, int n, bool unbiased, bool keepdim);
DG_API dg_tensor *dg_std(const dg_tensor *x, const int *axes, int n, bool unbiased, bool keepdim);
/* torch.linalg.vector_norm for p = 1, 2 or INFINITY (others refused) over axes (n 0: all, as
 * dim=None). Gradients as torch's: sign(x) for 1 (0 at 0); x / norm for 2, and 0 where the norm is
 * 0; for INFINITY sign(x) shared equally by the elements whose |x| attains the max. */
DG_API dg_tensor *dg_norm(const dg_tensor *x, double p, const int *axes, int n, bool keepdim);
/* torch.nn.functional.pad: pads holds (left, right) pairs from the LAST axis backwards: (l_-1,
 * r_-1, l_-2, r_-2, ...), npads even and at most 2 * ndim. CONSTANT fills with value (negative
 * pads crop, as torch's); REFLECT mirrors without repeating the edge (each pad < the axis' size);
 * REPLICATE repeats the edge. REFLECT/REPLICATE refuse negative pads, and unlike torch 1.13 take
 * any number of padded axes on any rank. */
typedef enum dg_pad_mode { DG_PAD_CONSTANT = 0, DG_PAD_REFLECT = 1, DG_PAD_REPLICATE = 2 } dg_pad_mode;
DG_API dg_tensor *dg_pad(const dg_tensor *x, const int64_t *pads, int npads, dg_pad_mode mode, double value);

/* ---- embeddings and normalisation over features ---- */
/* torch.nn.functional.embedding: y[..., :] = weight[ids[...], :], ids int64/int32 of any shape,
 * weight [num_embeddings, dim, ...]; y is ids' shape + weight's trailing dims. */
#define DG_NO_PADDING_IDX INT64_MIN
typedef struct dg_embedding_params {        /* defaults are torch's */
    int64_t padding_idx;   /* that row gets no gradient (negative counts from the end);
                              DG_NO_PADDING_IDX (default): none */
    double max_norm;       /* > 0: each distinct row looked up whose norm_type-norm exceeds it is
                              scaled to max_norm in the weight, in place, before the lookup (torch's
                              renorm); 0 (default): off */
    double norm_type;      /* > 0, INFINITY allowed; default 2 */
    bool sparse;           /* weight's gradient kept as rows (dg_sparse_grad) when weight is a leaf;
                              default false. dg_grad gives the dense equivalent on request */
    uint32_t params_tag;     /* set by dg_embedding_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_embedding_params;
DG_API dg_embedding_params dg_embedding_default_params(void);
DG_API dg_tensor *dg_embedding(const dg_tensor *ids, const dg_tensor *weight, dg_embedding_params p);
/* torch.nn.functional.layer_norm: normalises over the last normalized_shape.ndim dims of x (which
 * must equal normalized_shape) with the biased variance; weight/bias of normalized_shape or NULL. */
DG_API dg_tensor *dg_layer_norm(const dg_tensor *x, dg_shape normalized_shape, const dg_tensor *weight,
                                const dg_tensor *bias, double eps);
/* torch.nn.functional.group_norm: x [N, C, ...] with C divisible by num_groups; each sample's
 * group of C / num_groups channels normalised together; weight/bias [C] or NULL. */
DG_API dg_tensor *dg_group_norm(const dg_tensor *x, int64_t num_groups, const dg_tensor *weight,
                                const dg_tensor *bias, double eps);
/* ---- sorting, scans, products, scatter (eager/ops/sort.c, scan.c, scatter.c); torch's semantics ---- */
/* torch.sort(stable=True) along axis: the values (with x's gradient: each goes back to where it came
 * from) and their int64 positions; equal values keep their order and NaN sorts as the largest.
 * f32/f64/i64/i32. Either output may be NULL when not wanted; 0 or an error status. On the GPU a
 * line of n <= 64 is ranked in one pass, a longer one bitonic-sorted (about p log2(p)^2 / 2
 * compares, p the power of two >= n, in a scratch copy). */
DG_API int dg_sort(const dg_tensor *x, int axis, bool descending, dg_tensor **values, dg_tensor **indices);
DG_API dg_tensor *dg_argsort(const dg_tensor *x, int axis, bool descending);   /* DG_I64, stable */
/* torch.topk(sorted=True): the k largest (or smallest) along axis in order, 0 <= k <= size; among
 * equal values the first positions come first (torch leaves that order unspecified). */
DG_API int dg_topk(const dg_tensor *x, int64_t k, int axis, bool largest, dg_tensor **values, dg_tensor **indices);
/* torch.cumsum (float): y[i] = x[0] + ... + x[i] along axis; gradient the reversed cumsum. */
DG_API dg_tensor *dg_cumsum(const dg_tensor *x, int axis);
/* torch.prod (float) over axes (n 0: all); the gradient is the product of the other entries, also
 * where x holds zeros (no division). The empty product is 1. */
DG_API dg_tensor *dg_prod(const dg_tensor *x, const int *axes, int n, bool keepdim);
/* Tensor.scatter_add(axis, index, src), out of place: x plus src[i] added at index[i] along axis,
 * repeats summed. index (int64/int32) has x's dims and is no larger than src on any axis, nor than
 * x off the axis; only src's leading block of index's shape is used. Gradients: x's is the output's,
 * src's is gather(grad, index) on that block (0 elsewhere). */
DG_API dg_tensor *dg_scatter_add(const dg_tensor *x, int axis, const dg_tensor *index, const dg_tensor *src);
/* Tensor.scatter(axis, index, src), out of place: x with src[i] written at index[i]. An index that
 * names one position twice is refused (torch leaves the result undefined). x's gradient is 0 at
 * the written positions. Reads one value back from the device to check for repeats. */
DG_API dg_tensor *dg_scatter(const dg_tensor *x, int axis, const dg_tensor *index, const dg_tensor *src);

/* ---- losses ---- */
/* BATCHMEAN (the sum over the first axis' rows, as torch's 'batchmean') is kl_div's only. */
typedef enum dg_reduction { DG_REDUCE_MEAN = 0, DG_REDUCE_SUM = 1, DG_REDUCE_NONE = 2, DG_REDUCE_BATCHMEAN = 3 } dg_reduction;
DG_API dg_tensor *dg_mse_loss(const dg_tensor *input, const dg_tensor *target);       /* mean */
DG_API dg_tensor *dg_mse_loss_ext(const dg_tensor *input, const dg_tensor *target, dg_reduction r);
DG_API dg_tensor *dg_l1_loss(const dg_tensor *input, const dg_tensor *target, dg_reduction r);
DG_API dg_tensor *dg_square_error_cost(const dg_tensor *input, const dg_tensor *label); /* elementwise (x-y)^2 */

/* paddle.nn.functional.cross_entropy; defaults are Paddle's. */
typedef struct dg_cross_entropy_params {
    dg_reduction reduction;   /* default DG_REDUCE_MEAN (over the rows that are not ignored) */
    bool soft_label;          /* label is a distribution shaped like the logits; default false */
    bool use_ignore_index;    /* default false: every label counts */
    int64_t ignore_index;     /* with use_ignore_index: hard labels equal to it are skipped; default -100 */
    bool input_is_probs;      /* default false: input is logits; true: probabilities (log taken) */
    int axis;                 /* class axis, negative counts from the end; default -1 (Paddle's: the
                                 last axis); 1 for [N, C, H, W]-style inputs, 0 for [C, N] */
    const dg_tensor *weight;  /* [C] weight per class (torch's `weight`), borrowed for the call; NULL
                                 (default): all 1. With hard labels a mean divides by the weights of
                                 the rows counted, as torch does */
    double label_smoothing;   /* in [0, 1]; default 0. torch's: the target becomes (1 - e) one-hot +
                                 e / C, with torch's reductions of the smoothing term */
    uint32_t params_tag;     /* set by dg_cross_entropy_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_cross_entropy_params;
DG_API dg_cross_entropy_params dg_cross_entropy_default_params(void);
/* Labels: integer class ids of shape [N] or [N,1] (Paddle's layout), or soft labels. The plain
 * form uses the default params. */
DG_API dg_tensor *dg_cross_entropy(const dg_tensor *logits, const dg_tensor *label);
DG_API dg_tensor *dg_cross_entropy_ext(const dg_tensor *logits, const dg_tensor *label, dg_cross_entropy_params p);
DG_API dg_tensor *dg_nll_loss(const dg_tensor *log_probs, const dg_tensor *label, dg_reduction r, int64_t ignore_index);
/* torch.nn.functional.nll_loss; defaults are torch's. */
typedef struct dg_nll_loss_params {
    dg_reduction reduction;   /* default DG_REDUCE_MEAN (divided by the weights of the rows counted) */
    int64_t ignore_index;     /* labels equal to it are skipped; default -100 */
    const dg_tensor *weight;  /* [C] weight per class, borrowed for the call; NULL (default): all 1 */
    uint32_t params_tag;     /* set by dg_nll_loss_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nll_loss_params;
DG_API dg_nll_loss_params dg_nll_loss_default_params(void);
DG_API dg_tensor *dg_nll_loss_ext(const dg_tensor *log_probs, const dg_tensor *label, dg_nll_loss_params p);
DG_API dg_tensor *dg_binary_cross_entropy_with_logits(const dg_tensor *logits, const dg_tensor *label, dg_reduction r);
/* torch's BCELoss / BCEWithLogitsLoss options; defaults are torch's. */
typedef struct dg_bce_params {
    dg_reduction reduction;       /* default DG_REDUCE_MEAN */
    const dg_tensor *weight;      /* broadcast to the input: weight per element; NULL (default): 1 */
    const dg_tensor *pos_weight;  /* with logits only: weight of the positive term, broadcast over the
                                     last axis (one per class); NULL (default): 1 */
    uint32_t params_tag;     /* set by dg_bce_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_bce_params;
DG_API dg_bce_params dg_bce_default_params(void);
DG_API dg_tensor *dg_binary_cross_entropy_with_logits_ext(const dg_tensor *logits, const dg_tensor *label, dg_bce_params p);
/* On probabilities in [0, 1]; each log is clamped at -100, as torch does (no pos_weight). */
DG_API dg_tensor *dg_binary_cross_entropy(const dg_tensor *probs, const dg_tensor *label, dg_bce_params p);
/* torch's smooth_l1_loss (beta >= 0; torch's default 1: 0.5 d^2 / beta below beta, |d| - beta / 2
 * above) and huber_loss (delta > 0; default 1: 0.5 d^2 below delta, delta (|d| - delta / 2) above).
 * One point differs on purpose: with beta 0 (the L1 loss) the gradient at d = 0 is 0, as torch's
 * l1_loss gives, where torch's smooth_l1 kernel gives -1. */
DG_API dg_tensor *dg_smooth_l1_loss(const dg_tensor *input, const dg_tensor *target, dg_reduction r, double beta);
DG_API dg_tensor *dg_huber_loss(const dg_tensor *input, const dg_tensor *target, dg_reduction r, double delta);
/* torch.nn.functional.kl_div: input holds log-probabilities; target probabilities, or
 * log-probabilities with log_target. Per element target * (log target - input) (0 where target
 * is 0). Reductions: MEAN over every element (torch's default), SUM, NONE, BATCHMEAN (the sum
 * divided by the first axis: the true KL divergence per sample). */
DG_API dg_tensor *dg_kl_div(const dg_tensor *input, const dg_tensor *target, dg_reduction r, bool log_target);
/* Fraction of rows whose label is among the top k scores ([N,C] scores, [N] or [N,1] labels). */
DG_API dg_tensor *dg_accuracy(const dg_tensor *scores, const dg_tensor *label, int k);

/* ---- convolution, pooling, normalisation, dropout (NCHW) ---- */
typedef struct dg_conv2d_params {           /* defaults are torch's */
    int stride[2];                           /* >= 1; default (1, 1) */
    int padding[2];                          /* >= 0; default (0, 0) */
    int dilation[2];                         /* >= 1; default (1, 1) */
    int groups;                              /* >= 1; default 1 */
    uint32_t params_tag;     /* set by dg_conv2d_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_conv2d_params;
DG_API dg_conv2d_params dg_conv2d_default_params(void);
/* x [N,C,H,W], w [OC, C/groups, KH, KW], b [OC] or NULL */
DG_API dg_tensor *dg_conv2d(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv2d_params p);

/* A pool stride that is the kernel size (torch's and Paddle's stride=None). */
#define DG_STRIDE_KERNEL (-1)
typedef struct dg_pool2d_params {
    int kernel[2];                           /* >= 1; no default: the default params hold (0, 0) */
    int stride[2];                           /* >= 1; DG_STRIDE_KERNEL (default): the kernel's */
    int padding[2];                          /* >= 0, at most half the kernel; default (0, 0) */
    bool ceil_mode;                          /* default false */
    bool count_include_pad;                  /* avg pool; default false as Paddle's exclusive=True
                                                (torch's default is true) */
    int dilation[2];                         /* max pool only (average pooling: 1); >= 1; default (1, 1) */
    int divisor_override;                    /* avg pool only; > 0 divides every window's sum by it;
                                                default 0 (none) */
    uint32_t params_tag;     /* set by dg_pool2d_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_pool2d_params;
DG_API dg_pool2d_params dg_pool2d_default_params(void);
DG_API dg_tensor *dg_max_pool2d(const dg_tensor *x, dg_pool2d_params p);
DG_API dg_tensor *dg_avg_pool2d(const dg_tensor *x, dg_pool2d_params p);
DG_API dg_tensor *dg_adaptive_avg_pool2d(const dg_tensor *x, int out_h, int out_w);

/* ---- conv/pool parity with torch.nn.functional (conv_transpose2d, conv1d, 1-d pools, indices) ---- */
typedef struct dg_conv_transpose2d_params {  /* defaults are torch's */
    int stride[2];                           /* >= 1; default (1, 1) */
    int padding[2];                          /* >= 0; default (0, 0) */
    int output_padding[2];                   /* >= 0, < stride or < dilation (torch's rule); default (0, 0) */
    int dilation[2];                         /* >= 1; default (1, 1) */
    int groups;                              /* >= 1; default 1 */
    uint32_t params_tag;     /* set by dg_conv_transpose2d_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_conv_transpose2d_params;
DG_API dg_conv_transpose2d_params dg_conv_transpose2d_default_params(void);
/* x [N, C_in, H, W], w [C_in, C_out/groups, KH, KW], b [C_out] or NULL ->
 * [N, C_out, (H-1)*stride - 2*padding + dilation*(KH-1) + output_padding + 1, (same for W)] */
DG_API dg_tensor *dg_conv_transpose2d(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv_transpose2d_params p);
typedef struct dg_conv1d_params { int stride, padding, dilation, groups; uint32_t params_tag; } dg_conv1d_params;   /* torch's: 1, 0, 1, 1 */
DG_API dg_conv1d_params dg_conv1d_default_params(void);
/* x [N, C, L], w [OC, C/groups, K], b [OC] or NULL */
DG_API dg_tensor *dg_conv1d(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_conv1d_params p);
/* max_pool2d that also returns torch's indices (DG_I64, flat within each H*W input plane) in
 * *indices (a new tensor, no gradient; the caller frees it; NULL: not wanted) */
DG_API dg_tensor *dg_max_pool2d_with_indices(const dg_tensor *x, dg_pool2d_params p, dg_tensor **indices);
/* torch's adaptive_max_pool2d: bins start = floor(i*H/out), end = ceil((i+1)*H/out); the first
 * maximum wins ties, NaN propagates; indices as dg_max_pool2d_with_indices (may be NULL) */
DG_API dg_tensor *dg_adaptive_max_pool2d(const dg_tensor *x, int out_h, int out_w, dg_tensor **indices);
typedef struct dg_pool1d_params {           /* defaults are torch's max_pool1d / avg_pool1d */
    int kernel;                              /* >= 1; no default (0) */
    int stride;                              /* >= 1; DG_STRIDE_KERNEL (default): the kernel's */
    int padding;                             /* >= 0, at most half the kernel; default 0 */
    int dilation;                            /* max pool only; default 1 */
    bool ceil_mode;                          /* default false */
    bool count_include_pad;                  /* avg pool; default true (torch's) */
    uint32_t params_tag;     /* set by dg_pool1d_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_pool1d_params;
DG_API dg_pool1d_params dg_pool1d_default_params(void);
/* x [N, C, L] */
DG_API dg_tensor *dg_max_pool1d(const dg_tensor *x, dg_pool1d_params p);
DG_API dg_tensor *dg_max_pool1d_with_indices(const dg_tensor *x, dg_pool1d_params p, dg_tensor **indices);
DG_API dg_tensor *dg_avg_pool1d(const dg_tensor *x, dg_pool1d_params p);
DG_API dg_tensor *dg_adaptive_max_pool1d(const dg_tensor *x, int out_l, dg_tensor **indices);
DG_API dg_tensor *dg_adaptive_avg_pool1d(const dg_tensor *x, int out_l);

typedef struct dg_batch_norm_params {       /* torch.nn.functional.batch_norm's defaults */
    bool training;           /* batch statistics + running-stat update; else running stats; default false */
    double momentum;         /* PyTorch convention: running = (1-m)*running + m*batch, in [0, 1]; default 0.1 */
    double eps;              /* > 0; default 1e-5 */
    uint32_t params_tag;     /* set by dg_batch_norm_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_batch_norm_params;
DG_API dg_batch_norm_params dg_batch_norm_default_params(void);
/* x [N,C,...]; weight/bias [C] or NULL; running_mean/var [C] (updated in place when training),
 * may be NULL in training mode. */
DG_API dg_tensor *dg_batch_norm(const dg_tensor *x, dg_tensor *running_mean, dg_tensor *running_var,
                         const dg_tensor *weight, const dg_tensor *bias, dg_batch_norm_params p);
/* relu(batch_norm(...)) in one pass over the data, forward and backward (ResNet's conv -> bn ->
 * relu); values and gradients are bit-identical to the two ops. */
DG_API dg_tensor *dg_batch_norm_relu(const dg_tensor *x, dg_tensor *running_mean, dg_tensor *running_var,
                                     const dg_tensor *weight, const dg_tensor *bias, dg_batch_norm_params p);

/* Inverted dropout: kept values scaled by 1/(1-p) in training; identity in eval. Mask from
 * the calling thread's generator (the default one unless dg_generator_use picked another). */
DG_API dg_tensor *dg_dropout(const dg_tensor *x, double p, bool training);
typedef struct dg_dropout_params {
    double p;
    bool training;
    dg_generator *generator;   /* NULL: the calling thread's generator */
    uint32_t params_tag;     /* set by dg_dropout_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_dropout_params;
DG_API dg_dropout_params dg_dropout_default_params(void);   /* p 0.5, training, the thread's generator (torch's) */
DG_API dg_tensor *dg_dropout_ext(const dg_tensor *x, dg_dropout_params p);
/* torch.nn.functional.dropout2d (torch 1.13): one keep-or-drop draw per (x[0], x[1]) pair, the
 * kept channels scaled by 1/(1-p), for x of 2 or more dims: [N, C, H, W] drops whole HxW
 * planes; a 3-D x is [N, C, L], as 1.13 reads it (not [C, H, W]); a 2-D x [N, C] drops single
 * elements. torch 1.13 warns for inputs other than 3-D and 4-D; dygraph does not warn. 1-D x
 * is refused, as torch's. Eval or p = 0 copies x; the gradient is g times the same mask. */
DG_API dg_tensor *dg_dropout2d(const dg_tensor *x, double p, bool training);
DG_API dg_tensor *dg_dropout2d_ext(const dg_tensor *x, dg_dropout_params p);

/* ---- sampling (eager/ops/random.c): no gradient; draws from the calling thread's generator
 * (dg_generator_use), on its Philox stream: the same numbers on every device for a seed, not
 * torch's CPU generator's numbers ---- */
/* torch.multinomial: probs [K] or [R, K] of non-negative weights (need not sum to 1), float;
 * int64 indices [n] or [R, n]. Without replacement n <= K, each row's categories drawn at most
 * once (torch's algorithm: the top n of w / E, E ~ Exp(1)); a row summing to 0, a negative, inf
 * or NaN weight are refused as torch refuses them. */
DG_API dg_tensor *dg_multinomial(const dg_tensor *probs, int64_t num_samples, bool replacement);

#ifdef __cplusplus
}
#endif
#endif
