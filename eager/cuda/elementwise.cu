/* eager/cuda/elementwise.cu — unary and broadcasting binary ops (f32, f64; add, sub, mul, max and
 * min also on i32/i64) and the GT/EQ comparisons, the GPU twins of eager/cpu/elementwise.c. Each formula is the CPU's expression
 * with C's promotions spelled out: in the f32 kernels the CPU calls the double libm functions
 * (exp, erf, tanh, pow, ...) and evaluates expressions with double constants in double, so
 * these do too, then round to float once. Products feeding a sum use dgk_mul/dgk_add so nvcc
 * cannot fuse them into FMAs that the CPU (gcc -std=c11: no contraction) does not do.
 * The op is a template parameter: one kernel per (op, dtype) with no switch in the loop.
 * y may alias an input element for element (in-place ops): each thread reads before it writes. */
#include "kernel_util.cuh"

#define SQRT_2_OVER_PI 0.7978845608028654
#define INV_SQRT2 0.7071067811865476
#define INV_SQRT_2PI 0.3989422804014327
#define GELU_C 0.044715

template <typename T, int OP>
__device__ __forceinline__ T unary_op(T X, T p0, T p1) {
    const double x = (double)X;
    switch (OP) {
    case DG_UN_EXP: return (T)exp(x);
    case DG_UN_LOG: return (T)log(x);
    case DG_UN_SQRT: return (T)sqrt(x);
    case DG_UN_ABS: return X < 0 ? -X : X;
    case DG_UN_SIGN: return (T)((X > 0) - (X < 0));
    case DG_UN_RELU: return !(X <= 0) ? X : (T)0;   /* NaN stays NaN, as torch.relu */
    case DG_UN_SIGMOID: return (T)(1.0 / (1.0 + exp((double)(-X))));
    case DG_UN_TANH: return (T)tanh(x);
    case DG_UN_GELU:        /* 0.5 * X * (1 + erf(X * INV_SQRT2)) */
        return (T)dgk_mul(dgk_mul(0.5, x), dgk_add(1.0, erf(dgk_mul(x, INV_SQRT2))));
    case DG_UN_GELU_TANH: { /* 0.5 * X * (1 + tanh(S * (X + C * X * X * X))) */
        double cube = dgk_mul(dgk_mul(dgk_mul(GELU_C, x), x), x);
        double u = dgk_mul(SQRT_2_OVER_PI, dgk_add(x, cube));
        return (T)dgk_mul(dgk_mul(0.5, x), dgk_add(1.0, tanh(u)));
    }
    case DG_UN_LEAKY_RELU: return X > 0 ? X : dgk_mul(p0, X);
    case DG_UN_CLIP: return X < p0 ? p0 : (X > p1 ? p1 : X);
    case DG_UN_AFFINE: return dgk_add(dgk_mul(p0, X), p1);
    case DG_UN_RDIV: return p0 / X;
    case DG_UN_POWS: return (T)pow(x, (double)p0);
    case DG_UN_ELU: return X > 0 ? X : (T)dgk_mul((double)p0, expm1(x));
    case DG_UN_SOFTPLUS: {   /* X * p0 in T, as the CPU compares it; the rest in double */
        T xb = dgk_mul(X, p0);
        return xb > p1 ? X : (T)(log1p(exp((double)xb)) / (double)p0);
    }
    case DG_UN_LOG1P: return (T)log1p(x);
    case DG_UN_SILU: return (T)(x / dgk_add(1.0, exp(-x)));
    case DG_UN_RSQRT: return (T)(1.0 / sqrt(x));
    case DG_UN_SIN: return (T)sin(x);
    case DG_UN_COS: return (T)cos(x);
    default: return X;
    }
}

/* gelu'(x) and gelu_tanh'(x) in double, term order as in the CPU file */
__device__ __forceinline__ double gelu_grad(double x) {
    double cdf = dgk_mul(0.5, dgk_add(1.0, erf(dgk_mul(x, INV_SQRT2))));
    double pdf = exp(dgk_mul(dgk_mul(-0.5, x), x));
    return dgk_add(cdf, dgk_mul(dgk_mul(x, INV_SQRT_2PI), pdf));
}
__device__ __forceinline__ double gelu_tanh_grad(double x) {
    double u = dgk_mul(SQRT_2_OVER_PI, dgk_add(x, dgk_mul(dgk_mul(dgk_mul(GELU_C, x), x), x)));
    double t = tanh(u);
    const double c3 = 3 * GELU_C;   /* folded like gcc folds `3 * 0.044715 * x * x` */
    double du = dgk_mul(SQRT_2_OVER_PI, dgk_add(1.0, dgk_mul(dgk_mul(c3, x), x)));
    double a = dgk_mul(0.5, dgk_add(1.0, t));
    double b = dgk_mul(dgk_mul(dgk_mul(0.5, x), dgk_sub(1.0, dgk_mul(t, t))), du);
    return dgk_add(a, b);
}

__device__ __forceinline__ double softplus_grad(double g, double x, double beta, double threshold) {
    double xb = dgk_mul(x, beta);
    if (xb > threshold) return g;
    double z = exp(xb);
    return dgk_mul(g, z) / dgk_add(z, 1.0);
}
__device__ __forceinline__ double silu_grad(double x) {
    double s = 1.0 / dgk_add(1.0, exp(-x));
    return dgk_mul(s, dgk_add(1.0, dgk_mul(x, dgk_sub(1.0, s))));
}

template <typename T, int OP>
__device__ __forceinline__ T binary_op(T A, T B, T p0, T p1) {
    switch (OP) {
    case DG_BIN_ADD: return A + B;
    case DG_BIN_ADD_RELU: { T s = A + B; return !(s <= 0) ? s : (T)0; }
    case DG_BIN_SUB: return A - B;
    case DG_BIN_MUL: return A * B;
    case DG_BIN_DIV: return A / B;
    case DG_BIN_MAX: return A >= B || A != A ? A : B;   /* a NaN on either side is the result, as in PyTorch */
    case DG_BIN_MIN: return A <= B || A != A ? A : B;
    case DG_BIN_POW: return (T)pow((double)A, (double)B);
    case DG_BIN_AXPBY: return dgk_add(dgk_mul(p0, A), dgk_mul(p1, B));
    case DG_BIN_RELU_GRAD: return B > 0 ? A : (T)0;
    case DG_BIN_LEAKY_RELU_GRAD: return B > 0 ? A : dgk_mul(p0, A);
    case DG_BIN_SIGMOID_GRAD: return dgk_mul(dgk_mul(A, B), dgk_sub((T)1, B));
    case DG_BIN_TANH_GRAD: return dgk_mul(A, dgk_sub((T)1, dgk_mul(B, B)));
    case DG_BIN_GELU_GRAD: return (T)dgk_mul((double)A, gelu_grad((double)B));
    case DG_BIN_GELU_TANH_GRAD: return (T)dgk_mul((double)A, gelu_tanh_grad((double)B));
    case DG_BIN_CLIP_GRAD: return (B >= p0 && B <= p1) ? A : (T)0;
    case DG_BIN_ELU_GRAD: return B > 0 ? A : (T)dgk_mul((double)dgk_mul(A, p0), exp((double)B));
    case DG_BIN_SOFTPLUS_GRAD: return (T)softplus_grad((double)A, (double)B, (double)p0, (double)p1);
    case DG_BIN_SILU_GRAD: return (T)dgk_mul((double)A, silu_grad((double)B));
    default: return A;
    }
}

template <typename T, int OP>
__global__ void unary_kernel(const T *x, T *y, const __grid_constant__ dgk_geom g, T p0, T p1) {
    DGK_FOR(i, g.numel) {
        int64_t off[2];
        dgk_offsets<2>(g, i, off);
        y[off[0]] = unary_op<T, OP>(x[off[1]], p0, p1);
    }
}

template <typename T, int OP>
__global__ void binary_kernel(const T *a, const T *b, T *y, const __grid_constant__ dgk_geom g, T p0, T p1) {
    DGK_FOR(i, g.numel) {
        int64_t off[3];
        dgk_offsets<3>(g, i, off);
        T A = a[off[1]], B = b[off[2]];
        y[off[0]] = binary_op<T, OP>(A, B, p0, p1);
    }
}

/* integer arithmetic (i32/i64): wrapping, on the unsigned type as the CPU does */
template <typename T, typename U, int OP>
__global__ void int_binary_kernel(const T *a, const T *b, T *y, const __grid_constant__ dgk_geom g) {
    DGK_FOR(i, g.numel) {
        int64_t off[3];
        dgk_offsets<3>(g, i, off);
        T A = a[off[1]], B = b[off[2]];
        y[off[0]] = OP == DG_BIN_ADD ? (T)((U)A + (U)B) : OP == DG_BIN_SUB ? (T)((U)A - (U)B)
                  : OP == DG_BIN_MUL ? (T)((U)A * (U)B) : OP == DG_BIN_MAX ? (A >= B ? A : B) : (A <= B ? A : B);
    }
}

/* comparisons, like the CPU's: two int64 operands compared as int64 (a double cannot tell values
 * past 2^53 apart), any other dtypes as doubles, which is exact for each; y is DG_BOOL */
template <bool GT>
__global__ void compare_kernel(const void *a, int adt, const void *b, int bdt, uint8_t *y, const __grid_constant__ dgk_geom g) {
    DGK_FOR(i, g.numel) {
        int64_t off[3];
        dgk_offsets<3>(g, i, off);
        if (adt == DG_I64 && bdt == DG_I64) {
            long long av = ((const long long *)a)[off[1]], bv = ((const long long *)b)[off[2]];
            y[off[0]] = GT ? av > bv : av == bv;
            continue;
        }
        double av = dgk_load_any(a, adt, off[1]), bv = dgk_load_any(b, bdt, off[2]);
        y[off[0]] = GT ? av > bv : av == bv;
    }
}

template <typename T, int OP>
static int launch_unary(const dg_kview *x, dg_kview *y, const dgk_geom &g, double p0, double p1) {
    DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), unary_kernel<T, OP>)(
        (const T *)x->data, (T *)y->data, g, (T)p0, (T)p1);
    return DG_CUDA(cudaGetLastError());
}

template <typename T>
static int unary_t(dg_unary_op op, const dg_kview *x, dg_kview *y, const dgk_geom &g, double p0, double p1) {
    switch (op) {
#define U(OP) case OP: return launch_unary<T, OP>(x, y, g, p0, p1);
    U(DG_UN_EXP) U(DG_UN_LOG) U(DG_UN_SQRT) U(DG_UN_ABS) U(DG_UN_SIGN)
    U(DG_UN_RELU) U(DG_UN_SIGMOID) U(DG_UN_TANH) U(DG_UN_GELU) U(DG_UN_GELU_TANH)
    U(DG_UN_LEAKY_RELU) U(DG_UN_CLIP) U(DG_UN_AFFINE) U(DG_UN_RDIV) U(DG_UN_POWS)
    U(DG_UN_ELU) U(DG_UN_SOFTPLUS) U(DG_UN_LOG1P) U(DG_UN_SILU) U(DG_UN_RSQRT) U(DG_UN_SIN) U(DG_UN_COS)
#undef U
    }
    DG_ERR(DG_EUNSUPPORTED, "cuda unary op %d not supported", (int)op);
    return DG_EUNSUPPORTED;
}

extern "C" int dg_cuda_unary(const dg_backend *be, dg_unary_op op, const dg_kview *x, dg_kview *y, double p0, double p1) {
    DG_CUDA_ENTER(be);
    if (x->dtype != y->dtype || (x->dtype != DG_F32 && x->dtype != DG_F64)) {
        DG_ERR(DG_EUNSUPPORTED, "cuda unary op %d: dtype %s not supported", (int)op, dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    if (y->numel == 0) return 0;
    const dg_kview *ops[2] = { y, x };
    dgk_geom g;
    dgk_geom_init(&g, ops, 2);
    return x->dtype == DG_F32 ? unary_t<float>(op, x, y, g, p0, p1) : unary_t<double>(op, x, y, g, p0, p1);
}

template <typename T, int OP>
static int launch_binary(const dg_kview *a, const dg_kview *b, dg_kview *y, const dgk_geom &g, double p0, double p1) {
    DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), binary_kernel<T, OP>)(
        (const T *)a->data, (const T *)b->data, (T *)y->data, g, (T)p0, (T)p1);
    return DG_CUDA(cudaGetLastError());
}

template <typename T>
static int binary_t(dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, const dgk_geom &g,
                    double p0, double p1) {
    switch (op) {
#define B(OP) case OP: return launch_binary<T, OP>(a, b, y, g, p0, p1);
    B(DG_BIN_ADD) B(DG_BIN_ADD_RELU) B(DG_BIN_SUB) B(DG_BIN_MUL) B(DG_BIN_DIV) B(DG_BIN_MAX) B(DG_BIN_MIN) B(DG_BIN_POW)
    B(DG_BIN_AXPBY) B(DG_BIN_RELU_GRAD) B(DG_BIN_LEAKY_RELU_GRAD) B(DG_BIN_SIGMOID_GRAD) B(DG_BIN_TANH_GRAD)
    B(DG_BIN_GELU_GRAD) B(DG_BIN_GELU_TANH_GRAD) B(DG_BIN_CLIP_GRAD)
    B(DG_BIN_ELU_GRAD) B(DG_BIN_SOFTPLUS_GRAD) B(DG_BIN_SILU_GRAD)
#undef B
    default: break;
    }
    DG_ERR(DG_EUNSUPPORTED, "cuda binary op %d not supported", (int)op);
    return DG_EUNSUPPORTED;
}

template <typename T, typename U>
static int int_binary_t(dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, const dgk_geom &g) {
    switch (op) {
#define B(OP) case OP: DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), int_binary_kernel<T, U, OP>)( \
        (const T *)a->data, (const T *)b->data, (T *)y->data, g); return DG_CUDA(cudaGetLastError());
    B(DG_BIN_ADD) B(DG_BIN_SUB) B(DG_BIN_MUL) B(DG_BIN_MAX) B(DG_BIN_MIN)
#undef B
    default: break;
    }
    DG_ERR(DG_EUNSUPPORTED, "cuda binary op %d: not defined on %s", (int)op, dg_dtype_name(y->dtype));
    return DG_EUNSUPPORTED;
}

extern "C" int dg_cuda_binary(const dg_backend *be, dg_binary_op op, const dg_kview *a, const dg_kview *b, dg_kview *y, double p0, double p1) {
    DG_CUDA_ENTER(be);
    const dg_kview *ops[3] = { y, a, b };
    dgk_geom g;
    if (op == DG_BIN_GT || op == DG_BIN_EQ) {
        if (!dgk_dtype_ok_half(a->dtype) || !dgk_dtype_ok_half(b->dtype) || dg_dtype_size(y->dtype) != 1) {
            DG_ERR(DG_EUNSUPPORTED, "cuda compare: dtypes %s, %s -> %s not supported", dg_dtype_name(a->dtype),
                   dg_dtype_name(b->dtype), dg_dtype_name(y->dtype));
            return DG_EUNSUPPORTED;
        }
        if (y->numel == 0) return 0;
        dgk_geom_init(&g, ops, 3);
        const void *ap = a->data, *bp = b->data;
        uint8_t *yp = (uint8_t *)y->data;
        if (op == DG_BIN_GT)
            DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), compare_kernel<true>)(ap, (int)a->dtype, bp, (int)b->dtype, yp, g);
        else
            DGK_LAUNCH(dgk_blocks(g.numel), DGK_THREADS, 0, dg_cuda_stream(), compare_kernel<false>)(ap, (int)a->dtype, bp, (int)b->dtype, yp, g);
        return DG_CUDA(cudaGetLastError());
    }
    if (a->dtype == y->dtype && b->dtype == y->dtype && (y->dtype == DG_I32 || y->dtype == DG_I64)) {
        if (y->numel == 0) return 0;
        dgk_geom_init(&g, ops, 3);
        return y->dtype == DG_I32 ? int_binary_t<int32_t, uint32_t>(op, a, b, y, g) : int_binary_t<int64_t, uint64_t>(op, a, b, y, g);
    }
    if (a->dtype != y->dtype || b->dtype != y->dtype || (y->dtype != DG_F32 && y->dtype != DG_F64)) {
        DG_ERR(DG_EUNSUPPORTED, "cuda binary op %d: dtypes %s, %s -> %s not supported", (int)op,
               dg_dtype_name(a->dtype), dg_dtype_name(b->dtype), dg_dtype_name(y->dtype));
        return DG_EUNSUPPORTED;
    }
    if (y->numel == 0) return 0;
    dgk_geom_init(&g, ops, 3);
    return y->dtype == DG_F32 ? binary_t<float>(op, a, b, y, g, p0, p1) : binary_t<double>(op, a, b, y, g, p0, p1);
}
