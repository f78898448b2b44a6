/* eager/cuda/cublas_loader.c — cuBLAS, opened with dlopen when the first GPU is selected. cuBLAS
 * 13 costs about 215 MB of resident memory the moment it is loaded (an empty program linked
 * with -lcublas peaks at 217 MB here, 1.5 MB without), so linking it would tax every CPU-only
 * process of a CUDA build. The few entry points the backend uses are looked up here and called
 * through dg_cublas. */
#include "cuda_internal.h"
#include <dlfcn.h>

dg_cublas_api dg_cublas;

/* the pointers must have the header's exact types (nothing here runs without a GPU) */
#define SAME(fn, field) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), __typeof__(dg_cublas.field)), #fn)
SAME(cublasCreate_v2, create);
SAME(cublasDestroy_v2, destroy);
SAME(cublasSetStream_v2, set_stream);
SAME(cublasSetMathMode, set_math_mode);
SAME(cublasSgemmStridedBatched_64, sgemm_strided_batched);
SAME(cublasDgemmStridedBatched_64, dgemm_strided_batched);
SAME(cublasGemmStridedBatchedEx_64, gemm_strided_batched_ex);
#undef SAME

int dg_cublas_load(void) {
    if (dg_cublas.loaded) return 0;
    /* the versioned name first: the unversioned link is only in -dev installs */
    const char *names[] = { "libcublas.so.13", "libcublas.so.12", "libcublas.so" };
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        DG_ERR(DG_EDEVICE, "cuda: cannot load cuBLAS (libcublas.so.13/.12): %s; set CUDA_HOME or LD_LIBRARY_PATH", dlerror());
        return DG_EDEVICE;
    }
#define LOAD(field, sym) do { *(void **)&dg_cublas.field = dlsym(h, sym); \
        if (!dg_cublas.field) { DG_ERR(DG_EDEVICE, "cuda: cuBLAS has no %s", sym); dlclose(h); return DG_EDEVICE; } } while (0)
    LOAD(create, "cublasCreate_v2");
    LOAD(destroy, "cublasDestroy_v2");
    LOAD(set_stream, "cublasSetStream_v2");
    LOAD(set_math_mode, "cublasSetMathMode");
    LOAD(sgemm_strided_batched, "cublasSgemmStridedBatched_64");
    LOAD(dgemm_strided_batched, "cublasDgemmStridedBatched_64");
    LOAD(gemm_strided_batched_ex, "cublasGemmStridedBatchedEx_64");
#undef LOAD
    dg_cublas.loaded = true;
    return 0;
}
