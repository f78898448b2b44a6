/* test/test_data.c — datasets, transforms, samplers (incl. Paddle's DistributedBatchSampler,
 * index for index) and the DataLoader: worker-count independence, error propagation from
 * worker threads, stopping mid-epoch, collate errors, scope adoption, the host_alloc hook, leaks. */
#include "test_util.h"
#include <pthread.h>
#include <unistd.h>

/* ---- a user dataset in C ----
 * Sample i: field 0 f32 [c, h, w] with values i*1000 + k + (seed % 1000) / 1000 (so the seed the
 * loader passes shows in the bytes), field 1 int64 0-d = i. Optional faults: fail_at (get fails
 * with a message), odd_at (one more row), delay_us (a slow source), temp (leaves a temporary). */
typedef struct toy { int64_t n, fail_at, odd_at; bool fail, odd; int delay_us; int c, h, w; bool temp; } toy;

static int64_t toy_len(void *self) { return ((toy *)self)->n; }
static int toy_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    toy *t = self;
    if (t->fail && i == t->fail_at) return dg_dataset_error("toy: record %lld is corrupt", (long long)i);
    if (t->delay_us) usleep((useconds_t)t->delay_us);
    if (t->temp) (void)dg_zeros(DG_SHAPE(16), DG_F32);   /* a temporary the caller's scope must free */
    int64_t h = t->odd && i == t->odd_at ? t->h + 1 : t->h;
    dg_tensor *img = dg_empty(DG_SHAPE(t->c, h, t->w), DG_F32);
    if (!img) return dg_last_status();
    float *p = dg_data(img);
    for (int64_t k = 0; k < dg_numel(img); k++) p[k] = (float)(i * 1000 + k) + (float)(seed % 1000) * 1e-3f;
    out->t[0] = img;
    out->t[1] = dg_scalar((double)i, DG_I64);
    out->n = 2;
    return 0;
}
static void toy_free(void *self) { free(self); }
static const dg_dataset_vtable toy_vt = { toy_len, toy_get, toy_free };

static dg_dataset *toy_new(toy cfg) {
    toy *t = malloc(sizeof *t);
    *t = cfg;
    if (!t->c) t->c = 1;
    if (!t->h) t->h = 8;
    if (!t->w) t->w = 8;
    dg_dataset *ds = dg_dataset_new(&toy_vt, t, "toy_ds");
    cr_assert(ds, "%s", dg_last_error());
    return ds;
}
#define TOY(...) toy_new((toy){ __VA_ARGS__ })

/* A dataset of one fixed f32 tensor (for transform values). */
typedef struct fixed { dg_shape shape; dg_dtype dt; float v[256]; } fixed;
static int64_t fixed_len(void *self) { return 1; }
static int fixed_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    fixed *f = self;
    if (f->dt == DG_F32) out->t[0] = dg_from_data(f->shape, DG_F32, f->v);
    else out->t[0] = dg_zeros(f->shape, f->dt);
    out->n = 1;
    return out->t[0] ? 0 : dg_last_status();
}
static const dg_dataset_vtable fixed_vt = { fixed_len, fixed_get, toy_free };

/* Runs transforms on one image given as values; returns the result (caller frees). */
static dg_tensor *run_tf(dg_shape shape, const float *v, const dg_transform *tf, int n, uint64_t seed) {
    fixed *f = calloc(1, sizeof *f);
    f->shape = shape;
    f->dt = DG_F32;
    int64_t numel = 1;
    for (int i = 0; i < shape.ndim; i++) numel *= shape.d[i];
    if (v) memcpy(f->v, v, sizeof(float) * (size_t)numel);
    else for (int64_t i = 0; i < numel; i++) f->v[i] = (float)i;
    dg_dataset *base = dg_dataset_new(&fixed_vt, f, "fixed");
    dg_dataset *ds = dg_dataset_transform(base, tf, n);
    dg_dataset_free(base);
    cr_assert(ds, "%s", dg_last_error());
    dg_sample s = {0};
    int rc = dg_dataset_get(ds, 0, seed, &s);
    dg_dataset_free(ds);
    cr_assert_eq(rc, 0, "%s", dg_last_error());
    cr_assert_eq(s.n, 1);
    cr_assert(dg_is_contiguous(s.t[0]));
    return s.t[0];
}

static void assert_values(const dg_tensor *t, dg_shape shape, const float *want, double tol, const char *what) {
    cr_assert_eq(dg_ndim(t), shape.ndim, "%s: ndim %d", what, dg_ndim(t));
    for (int i = 0; i < shape.ndim; i++) cr_assert_eq(dg_dim(t, i), shape.d[i], "%s: dim %d is %lld", what, i, (long long)dg_dim(t, i));
    const float *p = dg_data(t);
    for (int64_t i = 0; i < dg_numel(t); i++)
        cr_assert(fabs(p[i] - want[i]) <= tol, "%s: element %lld is %.6f, want %.6f", what, (long long)i, p[i], want[i]);
}

/* ---- samplers ---- */
static int64_t label_of(dg_dataset *ds, int64_t i) {
    dg_sample s;
    cr_assert_eq(dg_dataset_get(ds, i, 0, &s), 0, "%s", dg_last_error());
    int64_t v = (int64_t)dg_item(s.t[1]);
    dg_sample_clear(&s);
    cr_assert_eq(s.n, 0);
    return v;
}

Test(data, get_subset_random_split) {
    size_t live = dg_live_tensors();
    dg_dataset *base = TOY(.n = 20);
    cr_assert_eq(dg_dataset_len(base), 20);
    cr_assert_str_eq(dg_dataset_name(base), "toy_ds");
    cr_assert_eq(label_of(base, 13), 13);
    /* errors name the dataset and the index */
    dg_sample s;
    dg_clear_error();
    cr_assert_lt(dg_dataset_get(base, 20, 0, &s), 0);
    cr_assert(strstr(dg_last_error(), "toy_ds") && strstr(dg_last_error(), "index 20"), "%s", dg_last_error());
    cr_assert_eq(s.n, 0);

    int64_t idx[] = { 19, 0, 5, 5 };
    dg_dataset *sub = dg_dataset_subset(base, idx, 4);
    cr_assert(sub);
    cr_assert_eq(dg_dataset_len(sub), 4);
    for (int i = 0; i < 4; i++) cr_assert_eq(label_of(sub, i), idx[i]);
    int64_t bad[] = { 3, 20 };
    dg_clear_error();
    cr_assert_null(dg_dataset_subset(base, bad, 2));
    cr_assert(strstr(dg_last_error(), "20"), "%s", dg_last_error());

    dg_dataset *a, *b, *a2, *b2, *c, *d;
    cr_assert_eq(dg_dataset_random_split(base, 0.7, 11, &a, &b), 0);
    cr_assert_eq(dg_dataset_random_split(base, 0.7, 11, &a2, &b2), 0);
    cr_assert_eq(dg_dataset_random_split(base, 0.7, 12, &c, &d), 0);
    cr_assert_eq(dg_dataset_len(a), 14);
    cr_assert_eq(dg_dataset_len(b), 6);
    /* the base may go first: the subsets hold references */
    dg_dataset_free(base);
    int seen[20] = {0};
    bool same_as_other_seed = true, sequential = true;
    for (int64_t i = 0; i < 14; i++) {
        int64_t v = label_of(a, i);
        seen[v]++;
        cr_assert_eq(v, label_of(a2, i), "split is not deterministic");
        same_as_other_seed &= v == label_of(c, i);
        sequential &= v == i;
    }
    for (int64_t i = 0; i < 6; i++) { int64_t v = label_of(b, i); seen[v]++; cr_assert_eq(v, label_of(b2, i)); }
    for (int i = 0; i < 20; i++) cr_assert_eq(seen[i], 1, "index %d in %d parts", i, seen[i]);
    cr_assert(!same_as_other_seed && !sequential);
    dg_dataset *e, *f;
    cr_assert_lt(dg_dataset_random_split(sub, 1.5, 0, &e, &f), 0);
    cr_assert_eq(dg_dataset_random_split(sub, 0.0, 0, &e, &f), 0);
    cr_assert_eq(dg_dataset_len(e), 0);
    cr_assert_eq(dg_dataset_len(f), 4);
    dg_dataset *all[] = { sub, a, b, a2, b2, c, d, e, f };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) dg_dataset_free(all[i]);
    cr_assert_eq(dg_live_tensors(), live);
}

Test(data, get_error_names_dataset_and_index) {
    dg_dataset *base = TOY(.n = 10, .fail = true, .fail_at = 7);
    dg_dataset *sub = dg_dataset_subset(base, (int64_t[]){ 1, 7 }, 2);
    dg_sample s;
    dg_clear_error();
    cr_assert_eq(dg_dataset_get(base, 7, 0, &s), DG_EFORMAT);
    cr_assert(strstr(dg_last_error(), "dataset 'toy_ds' index 7: toy: record 7 is corrupt"), "%s", dg_last_error());
    dg_clear_error();
    /* through a subset the message keeps the base's name and its own index */
    cr_assert_lt(dg_dataset_get(sub, 1, 0, &s), 0);
    cr_assert(strstr(dg_last_error(), "dataset 'toy_ds' index 7"), "%s", dg_last_error());
    dg_dataset_free(sub);
    dg_dataset_free(base);
    cr_assert_null(dg_dataset_new(NULL, NULL, "x"));
}

static int add_label_to_image(dg_sample *s, uint64_t seed, void *user) {
    int *calls = user;
    __atomic_add_fetch(calls, 1, __ATOMIC_RELAXED);
    dg_tensor *y = dg_add_scalar(s->t[0], dg_item(s->t[1]));
    if (!y) return dg_last_status();
    dg_tensor_free(s->t[0]);
    s->t[0] = y;
    return 0;
}
static void free_counter(void *user) { *(int *)user = -100; }

Test(data, map_user_transform) {
    size_t live = dg_live_tensors();
    int calls = 0;
    dg_dataset *base = TOY(.n = 5);
    dg_dataset *m = dg_dataset_map(base, add_label_to_image, &calls, free_counter);
    dg_dataset_free(base);
    cr_assert_str_eq(dg_dataset_name(m), "map(toy_ds)");
    dg_sample s;
    cr_assert_eq(dg_dataset_get(m, 3, 0, &s), 0, "%s", dg_last_error());
    cr_assert_float_eq(((float *)dg_data(s.t[0]))[1], 3001.0f + 3.0f, 1e-3);
    dg_sample_clear(&s);
    cr_assert_eq(calls, 1);
    dg_dataset_free(m);
    cr_assert_eq(calls, -100, "free_user not called");
    cr_assert_eq(dg_live_tensors(), live);
}

Test(data, transform_values) {
    size_t live = dg_live_tensors();
    /* normalize per channel and with one broadcast value */
    float x2[] = { 1, 3, 5, 7, 2, 6, 10, 14 };
    dg_tensor *t = run_tf(DG_SHAPE(2, 2, 2), x2, &(dg_transform){ .kind = DG_TF_NORMALIZE, .mean = { 1, 2 }, .std = { 2, 4 } }, 1, 0);
    assert_values(t, DG_SHAPE(2, 2, 2), (float[]){ 0, 1, 2, 3, 0, 1, 2, 3 }, 1e-6, "normalize");
    dg_tensor_free(t);
    t = run_tf(DG_SHAPE(2, 2, 2), x2, &(dg_transform){ .kind = DG_TF_NORMALIZE, .channels = 1, .mean = { 1 }, .std = { 0.5 } }, 1, 0);
    assert_values(t, DG_SHAPE(2, 2, 2), (float[]){ 0, 4, 8, 12, 2, 10, 18, 26 }, 1e-6, "normalize, one value");
    dg_tensor_free(t);
    /* scale */
    t = run_tf(DG_SHAPE(1, 2, 2), (float[]){ 0, 255, 51, 102 }, &(dg_transform){ .kind = DG_TF_SCALE, .scale = 1.0 / 255 }, 1, 0);
    assert_values(t, DG_SHAPE(1, 2, 2), (float[]){ 0, 1, 0.2f, 0.4f }, 1e-6, "scale");
    dg_tensor_free(t);
    /* hwc -> chw: x[i][j][c] = 100 i + 10 j + c */
    float hwc[12];
    for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++) for (int c = 0; c < 2; c++) hwc[(i * 3 + j) * 2 + c] = 100 * i + 10 * j + c;
    t = run_tf(DG_SHAPE(2, 3, 2), hwc, &(dg_transform){ .kind = DG_TF_HWC_TO_CHW }, 1, 0);
    assert_values(t, DG_SHAPE(2, 2, 3), (float[]){ 0, 10, 20, 100, 110, 120, 1, 11, 21, 101, 111, 121 }, 0, "hwc_to_chw");
    dg_tensor_free(t);
    /* gray -> rgb */
    t = run_tf(DG_SHAPE(1, 2, 2), (float[]){ 1, 2, 3, 4 }, &(dg_transform){ .kind = DG_TF_GRAY_TO_RGB }, 1, 0);
    assert_values(t, DG_SHAPE(3, 2, 2), (float[]){ 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4 }, 0, "gray_to_rgb");
    dg_tensor_free(t);
    /* bilinear, align_corners=False: src = (dst + 0.5) * in / out - 0.5, clamped at 0, and the
     * far neighbour clamped at the edge. 2x2 -> 4x4: coordinates 0, .25, .75, 1 per axis. */
    t = run_tf(DG_SHAPE(1, 2, 2), (float[]){ 0, 1, 2, 3 }, &(dg_transform){ .kind = DG_TF_RESIZE, .size = { 4, 4 } }, 1, 0);
    assert_values(t, DG_SHAPE(1, 4, 4), (float[]){ 0, .25f, .75f, 1, .5f, .75f, 1.25f, 1.5f, 1.5f, 1.75f, 2.25f, 2.5f, 2, 2.25f, 2.75f, 3 },
                  1e-6, "resize 2x2 -> 4x4");
    dg_tensor_free(t);
    /* 4x4 -> 2x2 (arange): coordinates 0.5 and 2.5, value 4 r + c */
    t = run_tf(DG_SHAPE(1, 4, 4), NULL, &(dg_transform){ .kind = DG_TF_RESIZE, .size = { 2 } }, 1, 0);
    assert_values(t, DG_SHAPE(1, 2, 2), (float[]){ 2.5f, 4.5f, 10.5f, 12.5f }, 1e-5, "resize 4x4 -> 2x2");
    dg_tensor_free(t);
    /* 3x5 -> 2x3 (value 5 r + c): rows 0.25, 1.75; cols 1/3, 2, 11/3 */
    t = run_tf(DG_SHAPE(1, 3, 5), NULL, &(dg_transform){ .kind = DG_TF_RESIZE, .size = { 2, 3 } }, 1, 0);
    float rs[] = { 0.25f, 1.75f }, cs[] = { 1.0f / 3, 2, 11.0f / 3 }, want6[6];
    for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++) want6[i * 3 + j] = 5 * rs[i] + cs[j];
    assert_values(t, DG_SHAPE(1, 2, 3), want6, 1e-5, "resize 3x5 -> 2x3");
    dg_tensor_free(t);
    /* center crop 5x7 -> 2x4: offsets round(1.5) = 2 and round(1.5) = 2 (half to even) */
    t = run_tf(DG_SHAPE(1, 5, 7), NULL, &(dg_transform){ .kind = DG_TF_CENTER_CROP, .size = { 2, 4 } }, 1, 0);
    assert_values(t, DG_SHAPE(1, 2, 4), (float[]){ 16, 17, 18, 19, 23, 24, 25, 26 }, 0, "center_crop");
    dg_tensor_free(t);
    /* larger than the image: zero rows around (torchvision pads (7 - 5) // 2 = 1 on top) */
    t = run_tf(DG_SHAPE(1, 5, 7), NULL, &(dg_transform){ .kind = DG_TF_CENTER_CROP, .size = { 7, 3 } }, 1, 0);
    assert_values(t, DG_SHAPE(1, 7, 3), (float[]){ 0, 0, 0, 2, 3, 4, 9, 10, 11, 16, 17, 18, 23, 24, 25, 30, 31, 32, 0, 0, 0 }, 0,
                  "center_crop with padding");
    dg_tensor_free(t);

    /* random crop 4x4 of a 4x4 image padded by 1: a window of the padded image at one of 9
     * offsets, fixed by the seed; all 9 appear over 64 seeds */
    int hits[9] = {0};
    for (uint64_t seed = 0; seed < 64; seed++) {
        t = run_tf(DG_SHAPE(1, 4, 4), NULL, &(dg_transform){ .kind = DG_TF_RANDOM_CROP, .size = { 4 }, .padding = 1 }, 1, seed);
        dg_tensor *again = run_tf(DG_SHAPE(1, 4, 4), NULL, &(dg_transform){ .kind = DG_TF_RANDOM_CROP, .size = { 4 }, .padding = 1 }, 1, seed);
        cr_assert(memcmp(dg_data(t), dg_data(again), 16 * sizeof(float)) == 0, "random crop differs for one seed");
        const float *p = dg_data(t);
        int match = -1;
        for (int top = 0; top < 3; top++)
            for (int left = 0; left < 3; left++) {
                bool ok = true;
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 4; j++) {
                        int si = top + i - 1, sj = left + j - 1;
                        float want = si < 0 || si > 3 || sj < 0 || sj > 3 ? 0.0f : (float)(si * 4 + sj);
                        ok &= p[i * 4 + j] == want;
                    }
                if (ok) { cr_assert_eq(match, -1); match = top * 3 + left; }
            }
        cr_assert_neq(match, -1, "random crop is no window of the padded image");
        hits[match]++;
        dg_tensor_free(t);
        dg_tensor_free(again);
    }
    for (int k = 0; k < 9; k++) cr_assert_gt(hits[k], 0, "offset %d never drawn", k);

    /* flip: p = 1 always; p = 0 never; the default 0.5 gives both outcomes over 32 seeds */
    float img[] = { 1, 2, 3, 4, 5, 6 };
    t = run_tf(DG_SHAPE(1, 2, 3), img, &(dg_transform){ .kind = DG_TF_RANDOM_HFLIP, .p = 1 }, 1, 3);
    assert_values(t, DG_SHAPE(1, 2, 3), (float[]){ 3, 2, 1, 6, 5, 4 }, 0, "hflip");
    dg_tensor_free(t);
    int flipped = 0, flipped_p0 = 0;
    dg_transform half = dg_transform_default(DG_TF_RANDOM_HFLIP);
    cr_assert_eq(half.p, 0.5);
    for (uint64_t seed = 0; seed < 32; seed++) {
        t = run_tf(DG_SHAPE(1, 2, 3), img, &half, 1, seed);
        flipped += ((float *)dg_data(t))[0] == 3;
        dg_tensor_free(t);
        t = run_tf(DG_SHAPE(1, 2, 3), img, &(dg_transform){ .kind = DG_TF_RANDOM_HFLIP, .p = 0 }, 1, seed);
        flipped_p0 += ((float *)dg_data(t))[0] == 3;
        dg_tensor_free(t);
    }
    cr_assert(flipped > 4 && flipped < 28, "flipped %d of 32", flipped);
    cr_assert_eq(flipped_p0, 0, "p = 0 flipped %d of 32", flipped_p0);

    /* a chain: gray -> rgb, resize, center crop, normalize */
    dg_transform chain[] = {
        { .kind = DG_TF_GRAY_TO_RGB }, { .kind = DG_TF_RESIZE, .size = { 8, 8 } }, { .kind = DG_TF_CENTER_CROP, .size = { 6 } },
        { .kind = DG_TF_NORMALIZE, .mean = { 0.5, 0.5, 0.5 }, .std = { 0.25, 0.25, 0.25 } },
    };
    t = run_tf(DG_SHAPE(1, 4, 4), NULL, chain, 4, 0);
    cr_assert_eq(dg_dim(t, 0), 3);
    cr_assert_eq(dg_dim(t, 1), 6);
    dg_tensor_free(t);

    /* bad parameters at creation; bad input at get, naming the dataset and index */
    dg_dataset *base = TOY(.n = 3);
    cr_assert_null(dg_dataset_transform(base, &(dg_transform){ .kind = DG_TF_RESIZE }, 1));
    cr_assert_null(dg_dataset_transform(base, &(dg_transform){ .kind = DG_TF_RANDOM_HFLIP, .p = 2 }, 1));
    cr_assert_null(dg_dataset_transform(base, &(dg_transform){ .kind = DG_TF_NORMALIZE, .channels = 1, .std = { 0 } }, 1));
    cr_assert_null(dg_dataset_transform(base, &(dg_transform){ .kind = 99 }, 1));
    dg_dataset *tf = dg_dataset_transform(base, &(dg_transform){ .kind = DG_TF_GRAY_TO_RGB }, 1);
    cr_assert(tf);
    dg_dataset_free(base);
    dg_sample s;
    cr_assert_eq(dg_dataset_get(tf, 2, 0, &s), 0, "%s", dg_last_error());
    cr_assert_eq(dg_dim(s.t[0], 0), 3);
    cr_assert_eq(dg_item(s.t[1]), 2);   /* other fields pass through */
    dg_sample_clear(&s);
    dg_dataset_free(tf);
    fixed *f = calloc(1, sizeof *f);
    f->shape = DG_SHAPE(28, 28);
    f->dt = DG_I64;
    base = dg_dataset_new(&fixed_vt, f, "ints");
    tf = dg_dataset_transform(base, &(dg_transform){ .kind = DG_TF_SCALE, .scale = 2 }, 1);
    dg_dataset_free(base);
    dg_clear_error();
    cr_assert_lt(dg_dataset_get(tf, 0, 0, &s), 0);
    cr_assert(strstr(dg_last_error(), "dataset 'transform(ints)' index 0") && strstr(dg_last_error(), "int64 [28, 28]"), "%s", dg_last_error());
    dg_dataset_free(tf);
    cr_assert_eq(dg_live_tensors(), live);
}

Test(data, collate_public) {
    dg_scope *sc = dg_scope_begin();
    dg_sample s[2] = { { 2, { dg_ones(DG_SHAPE(2, 3), DG_F32), dg_scalar(4, DG_I64) } },
                       { 2, { dg_zeros(DG_SHAPE(2, 3), DG_F32), dg_scalar(5, DG_I64) } } };
    dg_sample b;
    cr_assert_eq(dg_collate(s, 2, &b), 0, "%s", dg_last_error());
    cr_assert_eq(b.n, 2);
    cr_assert_eq(dg_ndim(b.t[0]), 3);
    cr_assert_eq(dg_dim(b.t[0], 0), 2);
    cr_assert_eq(dg_dim(b.t[1], 0), 2);
    cr_assert_eq(dg_get(b.t[1], (int64_t[]){ 1 }), 5);
    cr_assert_eq(dg_get(b.t[0], (int64_t[]){ 1, 1, 2 }), 0);
    cr_assert_eq(dg_get(b.t[0], (int64_t[]){ 0, 1, 2 }), 1);
    s[1].t[0] = dg_transpose(dg_zeros(DG_SHAPE(3, 2), DG_F32), 0, 1);   /* a strided view stacks too */
    cr_assert_eq(dg_collate(s, 2, &b), 0, "%s", dg_last_error());
    s[1].t[0] = dg_zeros(DG_SHAPE(3, 2), DG_F32);
    dg_clear_error();
    cr_assert_lt(dg_collate(s, 2, &b), 0);
    cr_assert(strstr(dg_last_error(), "[3, 2]") && strstr(dg_last_error(), "[2, 3]"), "%s", dg_last_error());
    dg_scope_end(sc);
}

/* ---- the DataLoader ---- */
typedef struct buf { char *p; size_t n, cap; } buf;
static void buf_add(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) { b->cap = (b->n + n) * 2; b->p = realloc(b->p, b->cap); }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void buf_add_batch(buf *b, const dg_sample *s) {
    for (int f = 0; f < s->n; f++) {
        int64_t shp[DG_MAX_DIMS + 1] = { dg_ndim(s->t[f]) };
        for (int d = 0; d < dg_ndim(s->t[f]); d++) shp[d + 1] = dg_dim(s->t[f], d);
        buf_add(b, shp, sizeof shp);
        buf_add(b, dg_data(s->t[f]), (size_t)dg_numel(s->t[f]) * dg_dtype_size(dg_dtype_of(s->t[f])));
    }
}

/* All batches of epochs 0 and 1 as bytes. */
static buf run_epochs(dg_dataset *ds, dg_dataloader_params p, int epochs) {
    buf out = {0};
    dg_dataloader *dl = dg_dataloader_new(ds, p);
    cr_assert(dl, "%s", dg_last_error());
    for (int e = 0; e < epochs; e++) {
        cr_assert_eq(dg_dataloader_start_epoch(dl, e), 0, "%s", dg_last_error());
        dg_sample b;
        int rc, n = 0;
        while ((rc = dg_dataloader_next(dl, &b)) == 1) {
            buf_add_batch(&out, &b);
            dg_sample_clear(&b);
            n++;
        }
        cr_assert_eq(rc, 0, "%s", dg_last_error());
        cr_assert_eq(n, dg_dataloader_num_batches(dl));
    }
    dg_dataloader_free(dl);
    return out;
}

Test(dataloader, workers_give_identical_batches, .timeout = 120) {
    size_t live = dg_live_tensors();
    dg_dataset *base = TOY(.n = 23, .c = 1, .h = 8, .w = 8, .temp = true);
    dg_transform tf[] = {
        { .kind = DG_TF_RANDOM_CROP, .size = { 6, 6 }, .padding = 2 },
        { .kind = DG_TF_RANDOM_HFLIP, .p = 0.5 },
        { .kind = DG_TF_GRAY_TO_RGB },
        { .kind = DG_TF_RESIZE, .size = { 5, 7 } },
        { .kind = DG_TF_NORMALIZE, .channels = 1, .mean = { 100 }, .std = { 7 } },
    };
    dg_dataset *ds = dg_dataset_transform(base, tf, 5);
    dg_dataset_free(base);
    dg_dataloader_params p = dg_dataloader_default_params();
    p.batch_size = 5;
    p.shuffle = true;
    p.seed = 42;
    buf ref = run_epochs(ds, p, 2);
    cr_assert_gt(ref.n, 0);
    /* pin_memory changes where batches live, never what they hold */
    p.pin_memory = true;
    buf pinned = run_epochs(ds, p, 2);
    cr_assert(pinned.n == ref.n && memcmp(pinned.p, ref.p, ref.n) == 0, "pin_memory changed the batches");
    free(pinned.p);
    p.pin_memory = false;
    for (int w = 1; w <= 3; w++) {
        p.num_workers = w;
        p.pin_memory = w == 2;
        p.prefetch_factor = w == 3 ? 1 : 2;   /* the smallest queue, and the default */
        buf got = run_epochs(ds, p, 2);
        cr_assert_eq(got.n, ref.n, "%d workers: %zu bytes, 0 workers: %zu", w, got.n, ref.n);
        cr_assert(memcmp(got.p, ref.p, ref.n) == 0, "%d workers give other batches than 0 workers", w);
        free(got.p);
    }
    /* the two epochs differ (shuffle and random transforms), the first half is epoch 0 */
    buf one = run_epochs(ds, p, 1);
    cr_assert_eq(one.n * 2, ref.n);
    cr_assert(memcmp(ref.p, ref.p + one.n, one.n) != 0, "epoch 1 repeats epoch 0");
    free(one.p);
    free(ref.p);

    /* each row is dg_dataset_get(index, dg_sample_seed(seed, epoch, index)) */
    dg_scope *sc = dg_scope_begin();   /* the toy's temporaries, made on this thread */
    p.num_workers = 2;
    dg_dataloader *dl = dg_dataloader_new(ds, p);
    cr_assert_eq(dg_dataloader_start_epoch(dl, 1), 0);
    dg_sample b;
    cr_assert_eq(dg_dataloader_next(dl, &b), 1, "%s", dg_last_error());
    for (int64_t k = 0; k < dg_dim(b.t[0], 0); k++) {
        int64_t idx = (int64_t)dg_get(b.t[1], (int64_t[]){ k });
        dg_sample one_s;
        cr_assert_eq(dg_dataset_get(ds, idx, dg_sample_seed(42, 1, idx), &one_s), 0);
        size_t bytes = (size_t)dg_numel(one_s.t[0]) * sizeof(float);
        cr_assert(memcmp((char *)dg_data(b.t[0]) + k * bytes, dg_data(one_s.t[0]), bytes) == 0, "row %lld", (long long)k);
        dg_sample_clear(&one_s);
    }
    dg_sample_clear(&b);
    dg_dataloader_free(dl);
    dg_scope_end(sc);
    dg_dataset_free(ds);
    cr_assert_eq(dg_live_tensors(), live, "%zu tensors leaked", dg_live_tensors() - live);
}

/* A resume in the middle of an epoch: start_epoch_at(e, k) hands out exactly the batches k..
 * of start_epoch(e), random transforms included, with 0 and with 2 workers; a position past the
 * epoch's end is refused naming it. */
Test(dataloader, start_epoch_at_continues_an_epoch_byte_for_byte, .timeout = 120) {
    size_t live = dg_live_tensors();
    dg_dataset *base = TOY(.n = 23, .c = 1, .h = 8, .w = 8, .temp = true);
    dg_transform tf[] = { { .kind = DG_TF_RANDOM_CROP, .size = { 6, 6 }, .padding = 2 }, { .kind = DG_TF_RANDOM_HFLIP, .p = 0.5 } };
    dg_dataset *ds = dg_dataset_transform(base, tf, 2);
    dg_dataset_free(base);
    dg_dataloader_params p = dg_dataloader_default_params();
    p.batch_size = 4;
    p.shuffle = true;
    p.seed = 9;
    buf whole = run_epochs(ds, p, 2);               /* epochs 0 and 1 */
    buf first = run_epochs(ds, p, 1);               /* epoch 0 alone: where epoch 1 starts in `whole` */
    for (int w = 0; w <= 2; w += 2) {
        p.num_workers = w;
        dg_dataloader *dl = dg_dataloader_new(ds, p);
        cr_assert(dl, "%s", dg_last_error());
        for (int64_t k = 0; k <= 6; k += 3) {       /* 6 batches an epoch: from the start, the middle, the end */
            cr_assert_eq(dg_dataloader_start_epoch_at(dl, 1, k), 0, "%s", dg_last_error());
            buf got = { 0 };
            dg_sample b;
            int rc, n = 0;
            while ((rc = dg_dataloader_next(dl, &b)) == 1) { buf_add_batch(&got, &b); dg_sample_clear(&b); n++; }
            cr_assert_eq(rc, 0, "%s", dg_last_error());
            cr_assert_eq(n, 6 - k, "%d workers, from batch %lld: %d batches", w, (long long)k, n);
            size_t rest = whole.n - first.n;        /* epoch 1's bytes */
            size_t skip = k == 0 ? 0 : k == 3 ? rest - got.n : rest;
            cr_assert(got.n == rest - skip && (got.n == 0 || memcmp(got.p, whole.p + first.n + skip, got.n) == 0),
                      "%d workers: epoch 1 from batch %lld differs from the uninterrupted epoch", w, (long long)k);
            free(got.p);
        }
        cr_assert_eq(dg_dataloader_start_epoch_at(dl, 1, 7), DG_EINVAL);
        cr_assert(strstr(dg_last_error(), "batch 7 of epoch 1") && strstr(dg_last_error(), "6 batches"), "%s", dg_last_error());
        cr_assert_eq(dg_dataloader_start_epoch_at(dl, 1, -1), DG_EINVAL);
        dg_dataloader_free(dl);
    }
    free(whole.p);
    free(first.p);
    dg_dataset_free(ds);
    cr_assert_eq(dg_live_tensors(), live, "%zu tensors leaked", dg_live_tensors() - live);
}

static void check_error_at_7(int workers) {
    size_t live = dg_live_tensors();
    dg_dataset *ds = TOY(.n = 12, .fail = true, .fail_at = 7);
    dg_dataloader_params dlp = dg_dataloader_default_params();
    dlp.batch_size = 3;
    dlp.num_workers = workers;
    dg_dataloader *dl = dg_dataloader_new(ds, dlp);
    dg_dataset_free(ds);
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(dg_dataloader_start_epoch(dl, round), 0);
        dg_sample b;
        for (int k = 0; k < 2; k++) {   /* batches [0 1 2] and [3 4 5] arrive */
            cr_assert_eq(dg_dataloader_next(dl, &b), 1, "%d workers, batch %d: %s", workers, k, dg_last_error());
            cr_assert_eq(dg_get(b.t[1], (int64_t[]){ 0 }), 3 * k);
            dg_sample_clear(&b);
        }
        int rc = dg_dataloader_next(dl, &b);   /* [6 7 8] fails */
        cr_assert_eq(rc, DG_EFORMAT, "%d workers: rc %d", workers, rc);
        cr_assert_eq(b.n, 0);
        const char *msg = dg_last_error();
        cr_assert(strstr(msg, "batch 2") && strstr(msg, "dataset 'toy_ds' index 7") && strstr(msg, "record 7 is corrupt"),
                  "%d workers: %s", workers, msg);
        cr_assert_eq(dg_dataloader_next(dl, &b), DG_ESTATE, "the epoch goes on after an error");
    }
    dg_dataloader_free(dl);
    cr_assert_eq(dg_live_tensors(), live);
}
Test(dataloader, worker_error_reaches_caller_0_workers, .timeout = 60) { check_error_at_7(0); }
Test(dataloader, worker_error_reaches_caller_2_workers, .timeout = 60) { check_error_at_7(2); }

Test(dataloader, stop_mid_epoch_restart_and_free, .timeout = 120) {
    size_t live = dg_live_tensors();
    dg_dataset *ds = TOY(.n = 40, .delay_us = 2000);
    for (int workers = 0; workers <= 2; workers += 2) {
        dg_dataloader_params dlp2 = dg_dataloader_default_params();
        dlp2.batch_size = 2;
        dlp2.num_workers = workers;
        dlp2.prefetch_factor = 2;   /* 4 batches ahead with 2 workers */
        dg_dataloader *dl = dg_dataloader_new(ds, dlp2);
        cr_assert_eq(dg_dataloader_num_batches(dl), 20);
        dg_sample b;
        for (int k = 0; k < 3; k++) { cr_assert_eq(dg_dataloader_next(dl, &b), 1); dg_sample_clear(&b); }   /* epoch 0 implicitly */
        /* restart mid-epoch: a whole epoch in order */
        cr_assert_eq(dg_dataloader_start_epoch(dl, 1), 0);
        int n = 0, rc;
        while ((rc = dg_dataloader_next(dl, &b)) == 1) {
            cr_assert_eq(dg_get(b.t[1], (int64_t[]){ 0 }), 2 * n, "batch %d out of order", n);
            cr_assert_eq(dg_get(b.t[1], (int64_t[]){ 1 }), 2 * n + 1);
            dg_sample_clear(&b);
            n++;
        }
        cr_assert_eq(rc, 0);
        cr_assert_eq(n, 20);
        cr_assert_eq(dg_dataloader_next(dl, &b), 0, "past the end stays at the end");
        /* restart immediately twice, take one, then free mid-epoch */
        cr_assert_eq(dg_dataloader_start_epoch(dl, 2), 0);
        cr_assert_eq(dg_dataloader_start_epoch(dl, 3), 0);
        cr_assert_eq(dg_dataloader_next(dl, &b), 1);
        dg_sample_clear(&b);
        dg_dataloader_free(dl);
    }
    /* free right after start, with batches in flight */
    dg_dataloader_params dlp3 = dg_dataloader_default_params();
    dlp3.batch_size = 4;
    dlp3.num_workers = 4;
    dg_dataloader *dl = dg_dataloader_new(ds, dlp3);
    cr_assert_eq(dg_dataloader_start_epoch(dl, 0), 0);
    dg_dataloader_free(dl);
    dg_dataset_free(ds);
    cr_assert_eq(dg_live_tensors(), live);
}

Test(dataloader, collate_mismatch_is_an_error, .timeout = 60) {
    dg_dataset *ds = TOY(.n = 9, .odd = true, .odd_at = 4);
    for (int workers = 0; workers <= 2; workers += 2) {
        dg_dataloader_params dlp4 = dg_dataloader_default_params();
        dlp4.batch_size = 3;
        dlp4.num_workers = workers;
        dg_dataloader *dl = dg_dataloader_new(ds, dlp4);
        dg_sample b;
        cr_assert_eq(dg_dataloader_next(dl, &b), 1);
        dg_sample_clear(&b);
        cr_assert_lt(dg_dataloader_next(dl, &b), 0);
        const char *msg = dg_last_error();
        cr_assert(strstr(msg, "index 4") && strstr(msg, "[1, 9, 8]") && strstr(msg, "index 3") && strstr(msg, "[1, 8, 8]"),
                  "%d workers: %s", workers, msg);
        dg_dataloader_free(dl);
    }
    dg_dataset_free(ds);
}

Test(dataloader, batch_belongs_to_open_scope, .timeout = 60) {
    size_t live = dg_live_tensors();
    dg_dataset *ds = TOY(.n = 8, .temp = true);
    for (int workers = 0; workers <= 1; workers++) {
        dg_dataloader_params dlp5 = dg_dataloader_default_params();
        dlp5.batch_size = 4;
        dlp5.num_workers = workers;
        dg_dataloader *dl = dg_dataloader_new(ds, dlp5);
        dg_sample b;
        for (int k = 0; k < 2; k++) {
            dg_scope *s = dg_scope_begin();
            cr_assert_eq(dg_dataloader_next(dl, &b), 1, "%s", dg_last_error());
            cr_assert_eq(dg_dim(b.t[0], 0), 4);
            dg_tensor *sum = dg_sum_all(b.t[0]);   /* an op on the batch, in the same scope */
            cr_assert(sum);
            dg_scope_end(s);   /* frees the batch */
            /* (with a worker, the next batch may already be waiting in the queue) */
            if (workers == 0) cr_assert_eq(dg_live_tensors(), live, "the batch outlived its scope");
        }
        /* the epoch is over: nothing in flight, nothing left */
        cr_assert_eq(dg_live_tensors(), live, "%d workers: %zu tensors left", workers, dg_live_tensors() - live);
        cr_assert_eq(dg_dataloader_next(dl, &b), 0);
        dg_dataloader_free(dl);
    }
    dg_dataset_free(ds);
    cr_assert_eq(dg_live_tensors(), live);
}

typedef struct counting { int allocs, frees; size_t bytes; } counting;
static void *count_alloc(size_t n, void *user) {
    counting *c = user;
    __atomic_add_fetch(&c->allocs, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&c->bytes, n, __ATOMIC_RELAXED);
    return malloc(n);
}
static void count_free(void *p, void *user) {
    counting *c = user;
    __atomic_add_fetch(&c->frees, 1, __ATOMIC_RELAXED);
    free(p);
}

Test(dataloader, host_alloc_hook_holds_the_batch, .timeout = 60) {
    size_t live = dg_live_tensors();
    counting c = {0};
    dg_dataset *ds = TOY(.n = 10);
    dg_dataloader_params dlp6 = dg_dataloader_default_params();
    dlp6.batch_size = 4;
    dlp6.num_workers = 2;
    dlp6.host_alloc = count_alloc;
    dlp6.host_free = count_free;
    dlp6.host_user = &c;
    dg_dataloader *dl = dg_dataloader_new(ds, dlp6);
    dg_dataset_free(ds);
    dg_sample b;
    int n = 0;
    dg_tensor *kept = NULL;
    dg_scope *sc;
    while ((sc = dg_scope_begin()) && dg_dataloader_next(dl, &b) == 1) {
        cr_assert_eq(dg_get(b.t[1], (int64_t[]){ 0 }), 4 * n);
        /* value i*1000 + k plus the seed's fraction */
        cr_assert_eq(floor(dg_get(b.t[0], (int64_t[]){ 0, 0, 0, 1 })), 4 * n * 1000 + 1, "batch %d", n);
        cr_assert_eq((uintptr_t)dg_data(b.t[0]) % 64, 0, "hooked data is not 64-byte aligned");
        /* ops read the hooked tensors like any CPU tensor */
        dg_tensor *s = dg_sum_all(dg_cast(b.t[1], DG_F32));
        cr_assert_eq(dg_item(s), 4 * n + (4 * n + 1) + (n < 2 ? (4 * n + 2) + (4 * n + 3) : 0), "batch %d: sum %g", n, dg_item(s));
        dg_tensor *m = dg_mul_scalar(b.t[0], 2.0);
        cr_assert_eq(dg_get(m, (int64_t[]){ 0, 0, 0, 1 }), 2 * dg_get(b.t[0], (int64_t[]){ 0, 0, 0, 1 }));
        if (n == 0) kept = dg_keep(b.t[0]);   /* keep one past the loader */
        dg_scope_end(sc);
        n++;
    }
    dg_scope_end(sc);
    cr_assert_eq(n, 3);
    dg_dataloader_free(dl);
    cr_assert_eq(c.allocs, 6, "host_alloc called %d times, want 2 fields x 3 batches", c.allocs);
    cr_assert_eq(c.frees, 5);
    cr_assert_eq(floor(dg_get(kept, (int64_t[]){ 3, 0, 7, 7 })), 3 * 1000 + 63);
    dg_tensor_free(kept);
    cr_assert_eq(c.frees, 6);
    cr_assert_eq(dg_live_tensors(), live);
    /* one hook without the other */
    ds = TOY(.n = 10);
    dg_dataloader_params dlp7 = dg_dataloader_default_params();
    dlp7.host_alloc = count_alloc;
    cr_assert_null(dg_dataloader_new(ds, dlp7));
    dg_dataset_free(ds);
}

Test(dataloader, distributed_sampler_drives_the_loader, .timeout = 60) {
    dg_dataset *ds = TOY(.n = 10);
    dg_batch_sampler *s = dist_sampler(10, 2, 3, 2, true, false, 0);
    dg_dataloader_params dlp8 = dg_dataloader_default_params();
    dlp8.sampler = s;
    dlp8.num_workers = 2;
    dg_dataloader *dl = dg_dataloader_new(ds, dlp8);
    cr_assert(dl, "%s", dg_last_error());
    cr_assert_eq(dg_dataloader_num_batches(dl), 2);
    int64_t want[2][4] = { { 2, 8, 0, 5 }, { 1, 6, 8, 5 } };   /* rank 2, epochs 0 and 1 (Paddle) */
    for (int e = 0; e < 2; e++) {
        cr_assert_eq(dg_dataloader_start_epoch(dl, e), 0);
        dg_sample b;
        for (int k = 0; k < 2; k++) {
            cr_assert_eq(dg_dataloader_next(dl, &b), 1);
            cr_assert_eq(dg_get(b.t[1], (int64_t[]){ 0 }), want[e][2 * k]);
            cr_assert_eq(dg_get(b.t[1], (int64_t[]){ 1 }), want[e][2 * k + 1]);
            dg_sample_clear(&b);
        }
        cr_assert_eq(dg_dataloader_next(dl, &b), 0);
    }
    dg_dataloader_free(dl);
    /* a sampler made for another length is refused */
    dg_batch_sampler *wrong = dist_sampler(11, 2, 3, 2, true, false, 0);
    dg_dataloader_params dlp9 = dg_dataloader_default_params();
    dlp9.sampler = wrong;
    cr_assert_null(dg_dataloader_new(ds, dlp9));
    dg_batch_sampler_free(wrong);
    dg_batch_sampler_free(s);
    dg_dataloader_params dlp10 = dg_dataloader_default_params();
    dlp10.num_workers = -1;
    cr_assert_null(dg_dataloader_new(ds, dlp10));
    cr_assert_null(dg_dataloader_new(NULL, dg_dataloader_default_params()));
    dg_dataset_free(ds);
}
