/* test/cuda_emu/cudnn_internal.h — what the files of the emulated cuDNN share: the objects behind
 * the handles and descriptors, the registry of live objects, argument checks, the error record
 * behind cudnnGetLastErrorString, and element access for the reference loops. The emulation is
 * described in cudnn.c; the entry points live in cudnn.c (handle, errors), cudnn_desc.c
 * (descriptors, cudnnAddTensor), cudnn_conv.c (convolution) and cudnn_norm_pool.c (batch
 * normalization, pooling). Everything here is hidden inside libdgemu.so. */
#ifndef DGEMU_CUDNN_INTERNAL_H
#define DGEMU_CUDNN_INTERNAL_H

#include <cudnn.h>

#include "emu_internal.h"
#include "../../eager/half.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC visibility push(hidden)

typedef cudnnStatus_t st_t;
#define OK CUDNN_STATUS_SUCCESS

extern _Thread_local char t_last_error[512];
enum { OBJ_HANDLE = 1, OBJ_TENSOR, OBJ_FILTER, OBJ_CONV, OBJ_POOL };
/* ---- objects ---- */

/* A 4-d strided view: dims and strides (in elements) in n, c, h, w order. Filters become one too
 * (k in the n slot), so every loop below indexes the same way. */
typedef struct tens {
    cudnnDataType_t dt;
    int64_t d[4], s[4];
} tens;

struct cudnnContext {
    cudaStream_t stream;
    int device;                   /* the current device at cudnnCreate */
};
struct cudnnTensorStruct {
    bool set;
    tens t;
};
struct cudnnFilterStruct {
    bool set;
    cudnnDataType_t dt;
    cudnnTensorFormat_t fmt;
    int k, c, h, w;
};
typedef struct conv_desc {
    bool set;
    int ph, pw, sh, sw, dh, dw;
    cudnnConvolutionMode_t mode;
    cudnnDataType_t ctype;
    int groups;
    cudnnMathType_t math;
} conv_desc;
struct cudnnConvolutionStruct {
    conv_desc c;
};
typedef struct pool_desc {
    bool set;
    cudnnPoolingMode_t mode;
    cudnnNanPropagation_t nan;
    int kh, kw, ph, pw, sh, sw;
} pool_desc;
struct cudnnPoolingStruct {
    pool_desc p;
};


void log_init(void);
st_t failv(bool loud, st_t s, const char *fn, const char *fmt, va_list ap);
__attribute__((format(printf, 3, 4))) st_t fail(st_t s, const char *fn, const char *fmt, ...);
__attribute__((format(printf, 3, 4))) st_t fail_loud(st_t s, const char *fn, const char *fmt, ...);
size_t reg_hash(const void *p, size_t cap);
size_t reg_slot_of(const void *p);
bool reg_grow(void);
bool reg_add(const void *p, int kind);
bool reg_is(const void *p, int kind);
bool reg_remove(const void *p, int kind);
void *obj_new(size_t size, int kind);
bool obj_free(void *o, int kind);
size_t dt_size(cudnnDataType_t dt);
void packed(tens *t, cudnnTensorFormat_t fmt);
int64_t span(const tens *t);
bool same_dims(const tens *a, const tens *b);
bool same_strides(const tens *a, const tens *b);
st_t get_handle(const char *fn, cudnnHandle_t h, cudaStream_t *stream);
st_t get_tensor(const char *fn, const char *what, cudnnTensorDescriptor_t d, tens *out);
st_t get_filter(const char *fn, const char *what, cudnnFilterDescriptor_t d, tens *out);
st_t get_conv(const char *fn, cudnnConvolutionDescriptor_t d, conv_desc *out);
st_t get_pool(const char *fn, cudnnPoolingDescriptor_t d, pool_desc *out);
st_t need_dev(const char *fn, const char *what, const void *p, size_t bytes);
st_t need_host(const char *fn, const char *what, const void *p);
st_t not_poisoned(const char *fn);
st_t submit(const char *fn, cudaStream_t s, dgemu_work_fn work, void *arg);
void *work_alloc(const char *fn, size_t size, st_t *rc);
double scal(const void *p, cudnnDataType_t dt);
double *work_scratch(const char *what, int64_t n);

/* ---- element access (only inside queued work) ---- */

/* half and bfloat16 elements are widened exactly and stored from the f32 result, rounded to
 * nearest even (eager/half.h): the f32 compute type's one rounding on store */
static inline double ld(const void *p, cudnnDataType_t dt, int64_t i) {
    if (dt == CUDNN_DATA_HALF) return dg_f16_to_f32(((const uint16_t *)p)[i]);
    if (dt == CUDNN_DATA_BFLOAT16) return dg_bf16_to_f32(((const uint16_t *)p)[i]);
    return dt == CUDNN_DATA_DOUBLE ? ((const double *)p)[i] : (double)((const float *)p)[i];
}
static inline void stv(void *p, cudnnDataType_t dt, int64_t i, double v) {
    if (dt == CUDNN_DATA_DOUBLE) ((double *)p)[i] = v;
    else if (dt == CUDNN_DATA_HALF) ((uint16_t *)p)[i] = dg_f32_to_f16((float)v);
    else if (dt == CUDNN_DATA_BFLOAT16) ((uint16_t *)p)[i] = dg_f32_to_bf16((float)v);
    else ((float *)p)[i] = (float)v;
}
static inline int64_t at(const tens *t, int64_t n, int64_t c, int64_t h, int64_t w) {
    return n * t->s[0] + c * t->s[1] + h * t->s[2] + w * t->s[3];
}
/* out = alpha * r + beta * out, reading out only when beta is non-zero */
static inline void blend(void *p, const tens *t, int64_t off, double r, double alpha, double beta) {
    double v = alpha * r;
    if (beta != 0) v += beta * ld(p, t->dt, off);
    stv(p, t->dt, off, v);
}


const char *status_name(cudnnStatus_t s);
const char *dt_name(cudnnDataType_t dt);
bool is_fd(cudnnDataType_t dt);
bool is_half(cudnnDataType_t dt);   /* HALF or BFLOAT16 */
size_t bytes_of(const tens *t);
int64_t numel(const tens *t);
/* cudnn_desc.c: the output extent of a convolution or pooling window; false when none fits */
bool out_dim(int64_t in, int64_t pad, int64_t k, int64_t dil, int64_t stride, int64_t *out);
st_t tensor_desc(const char *fn, cudnnTensorDescriptor_t d);   /* cudnn_desc.c: d alive, or BAD_PARAM */

#pragma GCC visibility pop

#endif
