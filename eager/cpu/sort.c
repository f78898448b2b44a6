/* eager/cpu/sort.c — the stable argsort behind dg_sort, dg_argsort and dg_topk. Each line along
 * the sorted axis is copied out with its positions, sorted by (value, position) so that equal
 * values keep their order (torch's stable=True), and the positions written back. NaN is the
 * largest value, as in torch: last ascending, first descending. */
#include "../backend.h"

#include <math.h>
#include <stdlib.h>

/* One comparator pair per element type; the position breaks ties, which makes qsort stable. */
#define SORT_TYPE(T, NAME, ISNAN)                                                                    \
    typedef struct { T v; int64_t i; } NAME##_item;                                                  \
    static int NAME##_cmp_asc(const void *pa, const void *pb) {                                      \
        const NAME##_item *a = pa, *b = pb;                                                          \
        bool na = ISNAN(a->v), nb = ISNAN(b->v);                                                     \
        if (na != nb) return na ? 1 : -1;                                                            \
        if (!na && a->v != b->v) return a->v < b->v ? -1 : 1;                                        \
        return a->i < b->i ? -1 : a->i > b->i;                                                       \
    }                                                                                                \
    static int NAME##_cmp_desc(const void *pa, const void *pb) {                                     \
        const NAME##_item *a = pa, *b = pb;                                                          \
        bool na = ISNAN(a->v), nb = ISNAN(b->v);                                                     \
        if (na != nb) return na ? -1 : 1;                                                            \
        if (!na && a->v != b->v) return a->v > b->v ? -1 : 1;                                        \
        return a->i < b->i ? -1 : a->i > b->i;                                                       \
    }                                                                                                \
    static int NAME##_argsort(const T *x, int64_t *idx, int64_t outer, int64_t dim, int64_t inner, bool desc) { \
        int bad = 0;                                                                                 \
        _Pragma("omp parallel if (outer * inner > 1 && outer * inner * dim > 4096)")                 \
        {                                                                                            \
            NAME##_item *buf = malloc(sizeof(NAME##_item) * (size_t)dim);                            \
            if (!buf) {                                                                              \
                _Pragma("omp atomic write")                                                          \
                bad = 1;                                                                             \
            }                                                                                        \
            _Pragma("omp for schedule(static)")                                                      \
            for (int64_t r = 0; r < outer * inner; r++) {                                            \
                if (!buf) continue;                                                                  \
                int64_t o = r / inner, in = r % inner;                                               \
                const T *src = x + o * dim * inner + in;                                             \
                for (int64_t j = 0; j < dim; j++) { buf[j].v = src[j * inner]; buf[j].i = j; }       \
                qsort(buf, (size_t)dim, sizeof *buf, desc ? NAME##_cmp_desc : NAME##_cmp_asc);       \
                int64_t *dst = idx + o * dim * inner + in;                                           \
                for (int64_t j = 0; j < dim; j++) dst[j * inner] = buf[j].i;                         \
            }                                                                                        \
            free(buf);                                                                               \
        }                                                                                            \
        return bad;                                                                                  \
    }

#define NEVER_NAN(v) ((void)(v), false)
SORT_TYPE(float, f32, isnan)
SORT_TYPE(double, f64, isnan)
SORT_TYPE(int64_t, i64, NEVER_NAN)
SORT_TYPE(int32_t, i32, NEVER_NAN)

int dg_cpu_argsort(const dg_backend *be, const dg_kview *x, dg_kview *idx, int64_t outer, int64_t dim, int64_t inner, bool descending) {
    if (idx->dtype != DG_I64) {
        DG_ERR(DG_EINVAL, "argsort: the index output must be int64, got %s", dg_dtype_name(idx->dtype));
        return DG_EINVAL;
    }
    if (outer * dim * inner == 0) return 0;
    int64_t *ix = idx->data;
    int bad;
    switch (x->dtype) {
    case DG_F32: bad = f32_argsort(x->data, ix, outer, dim, inner, descending); break;
    case DG_F64: bad = f64_argsort(x->data, ix, outer, dim, inner, descending); break;
    case DG_I64: bad = i64_argsort(x->data, ix, outer, dim, inner, descending); break;
    case DG_I32: bad = i32_argsort(x->data, ix, outer, dim, inner, descending); break;
    default:
        DG_ERR(DG_EUNSUPPORTED, "argsort: dtype %s not supported (float32/float64/int64/int32)", dg_dtype_name(x->dtype));
        return DG_EUNSUPPORTED;
    }
    if (bad) {
        DG_ERR(DG_ENOMEM, "argsort: out of host memory for a line of %lld", (long long)dim);
        return DG_ENOMEM;
    }
    return 0;
}
