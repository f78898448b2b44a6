/* eager/print.c — readable text for a tensor, like PyTorch/Paddle: nested brackets, values
 * elided past three at each end of an axis once the tensor is large. */
#include "internal.h"
#include <stdarg.h>

typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;
static void put(sbuf *b, const char *fmt, ...) {
    va_list ap;
    for (;;) {
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->p && b->n + (size_t)k < b->cap) { b->n += (size_t)k; return; }
        size_t cap = (b->cap ? b->cap * 2 : 256) + (size_t)k;
        char *q = realloc(b->p, cap);
        if (!q) { b->oom = true; return; }
        b->p = q;
        b->cap = cap;
    }
}

static void values(sbuf *b, const dg_tensor *h, int d, int64_t off, bool elide, int indent) {
    if (h->ndim == 0) { put(b, dg_dtype_is_float(h->dtype) ? "%.6g" : "%.0f", dg_get(h, (int64_t[DG_MAX_DIMS]){0})); return; }
    int64_t n = h->shape[d];
    put(b, "[");
    for (int64_t i = 0; i < n; i++) {
        if (elide && n > 6 && i == 3) {
            put(b, d == h->ndim - 1 ? "..., " : "...,\n%*s", d == h->ndim - 1 ? 0 : indent + d + 1, "");
            i = n - 3;
        }
        int64_t o = off + i * h->stride[d];
        if (d == h->ndim - 1) {
            const char *p = (const char *)h->storage->data + o * (int64_t)dg_dtype_bytes(h->dtype);
            switch (h->dtype) {
            case DG_F32: put(b, "%.6g", *(const float *)p); break;
            case DG_F64: put(b, "%.8g", *(const double *)p); break;
            case DG_I64: put(b, "%lld", (long long)*(const int64_t *)p); break;
            case DG_I32: put(b, "%d", *(const int32_t *)p); break;
            case DG_BOOL: put(b, "%s", *(const uint8_t *)p ? "true" : "false"); break;
            case DG_F16: case DG_BF16: put(b, "%.4g", dg_load_as_double(p, h->dtype)); break;   /* 3-4 significant digits */
            default: put(b, "?"); break;
            }
        } else {
            values(b, h, d + 1, o, elide, indent);
        }
        if (i + 1 < n) put(b, d == h->ndim - 1 ? ", " : ",\n%*s", d == h->ndim - 1 ? 0 : indent + d + 1, "");
    }
    put(b, "]");
}

char *dg_to_string(const dg_tensor *t) {
    DG_CHECK_INPUT("to_string", t);
    /* print from a host copy so any backend prints the same way */
    const dg_tensor *h = t;
    dg_tensor *copy = NULL;
    bool own = false;
    if (t->storage->device.type != DG_CPU) {
        h = copy = dg_keep(dg_to_device(t, dg_cpu()));
        if (!h) return NULL;
        own = true;
    }
    sbuf b = {0};
    char dev[16];
    put(&b, "Tensor(shape=%s, dtype=%s, device=%s, requires_grad=%s%s%s,\n       ", DG_SHAPE_STR(t), dg_dtype_name(t->dtype),
        dg_device_name(t->storage->device, dev, sizeof dev), dg_requires_grad(t) ? "true" : "false",
        t->node ? ", grad_fn=" : "", t->node ? t->node->name : "");
    values(&b, h, 0, h->offset, h->numel > 1000, 7);
    put(&b, ")");
    if (own) dg_tensor_free(copy);
    if (b.oom) { free(b.p); DG_ERR(DG_ENOMEM, "to_string: out of memory"); return NULL; }
    return b.p;
}

int dg_print(const dg_tensor *t) {
    char *s = dg_to_string(t);
    if (!s) return dg_last_status();
    puts(s);
    free(s);
    return 0;
}
