/* eager/cpu/conv_pool_bn_pending.c — placeholder entries until the conv/pool/batch-norm
 * kernels land; each reports itself as unsupported. */
#include "../backend.h"
#define PENDING(name) DG_ERR(DG_EUNSUPPORTED, "%s: not implemented on cpu yet", name); return DG_EUNSUPPORTED
int dg_cpu_conv2d(const dg_conv2d_geom *g, const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_tensor *y) { PENDING("conv2d"); }
int dg_cpu_conv2d_backward_data(const dg_conv2d_geom *g, const dg_tensor *gy, const dg_tensor *w, dg_tensor *gx) { PENDING("conv2d"); }
int dg_cpu_conv2d_backward_filter(const dg_conv2d_geom *g, const dg_tensor *gy, const dg_tensor *x, dg_tensor *gw, dg_tensor *gb) { PENDING("conv2d"); }
int dg_cpu_max_pool2d(const dg_pool2d_geom *g, const dg_tensor *x, dg_tensor *y) { PENDING("max_pool2d"); }
int dg_cpu_max_pool2d_backward(const dg_pool2d_geom *g, const dg_tensor *x, const dg_tensor *y, const dg_tensor *gy, dg_tensor *gx) { PENDING("max_pool2d"); }
int dg_cpu_avg_pool2d(const dg_pool2d_geom *g, const dg_tensor *x, dg_tensor *y) { PENDING("avg_pool2d"); }
int dg_cpu_avg_pool2d_backward(const dg_pool2d_geom *g, const dg_tensor *gy, dg_tensor *gx) { PENDING("avg_pool2d"); }
int dg_cpu_adaptive_avg_pool2d(const dg_tensor *x, dg_tensor *y) { PENDING("adaptive_avg_pool2d"); }
int dg_cpu_adaptive_avg_pool2d_backward(const dg_tensor *gy, dg_tensor *gx) { PENDING("adaptive_avg_pool2d"); }
int dg_cpu_batch_norm(const dg_tensor *x, const dg_tensor *w, const dg_tensor *b, dg_tensor *y, dg_tensor *m, dg_tensor *v,
                      bool tr, double eps, int64_t n, int64_t c, int64_t inner) { PENDING("batch_norm"); }
int dg_cpu_batch_norm_backward(const dg_tensor *x, const dg_tensor *gy, const dg_tensor *w, const dg_tensor *m, const dg_tensor *v,
                               bool tr, dg_tensor *gx, dg_tensor *gw, dg_tensor *gb, int64_t n, int64_t c, int64_t inner) { PENDING("batch_norm"); }
