/* eager/cpu/iter.h — walking an output and up to three strided inputs over the output's shape. Dims are
 * coalesced first (so contiguous and broadcast cases become one long row), then the work is
 * cut into rows that OpenMP threads take independently. */
#ifndef DG_CPU_ITER_H
#define DG_CPU_ITER_H

#include "../internal.h"

#define DG_ITER_MAX_OPS 4
#define DG_ITER_CHUNK 8192          /* elements per row when the whole walk is one long row */
#define DG_PAR_MIN 32768            /* below this many elements threads cost more than they save */

typedef struct dg_iter {
    int ndim, nops;
    int64_t shape[DG_MAX_DIMS];
    int64_t st[DG_ITER_MAX_OPS][DG_MAX_DIMS];
    char *base[DG_ITER_MAX_OPS];
    size_t esize[DG_ITER_MAX_OPS];
    int64_t rows, row_len;          /* rows of the walk after coalescing / chunking */
} dg_iter;

/* ops[0] sets the shape; every other operand has the same ndim with stride 0 where it broadcasts. */
static inline void dg_iter_init(dg_iter *it, const dg_kview *const *ops, int nops) {
    const dg_kview *y = ops[0];
    it->nops = nops;
    int nd = 0;
    for (int d = 0; d < y->ndim; d++) {
        if (y->shape[d] == 1) continue;            /* size-1 dims carry no stride information */
        if (nd > 0) {
            bool merge = true;
            for (int k = 0; k < nops; k++)
                if (it->st[k][nd - 1] != ops[k]->stride[d] * y->shape[d]) { merge = false; break; }
            if (merge) {
                it->shape[nd - 1] *= y->shape[d];
                for (int k = 0; k < nops; k++) it->st[k][nd - 1] = ops[k]->stride[d];
                continue;
            }
        }
        it->shape[nd] = y->shape[d];
        for (int k = 0; k < nops; k++) it->st[k][nd] = ops[k]->stride[d];
        nd++;
    }
    if (nd == 0) { it->shape[0] = 1; for (int k = 0; k < nops; k++) it->st[k][0] = 1; nd = 1; }
    it->ndim = nd;
    for (int k = 0; k < nops; k++) {
        it->esize[k] = dg_dtype_bytes(ops[k]->dtype);
        it->base[k] = (char *)ops[k]->data;
    }
    if (nd == 1) {
        it->row_len = it->shape[0] < DG_ITER_CHUNK ? it->shape[0] : DG_ITER_CHUNK;
        it->rows = it->row_len ? (it->shape[0] + it->row_len - 1) / it->row_len : 0;  /* empty tensor: no rows */
    } else {
        it->row_len = it->shape[nd - 1];
        it->rows = 1;
        for (int d = 0; d < nd - 1; d++) it->rows *= it->shape[d];
    }
}

/* Pointers and length of row r; strides of the row in elements go to st[k]. */
static inline int64_t dg_iter_row(const dg_iter *it, int64_t r, char **p, int64_t *st) {
    int nd = it->ndim;
    int64_t len = it->row_len;
    for (int k = 0; k < it->nops; k++) { p[k] = it->base[k]; st[k] = it->st[k][nd - 1]; }
    if (nd == 1) {
        int64_t start = r * it->row_len;
        if (start + len > it->shape[0]) len = it->shape[0] - start;
        for (int k = 0; k < it->nops; k++) p[k] += start * it->st[k][0] * (int64_t)it->esize[k];
        return len;
    }
    for (int d = nd - 2; d >= 0; d--) {
        int64_t i = r % it->shape[d];
        r /= it->shape[d];
        for (int k = 0; k < it->nops; k++) p[k] += i * it->st[k][d] * (int64_t)it->esize[k];
    }
    return len;
}

static inline int64_t dg_iter_numel(const dg_iter *it) {
    int64_t n = 1;
    for (int d = 0; d < it->ndim; d++) n *= it->shape[d];
    return n;
}

#endif
