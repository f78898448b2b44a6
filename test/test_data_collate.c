/* test/test_data_collate.c — variable-length samples: dg_collate_pad (torch's pad_sequence with
 * batch_first plus a lengths field) on token sequences and on [L, 2] features, its errors
 * (dims after the first differ, dtypes differ, a 0-d field, too many fields), and the
 * DataLoader's collate hook: dg_collate_pad_hook with 0 and 2 workers (the same batches), and
 * a user hook that fails (its message reaches dg_dataloader_next) or hands back a sample's own
 * tensor. */
#include "test_util.h"

/* Sample i: tokens int64 [len(i)] = 100 i + 1, 100 i + 2, ...; label int64 0-d = i. */
static int64_t seq_len_of(int64_t i) { return 1 + (i * 7) % 5; }
static int64_t seq_len(void *self) { return 10; }
static int seq_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    int64_t L = seq_len_of(i), v[8];
    for (int64_t k = 0; k < L; k++) v[k] = 100 * i + k + 1;
    out->t[0] = dg_from_data(DG_SHAPE(L), DG_I64, v);
    out->t[1] = dg_scalar((double)i, DG_I64);
    out->n = 2;
    return out->t[0] && out->t[1] ? 0 : dg_last_status();
}
static const dg_dataset_vtable seq_vt = { seq_len, seq_get, NULL };

static dg_sample seq_sample(int64_t i) {
    dg_sample s = { 0 };
    cr_assert_eq(seq_get(NULL, i, 0, &s), 0, "%s", dg_last_error());
    return s;
}

/* The padded batch of samples idx[0..n) with pad -1. */
static void check_padded(const dg_sample *b, const int64_t *idx, int n) {
    cr_assert_eq(b->n, 3, "tokens, labels, lengths: %d fields", b->n);
    int64_t maxlen = 0;
    for (int k = 0; k < n; k++) maxlen = seq_len_of(idx[k]) > maxlen ? seq_len_of(idx[k]) : maxlen;
    cr_assert_eq(dg_ndim(b->t[0]), 2);
    cr_assert_eq(dg_dim(b->t[0], 0), n);
    cr_assert_eq(dg_dim(b->t[0], 1), maxlen);
    cr_assert_eq(dg_dtype_of(b->t[2]), DG_I64);
    int64_t tok[64], lab[8], len[8];
    cr_assert_eq(dg_to_host(b->t[0], tok, sizeof(int64_t) * (size_t)(n * maxlen)), 0);
    cr_assert_eq(dg_to_host(b->t[1], lab, sizeof(int64_t) * (size_t)n), 0);
    cr_assert_eq(dg_to_host(b->t[2], len, sizeof(int64_t) * (size_t)n), 0);
    for (int k = 0; k < n; k++) {
        cr_assert_eq(lab[k], idx[k]);
        cr_assert_eq(len[k], seq_len_of(idx[k]), "sample %d: length %lld", k, (long long)len[k]);
        for (int64_t j = 0; j < maxlen; j++) {
            int64_t want = j < len[k] ? 100 * idx[k] + j + 1 : -1;
            cr_assert_eq(tok[k * maxlen + j], want, "sample %d position %lld: %lld, want %lld", k, (long long)j,
                         (long long)tok[k * maxlen + j], (long long)want);
        }
    }
}

Test(data_collate, pad_token_sequences) {
    dg_scope *sc = dg_scope_begin();
    int64_t idx[3] = { 0, 1, 3 };   /* lengths 1, 3, 2 */
    dg_sample s[3] = { seq_sample(0), seq_sample(1), seq_sample(3) }, b;
    cr_assert_eq(dg_collate_pad(s, 3, -1, &b), 0, "%s", dg_last_error());
    check_padded(&b, idx, 3);
    dg_scope_end(sc);
}

Test(data_collate, pad_float_features) {
    dg_scope *sc = dg_scope_begin();
    float a[6] = { 1, 2, 3, 4, 5, 6 }, c[2] = { 7, 8 };
    dg_sample s[2] = { { 1, { dg_from_data(DG_SHAPE(3, 2), DG_F32, a) } }, { 1, { dg_from_data(DG_SHAPE(1, 2), DG_F32, c) } } };
    dg_sample b;
    cr_assert_eq(dg_collate_pad(s, 2, 0.5, &b), 0, "%s", dg_last_error());
    cr_assert_eq(b.n, 2);
    cr_assert_eq(dg_ndim(b.t[0]), 3);
    cr_assert(dg_dim(b.t[0], 0) == 2 && dg_dim(b.t[0], 1) == 3 && dg_dim(b.t[0], 2) == 2);
    float got[12], want[12] = { 1, 2, 3, 4, 5, 6, 7, 8, 0.5f, 0.5f, 0.5f, 0.5f };
    dg_to_host(b.t[0], got, sizeof got);
    cr_assert(memcmp(got, want, sizeof got) == 0);
    int64_t len[2];
    dg_to_host(b.t[1], len, sizeof len);
    cr_assert(len[0] == 3 && len[1] == 1);
    dg_scope_end(sc);
}

Test(data_collate, pad_bad_input_names_the_sample) {
    dg_scope *sc = dg_scope_begin();
    dg_sample b;
    dg_sample s[3] = { { 1, { dg_zeros(DG_SHAPE(4, 3), DG_F32) } }, { 1, { dg_zeros(DG_SHAPE(2, 3), DG_F32) } },
                       { 1, { dg_zeros(DG_SHAPE(5, 2), DG_F32) } } };
    cr_assert_lt(dg_collate_pad(s, 3, 0, &b), 0);
    expect_error_contains("dims", "sample 2 field 0 is [5, 2]", "sample 0 is [4, 3]");
    s[2].t[0] = dg_zeros(DG_SHAPE(5, 3), DG_I64);
    cr_assert_lt(dg_collate_pad(s, 3, 0, &b), 0);
    expect_error_contains("dtype", "sample 2 field 0 is int64", "float32");
    dg_sample z[1] = { { 1, { dg_scalar(1, DG_F32) } } };
    cr_assert_lt(dg_collate_pad(z, 1, 0, &b), 0);
    expect_error_contains("0-d", "collate_pad", "1 to");
    dg_tensor *t = dg_zeros(DG_SHAPE(2), DG_F32);
    dg_sample four[1] = { { 4, { t, dg_zeros(DG_SHAPE(1), DG_F32), dg_zeros(DG_SHAPE(1), DG_F32), dg_zeros(DG_SHAPE(1), DG_F32) } } };
    cr_assert_lt(dg_collate_pad(four, 1, 0, &b), 0);
    expect_error_contains("fields", "collate_pad", "4 fields");
    /* the other fields keep dg_collate's rule */
    dg_sample o[2] = { { 2, { dg_zeros(DG_SHAPE(2), DG_F32), dg_zeros(DG_SHAPE(3), DG_F32) } },
                       { 2, { dg_zeros(DG_SHAPE(1), DG_F32), dg_zeros(DG_SHAPE(4), DG_F32) } } };
    cr_assert_lt(dg_collate_pad(o, 2, 0, &b), 0);
    expect_error_contains("other field", "sample 1", "[4]");
    cr_assert_lt(dg_collate_pad(NULL, 1, 0, &b), 0);
    cr_assert_lt(dg_collate_pad(s, 0, 0, &b), 0);
    dg_scope_end(sc);
}

static void run_loader(int workers) {
    dg_dataset *ds = dg_dataset_new(&seq_vt, NULL, "seqs");
    cr_assert(ds, "%s", dg_last_error());
    static const double pad = -1;
    dg_dataloader_params p = dg_dataloader_default_params();
    p.batch_size = 3;
    p.num_workers = workers;
    p.collate = dg_collate_pad_hook;
    p.collate_user = (void *)&pad;
    dg_dataloader *dl = dg_dataloader_new(ds, p);
    dg_dataset_free(ds);
    cr_assert(dl, "%s", dg_last_error());
    cr_assert_eq(dg_dataloader_num_batches(dl), 4);
    int nb = 0;
    for (;;) {
        dg_scope *sc = dg_scope_begin();
        dg_sample b;
        int rc = dg_dataloader_next(dl, &b);
        cr_assert_geq(rc, 0, "%s", dg_last_error());
        if (rc == 0) { dg_scope_end(sc); break; }
        int64_t idx[3];
        int n = nb < 3 ? 3 : 1;
        for (int k = 0; k < n; k++) idx[k] = nb * 3 + k;
        check_padded(&b, idx, n);
        nb++;
        dg_scope_end(sc);
    }
    cr_assert_eq(nb, 4);
    dg_dataloader_free(dl);
}

Test(data_collate, loader_hook_pads_batches) { run_loader(0); }
Test(data_collate, loader_hook_pads_batches_with_workers) { run_loader(2); }

static int failing_collate(const dg_sample *s, int64_t n, dg_sample *b, void *user) {
    return dg_dataset_error("my collate refuses %lld samples", (long long)n);
}
static int lazy_collate(const dg_sample *s, int64_t n, dg_sample *b, void *user) {
    b->n = 1;
    b->t[0] = s[0].t[1];
    return 0;
}

Test(data_collate, loader_hook_errors) {
    dg_collate_fn fns[2] = { failing_collate, lazy_collate };
    const char *needle[2] = { "my collate refuses 3 samples", "sample 0's field 1 itself" };
    for (int w = 0; w < 2; w++)
        for (int i = 0; i < 2; i++) {
            dg_dataset *ds = dg_dataset_new(&seq_vt, NULL, "seqs");
            dg_dataloader_params p = dg_dataloader_default_params();
            p.batch_size = 3;
            p.num_workers = w;
            p.collate = fns[i];
            dg_dataloader *dl = dg_dataloader_new(ds, p);
            dg_dataset_free(ds);
            dg_sample b;
            cr_assert_lt(dg_dataloader_next(dl, &b), 0);
            cr_assert(strstr(dg_last_error(), "batch 0") && strstr(dg_last_error(), needle[i]), "%d workers: '%s'", w,
                      dg_last_error());
            dg_dataloader_free(dl);
        }
}
