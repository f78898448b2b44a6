/* data/collate_pad.c — collating samples of different lengths: field 0 (a token sequence, or
 * any tensor whose first dim varies) padded to the longest sample, like
 * torch.nn.utils.rnn.pad_sequence(batch_first=True), plus an int64 lengths field; the other
 * fields stacked as dg_collate stacks them. The DataLoader calls it through its collate hook. */
#include "data_util.h"

/* One element of dtype dt holding v, as the bytes a tensor of dt stores. */
static int pad_bytes(double v, dg_dtype dt, void *out, size_t size) {
    dg_scope *sc = dg_scope_begin();
    dg_tensor *s = dg_scalar(v, dt);
    int rc = s ? dg_to_host(s, out, size) : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
    dg_scope_end(sc);
    return rc;
}

int dg_collate_pad(const dg_sample *s, int64_t n, double pad_value, dg_sample *batch) {
    DG_CHECK_INT(batch, "collate_pad: batch is NULL");
    memset(batch, 0, sizeof *batch);
    DG_CHECK_INT(s && n >= 1, "collate_pad: %s", s ? "no samples" : "samples is NULL");
    int nf = s[0].n;
    DG_CHECK_INT(nf >= 1 && nf < DG_MAX_SAMPLE_FIELDS, "collate_pad: sample 0 has %d fields; padding needs 1 to %d (the "
                 "lengths become one more field, of at most %d)", nf, DG_MAX_SAMPLE_FIELDS - 1, DG_MAX_SAMPLE_FIELDS);
    char sa[96], sb[96];
    const dg_tensor *t0 = s[0].t[0];
    int bad = dg_tensor_check("collate_pad", "sample 0 field 0", t0);
    if (bad) return bad;
    dg_shape sh0 = dg_shape_of(t0);
    dg_dtype dt = dg_dtype_of(t0);
    DG_CHECK_INT(sh0.ndim >= 1 && sh0.ndim < DG_MAX_DIMS, "collate_pad: sample 0 field 0 is %s %s; the padded field needs "
                 "1 to %d dims (the first is the length)", dg_dtype_name(dt), dg_shape_str(t0, sa, sizeof sa), DG_MAX_DIMS - 1);
    int64_t maxlen = 0;
    for (int64_t k = 0; k < n; k++) {
        DG_CHECK_INT(s[k].n == nf, "collate_pad: sample %lld has %d fields but sample 0 has %d", (long long)k, s[k].n, nf);
        const dg_tensor *a = s[k].t[0];
        char what[48];
        snprintf(what, sizeof what, "sample %lld field 0", (long long)k);
        if ((bad = dg_tensor_check("collate_pad", what, a))) return bad;
        dg_shape sh = dg_shape_of(a);
        DG_CHECK_INT(dg_dtype_of(a) == dt, "collate_pad: sample %lld field 0 is %s %s but sample 0 is %s %s: every sample's "
                     "field 0 needs one dtype", (long long)k, dg_dtype_name(dg_dtype_of(a)), dg_shape_str(a, sa, sizeof sa),
                     dg_dtype_name(dt), dg_shape_str(t0, sb, sizeof sb));
        bool same = sh.ndim == sh0.ndim;
        for (int d = 1; same && d < sh.ndim; d++) same = sh.d[d] == sh0.d[d];
        DG_CHECK_INT(same, "collate_pad: sample %lld field 0 is %s but sample 0 is %s: only the first dim (the length) may "
                     "differ", (long long)k, dg_shape_str(a, sa, sizeof sa), dg_shape_str(t0, sb, sizeof sb));
        if (sh.d[0] > maxlen) maxlen = sh.d[0];
    }
    /* the other fields, stacked (dg_collate checks them and names the sample) */
    dg_sample rest = { 0 };
    if (nf > 1) {
        dg_sample *tmp = calloc((size_t)n, sizeof *tmp);
        DG_CHECK_INT(tmp, "collate_pad: out of memory");
        for (int64_t k = 0; k < n; k++) {
            tmp[k].n = nf - 1;
            for (int f = 1; f < nf; f++) tmp[k].t[f - 1] = s[k].t[f];
        }
        int rc = dg_collate(tmp, n, &rest);
        free(tmp);
        if (rc) return rc;
    }
    int64_t shape[DG_MAX_DIMS];
    shape[0] = n;
    shape[1] = maxlen;
    for (int d = 1; d < sh0.ndim; d++) shape[d + 1] = sh0.d[d];
    size_t es = dg_dtype_size(dt), row = es;   /* row: one step of the length, in bytes */
    for (int d = 1; d < sh0.ndim; d++) row *= (size_t)sh0.d[d];
    dg_tensor *y = dg_data_cpu_tensor(shape, sh0.ndim + 1, dt), *len = dg_data_cpu_tensor((int64_t[]){ n }, 1, DG_I64);
    char pad[16];
    int rc = y && len ? pad_bytes(pad_value, dt, pad, es) : (dg_last_status() ? dg_last_status() : DG_ENOMEM);
    char *dst = y && !rc ? dg_tensor_ptr(y) : NULL;
    int64_t *lp = len && !rc ? dg_tensor_ptr(len) : NULL;
    for (int64_t k = 0; !rc && k < n; k++) {
        const dg_tensor *a = s[k].t[0];
        int64_t L = dg_shape_of(a).d[0];
        char *out = dst + (size_t)k * (size_t)maxlen * row;
        size_t have = (size_t)L * row;
        if (have) {
            if (dg_is_contiguous(a) && dg_device_of(a).type == DG_CPU) memcpy(out, dg_tensor_ptr(a), have);
            else rc = dg_to_host(a, out, have);
        }
        for (size_t b = have; b < (size_t)maxlen * row; b += es) memcpy(out + b, pad, es);
        lp[k] = L;
    }
    if (rc) {
        dg_tensor_free(y);
        dg_tensor_free(len);
        dg_sample_clear(&rest);
        return rc;
    }
    batch->t[0] = y;
    for (int f = 1; f < nf; f++) batch->t[f] = rest.t[f - 1];
    batch->t[nf] = len;
    batch->n = nf + 1;
    return 0;
}

int dg_collate_pad_hook(const dg_sample *samples, int64_t n, dg_sample *batch, void *user) {
    return dg_collate_pad(samples, n, user ? *(const double *)user : 0.0, batch);
}
