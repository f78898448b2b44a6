/* eager/cpu/cpu_kernels.h — the CPU backend's kernels, for its table (cpu_backend.c) and the
 * kernels behind the shared float16 / bfloat16 wrappers (half.c, eager/half_via_f32.h):
 * dg_cpu_X is the kernel of entry X for f32 / f64 / integer operands and for the half ones
 * it takes natively. */
#ifndef DG_CPU_KERNELS_H
#define DG_CPU_KERNELS_H

#include "../backend.h"

int dg_cpu_unary(const dg_backend *be, dg_unary_op, const dg_kview *, dg_kview *, double, double);
int dg_cpu_binary(const dg_backend *be, dg_binary_op, const dg_kview *, const dg_kview *, dg_kview *, double, double);
int dg_cpu_reduce(const dg_backend *be, dg_reduce_op, const dg_kview *, dg_kview *);
int dg_cpu_gemm(const dg_backend *be, dg_dtype, bool, bool, int64_t, int64_t, int64_t, double, const void *, int64_t, int64_t,
                const void *, int64_t, int64_t, double, void *, int64_t, int64_t, int64_t);
int dg_cpu_softmax(const dg_backend *be, const dg_kview *, dg_kview *, int64_t, int64_t, bool);
int dg_cpu_softmax_backward(const dg_backend *be, const dg_kview *, const dg_kview *, dg_kview *, int64_t, int64_t, bool);
int dg_cpu_index_select(const dg_backend *be, const dg_kview *, const dg_kview *, dg_kview *, int64_t, int64_t, int64_t);
int dg_cpu_index_add(const dg_backend *be, const dg_kview *, const dg_kview *, dg_kview *, int64_t, int64_t, int64_t);
int dg_cpu_gather(const dg_backend *be, const dg_kview *, const dg_kview *, dg_kview *, int64_t, int64_t, int64_t, int64_t);
int dg_cpu_scatter_add(const dg_backend *be, const dg_kview *, const dg_kview *, dg_kview *, int64_t, int64_t, int64_t, int64_t);
int dg_cpu_argsort(const dg_backend *be, const dg_kview *, dg_kview *, int64_t, int64_t, int64_t, bool);
int dg_cpu_nll(const dg_backend *be, const dg_kview *, const dg_kview *, dg_kview *, int64_t, int64_t, int64_t);
int dg_cpu_nll_backward(const dg_backend *be, const dg_kview *, const dg_kview *, dg_kview *, int64_t, int64_t, int64_t);
int dg_cpu_conv2d(const dg_backend *be, const dg_conv2d_geom *, const dg_kview *, const dg_kview *, const dg_kview *, dg_kview *);
void dg_dnnl_release(const dg_backend *be);
int dg_cpu_rnn_cell(const dg_backend *be, const dg_rnn_cell_args *a);
int dg_cpu_rnn_cell_backward(const dg_backend *be, const dg_rnn_cell_args *a);
int dg_cpu_conv2d_backward_data(const dg_backend *be, const dg_conv2d_geom *, const dg_kview *, const dg_kview *, dg_kview *);
int dg_cpu_conv2d_backward_filter(const dg_backend *be, const dg_conv2d_geom *, const dg_kview *, const dg_kview *, dg_kview *, dg_kview *);
int dg_cpu_max_pool2d(const dg_backend *be, const dg_pool2d_geom *, const dg_kview *, dg_kview *);
int dg_cpu_max_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *, const dg_kview *, const dg_kview *, const dg_kview *, dg_kview *);
int dg_cpu_avg_pool2d(const dg_backend *be, const dg_pool2d_geom *, const dg_kview *, dg_kview *);
int dg_cpu_avg_pool2d_backward(const dg_backend *be, const dg_pool2d_geom *, const dg_kview *, dg_kview *);
int dg_cpu_adaptive_avg_pool2d(const dg_backend *be, const dg_kview *, dg_kview *);
int dg_cpu_adaptive_avg_pool2d_backward(const dg_backend *be, const dg_kview *, dg_kview *);
int dg_cpu_max_pool2d_with_indices(const dg_backend *be, const dg_pool2d_geom *, const dg_kview *, dg_kview *, dg_kview *);
int dg_cpu_adaptive_max_pool2d(const dg_backend *be, const dg_kview *, dg_kview *, dg_kview *);
int dg_cpu_max_pool2d_indices_backward(const dg_backend *be, const dg_pool2d_geom *, const dg_kview *, const dg_kview *, dg_kview *);
/* The pooling kernels also take float16 / bfloat16 (loaded to f32, rounded once on store).
 * Backward passes that sum into gx sum a half plane in an f32 stack buffer of this many
 * elements; larger planes are widened to f32 instead (half.c asks these predicates). */
#define DG_CPU_POOL_HALF_PLANE_MAX 16384
bool dg_cpu_pool_half_plane_fits(int64_t hw);
bool dg_cpu_max_pool2d_half_bwd_fits(const dg_pool2d_geom *g);
int dg_cpu_batch_norm(const dg_backend *be, const dg_kview *, const dg_kview *, const dg_kview *, dg_kview *, dg_kview *, dg_kview *,
                      bool, double, int64_t, int64_t, int64_t);
int dg_cpu_batch_norm_backward(const dg_backend *be, const dg_kview *, const dg_kview *, const dg_kview *, const dg_kview *,
                               const dg_kview *, bool, dg_kview *, dg_kview *, dg_kview *, int64_t, int64_t, int64_t);
int dg_cpu_batch_norm_relu(const dg_backend *be, const dg_kview *, const dg_kview *, const dg_kview *, dg_kview *, dg_kview *, dg_kview *,
                           bool, double, int64_t, int64_t, int64_t);
int dg_cpu_batch_norm_relu_backward(const dg_backend *be, const dg_kview *x, const dg_kview *y, const dg_kview *gy, const dg_kview *,
                                    const dg_kview *, const dg_kview *, bool, dg_kview *, dg_kview *, dg_kview *, int64_t, int64_t, int64_t);

int dg_cpu_fused_update(const dg_backend *be, const dg_update_params *, dg_dtype, const dg_update_tensor *, int);
int dg_cpu_copy(const dg_backend *be, const dg_kview *x, dg_kview *y);   /* any strides, casts between any dtypes */

/* The CPU's dg_half_via_f32 (half.c): the table's `half`. */
struct dg_half_via_f32;
extern const struct dg_half_via_f32 dg_cpu_half;

/* oneDNN's convolutions (conv_dnnl.c): 1 when done, 0 when the caller should fall back; they
 * take f32 operands, or bf16 ones (all of them) natively */
int dg_dnnl_conv2d(const dg_conv2d_geom *, const dg_kview *, const dg_kview *, const dg_kview *, dg_kview *);
int dg_dnnl_conv2d_backward_data(const dg_conv2d_geom *, const dg_kview *, const dg_kview *, dg_kview *);
int dg_dnnl_conv2d_backward_filter(const dg_conv2d_geom *, const dg_kview *, const dg_kview *, dg_kview *, dg_kview *);

#endif
