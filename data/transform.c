/* data/transform.c — datasets that transform the samples of another: dg_dataset_map (a user
 * function) and dg_dataset_transform (a Compose of the built-in image transforms on field 0).
 * Randomness comes only from the sample's seed, so a sample's augmentation does not depend on
 * which worker made it. */
#include "data_util.h"
#include <math.h>


/* ---- map ---- */
typedef struct map_ds {
    dg_dataset *base;
    dg_transform_fn fn;
    void *user;
    void (*free_user)(void *);
} map_ds;

#define MAP_SALT 0x6d61702d7466ULL    /* "map-tf": the fn's seed differs from the base's */

static int64_t map_len(void *self) { return dg_dataset_len(((map_ds *)self)->base); }
static int map_get(void *self, int64_t index, uint64_t seed, dg_sample *out) {
    map_ds *m = self;
    int rc = dg_dataset_get(m->base, index, seed, out);
    if (rc) return rc;
    uint64_t errs = dg_error_count();
    rc = m->fn(out, dg_data_philox64(seed, MAP_SALT), m->user);
    if (rc && !dg_error_since(errs)) DG_ERR(rc < 0 ? rc : DG_EINVAL, "map: the transform function returned %d", rc);
    return rc < 0 ? rc : rc > 0 ? DG_EINVAL : 0;
}
static void map_free(void *self) {
    map_ds *m = self;
    if (m->free_user) m->free_user(m->user);
    dg_dataset_free(m->base);
    free(m);
}
static const dg_dataset_vtable map_vt = { map_len, map_get, map_free };

dg_dataset *dg_dataset_map(dg_dataset *base, dg_transform_fn fn, void *user, void (*free_user)(void *)) {
    DG_CHECK_HANDLE(base, "dataset_map: base is NULL");
    DG_CHECK(fn, "dataset_map: fn is NULL");
    map_ds *m = calloc(1, sizeof *m);
    DG_CHECK(m, "dataset_map: out of memory");
    m->base = dg_dataset_ref(base);
    m->fn = fn;
    m->user = user;
    char name[128];
    snprintf(name, sizeof name, "map(%.110s)", dg_dataset_name(base));
    dg_dataset *ds = dg_dataset_new(&map_vt, m, name);
    if (!ds) { dg_dataset_free(m->base); free(m); return NULL; }  /* user stays with the caller */
    m->free_user = free_user;
    return ds;
}

/* ---- built-in transforms ---- */
static const char *tf_name(dg_transform_kind k) {
    switch (k) {
    case DG_TF_NORMALIZE: return "normalize";
    case DG_TF_HWC_TO_CHW: return "hwc_to_chw";
    case DG_TF_GRAY_TO_RGB: return "gray_to_rgb";
    case DG_TF_RESIZE: return "resize";
    case DG_TF_CENTER_CROP: return "center_crop";
    case DG_TF_RANDOM_CROP: return "random_crop";
    case DG_TF_RANDOM_HFLIP: return "random_hflip";
    case DG_TF_SCALE: return "scale";
    }
    return "invalid";
}

static int tf_out_h(const dg_transform *t) { return t->size[0]; }
dg_transform dg_transform_default(dg_transform_kind kind) {
    return (dg_transform){ .kind = kind, .p = 0.5, .scale = 1.0 };
}

static int tf_out_w(const dg_transform *t) { return t->size[1] ? t->size[1] : t->size[0]; }

/* Checks what can be checked before any sample is seen. */
static int tf_validate(const dg_transform *t, int i) {
    switch (t->kind) {
    case DG_TF_NORMALIZE:
        DG_CHECK_INT(t->channels >= 0 && t->channels <= 4, "dataset_transform: transform %d (normalize): channels %d (0..4)", i, t->channels);
        for (int c = 0; c < (t->channels ? t->channels : 4); c++)
            DG_CHECK_INT(!t->channels || (t->std[c] != 0 && isfinite(t->std[c]) && isfinite(t->mean[c])),
                         "dataset_transform: transform %d (normalize): std[%d] = %g, mean[%d] = %g", i, c, t->std[c], c, t->mean[c]);
        return 0;
    case DG_TF_HWC_TO_CHW: case DG_TF_GRAY_TO_RGB: return 0;
    case DG_TF_RESIZE: case DG_TF_CENTER_CROP: case DG_TF_RANDOM_CROP:
        DG_CHECK_INT(t->size[0] > 0 && t->size[1] >= 0, "dataset_transform: transform %d (%s): size %d x %d", i,
                     tf_name(t->kind), t->size[0], t->size[1]);
        DG_CHECK_INT(t->kind != DG_TF_RANDOM_CROP || t->padding >= 0, "dataset_transform: transform %d (random_crop): padding %d",
                     i, t->padding);
        return 0;
    case DG_TF_RANDOM_HFLIP:
        DG_CHECK_INT(t->p >= 0 && t->p <= 1, "dataset_transform: transform %d (random_hflip): p = %g is outside [0, 1]", i, t->p);
        return 0;
    case DG_TF_SCALE:
        DG_CHECK_INT(isfinite(t->scale), "dataset_transform: transform %d (scale): scale = %g", i, t->scale);
        return 0;
    }
    DG_ERR(DG_EINVAL, "dataset_transform: transform %d: unknown kind %d", i, (int)t->kind);
    return DG_EINVAL;
}

/* y[c, i, j] = x[c, top + i, left + j], zero outside x (x, y contiguous [C, *, *]). */
static void crop_copy(const float *x, int64_t C, int64_t H, int64_t W, float *y, int64_t oh, int64_t ow,
                      int64_t top, int64_t left) {
    for (int64_t c = 0; c < C; c++)
        for (int64_t i = 0; i < oh; i++) {
            float *yr = y + (c * oh + i) * ow;
            int64_t si = top + i;
            if (si < 0 || si >= H) { memset(yr, 0, sizeof(float) * (size_t)ow); continue; }
            const float *xr = x + (c * H + si) * W;
            int64_t j0 = left < 0 ? -left : 0, j1 = W - left < ow ? W - left : ow;
            if (j1 < j0) j1 = j0;
            if (j0 > 0) memset(yr, 0, sizeof(float) * (size_t)(j0 < ow ? j0 : ow));
            if (j1 > j0) memcpy(yr + j0, xr + left + j0, sizeof(float) * (size_t)(j1 - j0));
            if (j1 < ow) memset(yr + j1, 0, sizeof(float) * (size_t)(ow - j1));
        }
}

/* Source index and weight along one axis: torch's upsample_bilinear2d, align_corners=False. */
static void bilinear_axis(int64_t in, int64_t out, int64_t *i0, int64_t *i1, float *l1) {
    float scale = (float)in / (float)out;
    for (int64_t d = 0; d < out; d++) {
        float src = scale * ((float)d + 0.5f) - 0.5f;
        if (src < 0) src = 0;
        int64_t i = (int64_t)floorf(src);
        if (i > in - 1) i = in - 1;
        float lam = src - (float)i;
        if (lam < 0) lam = 0;
        if (lam > 1) lam = 1;
        i0[d] = i;
        i1[d] = i < in - 1 ? i + 1 : i;
        l1[d] = lam;
    }
}

static int tf_apply(const dg_transform *t, int ti, dg_sample *s, uint64_t seed) {
    dg_tensor *x = s->t[0];
    char sh[96];
    dg_shape xs = dg_shape_of(x);
    if (dg_dtype_of(x) != DG_F32 || xs.ndim != 3) {
        DG_ERR(DG_EINVAL, "transform %d (%s): field 0 is %s %s, expected float32 %s", ti, tf_name(t->kind),
               dg_dtype_name(dg_dtype_of(x)), dg_shape_str(x, sh, sizeof sh), t->kind == DG_TF_HWC_TO_CHW ? "[H, W, C]" : "[C, H, W]");
        return DG_EINVAL;
    }
    int64_t A = xs.d[0], B = xs.d[1], Cc = xs.d[2];   /* C,H,W (or H,W,C) */
    /* A contiguous CPU view of x's values. */
    const float *xv;
    dg_tensor *tmp = NULL;
    if (dg_is_contiguous(x) && dg_device_of(x).type == DG_CPU) xv = dg_tensor_ptr(x);
    else {
        tmp = dg_data_cpu_tensor(xs.d, 3, DG_F32);
        if (!tmp) return DG_ENOMEM;
        int rc = dg_to_host(x, dg_tensor_ptr(tmp), (size_t)dg_numel(x) * sizeof(float));
        if (rc) { dg_tensor_free(tmp); return rc; }
        xv = dg_tensor_ptr(tmp);
    }
    int64_t C = A, H = B, W = Cc, oshape[3] = { C, H, W };
    uint64_t counter = 0;
    int64_t top = 0, left = 0;
    bool flip = false, identity = false;
    switch (t->kind) {
    case DG_TF_HWC_TO_CHW: C = Cc; H = A; W = B; oshape[0] = C; oshape[1] = H; oshape[2] = W; break;
    case DG_TF_GRAY_TO_RGB:
        if (C == 3) identity = true;
        else if (C != 1) {
            DG_ERR(DG_EINVAL, "transform %d (gray_to_rgb): field 0 is %s, expected [1, H, W] (or [3, H, W])", ti, dg_shape_str(x, sh, sizeof sh));
            dg_tensor_free(tmp);
            return DG_EINVAL;
        }
        oshape[0] = 3;
        break;
    case DG_TF_NORMALIZE:
        if ((t->channels == 0 && C > 4) || (t->channels > 1 && t->channels != C)) {
            DG_ERR(DG_EINVAL, "transform %d (normalize): field 0 is %s but %d mean/std values were given", ti,
                   dg_shape_str(x, sh, sizeof sh), t->channels ? t->channels : 4);
            dg_tensor_free(tmp);
            return DG_EINVAL;
        }
        for (int c = 0; c < (t->channels ? t->channels : C); c++)
            if (t->std[c] == 0) {
                DG_ERR(DG_EINVAL, "transform %d (normalize): std[%d] is 0", ti, c);
                dg_tensor_free(tmp);
                return DG_EINVAL;
            }
        break;
    case DG_TF_RESIZE: oshape[1] = tf_out_h(t); oshape[2] = tf_out_w(t); break;
    case DG_TF_CENTER_CROP: {
        int64_t oh = tf_out_h(t), ow = tf_out_w(t);
        /* torchvision: zero-pad a too-small side by (crop - size) // 2 in front, else
         * round((size - crop) / 2) with Python's round (half to even, as rint) */
        top = oh > H ? -((oh - H) / 2) : (int64_t)rint((double)(H - oh) / 2.0);
        left = ow > W ? -((ow - W) / 2) : (int64_t)rint((double)(W - ow) / 2.0);
        oshape[1] = oh; oshape[2] = ow;
        break;
    }
    case DG_TF_RANDOM_CROP: {
        int64_t oh = tf_out_h(t), ow = tf_out_w(t), p = t->padding;
        if (oh > H + 2 * p || ow > W + 2 * p) {
            DG_ERR(DG_EINVAL, "transform %d (random_crop): crop %lld x %lld is larger than the image %s padded by %lld", ti,
                   (long long)oh, (long long)ow, dg_shape_str(x, sh, sizeof sh), (long long)p);
            dg_tensor_free(tmp);
            return DG_EINVAL;
        }
        top = (int64_t)dg_data_uniform_upto(seed, &counter, (uint64_t)(H + 2 * p - oh)) - p;
        left = (int64_t)dg_data_uniform_upto(seed, &counter, (uint64_t)(W + 2 * p - ow)) - p;
        oshape[1] = oh; oshape[2] = ow;
        break;
    }
    case DG_TF_RANDOM_HFLIP:
        flip = dg_data_uniform01(seed, &counter) < t->p;   /* p 0: never, p 1: always */
        identity = !flip;
        break;
    case DG_TF_SCALE: break;
    }
    if (identity) { dg_tensor_free(tmp); return 0; }
    dg_tensor *y = dg_data_cpu_tensor(oshape, 3, DG_F32);
    if (!y) { dg_tensor_free(tmp); return DG_ENOMEM; }
    float *yv = dg_tensor_ptr(y);
    int64_t hw = H * W;
    switch (t->kind) {
    case DG_TF_NORMALIZE:
        for (int64_t c = 0; c < C; c++) {
            int k = t->channels == 1 ? 0 : (int)c;
            float m = (float)t->mean[k], sd = (float)t->std[k];
            for (int64_t i = 0; i < hw; i++) yv[c * hw + i] = (xv[c * hw + i] - m) / sd;
        }
        break;
    case DG_TF_HWC_TO_CHW:
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < W; j++)
                for (int64_t c = 0; c < C; c++) yv[c * hw + i * W + j] = xv[(i * W + j) * C + c];
        break;
    case DG_TF_GRAY_TO_RGB:
        for (int c = 0; c < 3; c++) memcpy(yv + c * hw, xv, sizeof(float) * (size_t)hw);
        break;
    case DG_TF_RESIZE: {
        int64_t oh = oshape[1], ow = oshape[2];
        int64_t *idx = malloc(sizeof(int64_t) * 2 * (size_t)(oh + ow));
        float *lam = malloc(sizeof(float) * (size_t)(oh + ow));
        if (!idx || !lam) {
            free(idx); free(lam); dg_tensor_free(y); dg_tensor_free(tmp);
            DG_ERR(DG_ENOMEM, "transform %d (resize): out of memory", ti);
            return DG_ENOMEM;
        }
        int64_t *h0 = idx, *h1 = idx + oh, *w0 = idx + 2 * oh, *w1 = idx + 2 * oh + ow;
        float *hl = lam, *wl = lam + oh;
        bilinear_axis(H, oh, h0, h1, hl);
        bilinear_axis(W, ow, w0, w1, wl);
        for (int64_t c = 0; c < C; c++) {
            const float *xc = xv + c * hw;
            float *yc = yv + c * oh * ow;
            for (int64_t i = 0; i < oh; i++) {
                const float *r0 = xc + h0[i] * W, *r1 = xc + h1[i] * W;
                float b1 = hl[i], b0 = 1.0f - b1;
                for (int64_t j = 0; j < ow; j++) {
                    float a1 = wl[j], a0 = 1.0f - a1;
                    yc[i * ow + j] = b0 * (a0 * r0[w0[j]] + a1 * r0[w1[j]]) + b1 * (a0 * r1[w0[j]] + a1 * r1[w1[j]]);
                }
            }
        }
        free(idx);
        free(lam);
        break;
    }
    case DG_TF_CENTER_CROP: case DG_TF_RANDOM_CROP:
        crop_copy(xv, C, H, W, yv, oshape[1], oshape[2], top, left);
        break;
    case DG_TF_RANDOM_HFLIP:
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H; i++) {
                const float *xr = xv + c * hw + i * W;
                float *yr = yv + c * hw + i * W;
                for (int64_t j = 0; j < W; j++) yr[j] = xr[W - 1 - j];
            }
        break;
    case DG_TF_SCALE: {
        float sc = (float)t->scale;
        for (int64_t i = 0, nx = dg_numel(x); i < nx; i++) yv[i] = xv[i] * sc;
        break;
    }
    }
    dg_tensor_free(tmp);
    dg_tensor_free(s->t[0]);
    s->t[0] = y;
    return 0;
}

typedef struct tf_ds { dg_dataset *base; int n; dg_transform *tf; } tf_ds;

static int64_t tf_len(void *self) { return dg_dataset_len(((tf_ds *)self)->base); }
static int tf_get(void *self, int64_t index, uint64_t seed, dg_sample *out) {
    tf_ds *d = self;
    int rc = dg_dataset_get(d->base, index, seed, out);
    if (rc) return rc;
    for (int i = 0; i < d->n; i++) {
        /* each transform draws from its own stream, derived from the sample seed */
        rc = tf_apply(&d->tf[i], i, out, dg_data_philox64(seed, 0x7466000000000000ULL + (uint64_t)i));
        if (rc) return rc;
    }
    return 0;
}
static void tf_free(void *self) {
    tf_ds *d = self;
    dg_dataset_free(d->base);
    free(d->tf);
    free(d);
}
static const dg_dataset_vtable tf_vt = { tf_len, tf_get, tf_free };

dg_dataset *dg_dataset_transform(dg_dataset *base, const dg_transform *tf, int n) {
    DG_CHECK_HANDLE(base, "dataset_transform: base is NULL");
    DG_CHECK(n >= 0 && (tf || n == 0), "dataset_transform('%s'): %s", dg_dataset_name(base), n < 0 ? "negative count" : "tf is NULL");
    for (int i = 0; i < n; i++)
        if (tf_validate(&tf[i], i)) return NULL;
    tf_ds *d = calloc(1, sizeof *d);
    dg_transform *copy = malloc(sizeof *copy * (size_t)(n ? n : 1));
    if (!d || !copy) { free(d); free(copy); DG_ERR(DG_ENOMEM, "dataset_transform: out of memory"); return NULL; }
    if (n) memcpy(copy, tf, sizeof *copy * (size_t)n);
    d->base = dg_dataset_ref(base);
    d->n = n;
    d->tf = copy;
    char name[128];
    snprintf(name, sizeof name, "transform(%.100s)", dg_dataset_name(base));
    dg_dataset *ds = dg_dataset_new(&tf_vt, d, name);
    if (!ds) tf_free(d);
    return ds;
}
