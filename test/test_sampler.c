/* test/test_sampler.c — batch samplers: sequential/shuffled with drop_last, and the
 * DistributedBatchSampler against Paddle 2.x's own outputs, its coverage/padding/equal-count
 * properties for 1..4 replicas, environment defaults and bad values. */
#include "test_util.h"

typedef struct batches { int64_t nb; int64_t cnt[256]; int64_t idx[256][64]; } batches;

static void collect(const dg_batch_sampler *s, batches *out) {
    memset(out, 0, sizeof *out);
    out->nb = dg_batch_sampler_num_batches(s);
    cr_assert(out->nb >= 0 && out->nb <= 256);
    for (int64_t b = 0; b < out->nb; b++) {
        out->cnt[b] = dg_batch_sampler_batch(s, b, out->idx[b], 64);
        cr_assert(out->cnt[b] > 0, "batch %lld: %s", (long long)b, dg_last_error());
    }
}

static void assert_batches(const dg_batch_sampler *s, int nb, const int64_t *flat, const int *counts, const char *what) {
    batches got;
    collect(s, &got);
    cr_assert_eq(got.nb, nb, "%s: %lld batches, want %d", what, (long long)got.nb, nb);
    int o = 0;
    for (int b = 0; b < nb; b++) {
        cr_assert_eq(got.cnt[b], counts[b], "%s: batch %d has %lld indices, want %d", what, b, (long long)got.cnt[b], counts[b]);
        for (int k = 0; k < counts[b]; k++, o++)
            cr_assert_eq(got.idx[b][k], flat[o], "%s: batch %d [%d] = %lld, want %lld", what, b, k, (long long)got.idx[b][k], (long long)flat[o]);
    }
}

Test(sampler, sequential_shuffled_drop_last) {
    dg_batch_sampler_params bsp = dg_batch_sampler_default_params();
    bsp.batch_size = 4;
    dg_batch_sampler *s = dg_batch_sampler_new(10, bsp);
    cr_assert(s);
    assert_batches(s, 3, (int64_t[]){ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 }, (int[]){ 4, 4, 2 }, "sequential");
    dg_batch_sampler_free(s);
    dg_batch_sampler_params bsp2 = dg_batch_sampler_default_params();
    bsp2.batch_size = 4;
    bsp2.drop_last = true;
    s = dg_batch_sampler_new(10, bsp2);
    assert_batches(s, 2, (int64_t[]){ 0, 1, 2, 3, 4, 5, 6, 7 }, (int[]){ 4, 4 }, "drop_last");
    dg_batch_sampler_free(s);
    s = dg_batch_sampler_new(3, dg_batch_sampler_default_params());   /* batch_size 1 by default */
    cr_assert_eq(dg_batch_sampler_num_batches(s), 3);
    dg_batch_sampler_free(s);

    /* shuffled: a permutation per epoch, a pure function of (seed, epoch) */
    dg_batch_sampler_params bsp3 = dg_batch_sampler_default_params();
    bsp3.batch_size = 7;
    bsp3.shuffle = true;
    bsp3.seed = 5;
    dg_batch_sampler *a = dg_batch_sampler_new(50, bsp3);
    dg_batch_sampler_params bsp4 = dg_batch_sampler_default_params();
    bsp4.batch_size = 7;
    bsp4.shuffle = true;
    bsp4.seed = 5;
    dg_batch_sampler *b = dg_batch_sampler_new(50, bsp4);
    dg_batch_sampler_params bsp5 = dg_batch_sampler_default_params();
    bsp5.batch_size = 7;
    bsp5.shuffle = true;
    bsp5.seed = 6;
    dg_batch_sampler *c = dg_batch_sampler_new(50, bsp5);
    batches e0, e1, e0again, other, twin;
    collect(a, &e0);
    collect(c, &other);
    cr_assert_eq(dg_batch_sampler_set_epoch(a, 1), 0);
    collect(a, &e1);
    cr_assert_eq(dg_batch_sampler_set_epoch(b, 1), 0);
    collect(b, &twin);
    cr_assert_eq(dg_batch_sampler_set_epoch(a, 0), 0);
    collect(a, &e0again);
    cr_assert_eq(e0.nb, 8);
    int seen[50] = {0};
    for (int64_t k = 0; k < e0.nb; k++)
        for (int64_t j = 0; j < e0.cnt[k]; j++) seen[e0.idx[k][j]]++;
    for (int i = 0; i < 50; i++) cr_assert_eq(seen[i], 1, "index %d served %d times", i, seen[i]);
    cr_assert(memcmp(&e0, &e0again, sizeof e0) == 0, "epoch 0 is not reproducible");
    cr_assert(memcmp(&e1, &twin, sizeof e1) == 0, "same seed and epoch differ");
    cr_assert(memcmp(&e0.idx, &e1.idx, sizeof e0.idx) != 0, "epoch 1 repeats epoch 0");
    cr_assert(memcmp(&e0.idx, &other.idx, sizeof e0.idx) != 0, "another seed repeats the order");
    bool moved = false;
    for (int i = 0; i < 7; i++) moved |= e0.idx[0][i] != i;
    cr_assert(moved, "shuffled epoch is sequential");
    dg_batch_sampler_free(a);
    dg_batch_sampler_free(b);
    dg_batch_sampler_free(c);

    /* bad arguments */
    cr_assert_null(dg_batch_sampler_new(-1, dg_batch_sampler_default_params()));
    dg_batch_sampler_params bsp6 = dg_batch_sampler_default_params();
    bsp6.batch_size = -2;
    cr_assert_null(dg_batch_sampler_new(5, bsp6));
    dg_batch_sampler_params bsp7 = dg_batch_sampler_default_params();
    bsp7.batch_size = 2;
    s = dg_batch_sampler_new(5, bsp7);
    int64_t buf[4];
    cr_assert_lt(dg_batch_sampler_batch(s, 3, buf, 4), 0);
    cr_assert_lt(dg_batch_sampler_batch(s, 0, buf, 1), 0);
    cr_assert_lt(dg_batch_sampler_set_epoch(s, -1), 0);
    dg_batch_sampler_free(s);
}


/* Expected values: Paddle 2.x DistributedBatchSampler.__iter__ (pad, RandomState(epoch).shuffle,
 * batch_size blocks per rank round robin, the tail split in equal chunks), run by hand / numpy. */
Test(sampler, distributed_matches_paddle) {
    struct { int64_t n, bs; int R; bool shuffle, drop_last; int64_t epoch; int nb; int64_t idx[3][6]; int cnt[3][3]; } cases[] = {
        /* n=10, 3 replicas, batch 2: padded [0..9, 0, 1]; rank r takes blocks r*2 and r*2+6 */
        { 10, 2, 3, false, false, 0, 2, { { 0, 1, 6, 7 }, { 2, 3, 8, 9 }, { 4, 5, 0, 1 } }, { { 2, 2 }, { 2, 2 }, { 2, 2 } } },
        /* batch 3: 12 % 9 = 3 tail indices [9, 0, 1], one per rank */
        { 10, 3, 3, false, false, 0, 2, { { 0, 1, 2, 9 }, { 3, 4, 5, 0 }, { 6, 7, 8, 1 } }, { { 3, 1 }, { 3, 1 }, { 3, 1 } } },
        { 10, 3, 3, false, true, 0, 1, { { 0, 1, 2 }, { 3, 4, 5 }, { 6, 7, 8 } }, { { 3 }, { 3 }, { 3 } } },
        /* shuffled: numpy RandomState(0).shuffle([0..9, 0, 1]) = [6 1 4 0 2 8 1 7 9 3 0 5] */
        { 10, 2, 3, true, false, 0, 2, { { 6, 1, 1, 7 }, { 4, 0, 9, 3 }, { 2, 8, 0, 5 } }, { { 2, 2 }, { 2, 2 }, { 2, 2 } } },
        { 10, 2, 3, true, false, 1, 2, { { 2, 3, 0, 7 }, { 4, 0, 1, 9 }, { 1, 6, 8, 5 } }, { { 2, 2 }, { 2, 2 }, { 2, 2 } } },
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int r = 0; r < cases[c].R; r++) {
            dg_batch_sampler *s = dist_sampler(cases[c].n, cases[c].bs, cases[c].R, r, cases[c].shuffle, cases[c].drop_last, 0);
            cr_assert_eq(dg_batch_sampler_set_epoch(s, cases[c].epoch), 0);
            char what[64];
            snprintf(what, sizeof what, "case %zu rank %d", c, r);
            assert_batches(s, cases[c].nb, cases[c].idx[r], cases[c].cnt[r], what);
            dg_batch_sampler_free(s);
        }
    /* one replica, shuffled: numpy.random.RandomState(0).permutation(10) */
    dg_batch_sampler *s = dist_sampler(10, 1, 1, 0, true, false, 0);
    int64_t perm[] = { 2, 8, 4, 9, 1, 6, 7, 3, 0, 5 };
    int ones[10] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    assert_batches(s, 10, perm, ones, "RandomState(0).permutation(10)");
    dg_batch_sampler_free(s);
    /* the seed offsets the epoch: seed 1 epoch 0 == seed 0 epoch 1 */
    dg_batch_sampler *x = dist_sampler(10, 2, 3, 1, true, false, 1), *y = dist_sampler(10, 2, 3, 1, true, false, 0);
    dg_batch_sampler_set_epoch(y, 1);
    batches bx, by;
    collect(x, &bx);
    collect(y, &by);
    cr_assert(memcmp(&bx, &by, sizeof bx) == 0);
    dg_batch_sampler_free(x);
    dg_batch_sampler_free(y);
}

Test(sampler, distributed_properties) {
    int64_t sizes[] = { 1, 7, 10, 23, 64 };
    int64_t bss[] = { 1, 3, 4 };
    for (int R = 1; R <= 4; R++)
        for (int sh = 0; sh < 2; sh++)
            for (int dl = 0; dl < 2; dl++)
                for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
                    for (size_t bi = 0; bi < sizeof bss / sizeof *bss; bi++) {
                        int64_t n = sizes[si], bs = bss[bi], per = (n + R - 1) / R, total = per * R;
                        int64_t want_nb = dl ? per / bs : (per + bs - 1) / bs;
                        for (int64_t epoch = 0; epoch < 3; epoch++) {
                            int count[64] = {0};
                            batches first;
                            for (int r = 0; r < R; r++) {
                                dg_batch_sampler *s = dist_sampler(n, bs, R, r, sh, dl, 7);
                                cr_assert_eq(dg_batch_sampler_set_epoch(s, epoch), 0);
                                batches got;
                                collect(s, &got);
                                cr_assert_eq(got.nb, want_nb, "n=%lld bs=%lld R=%d rank %d: %lld batches, want %lld",
                                             (long long)n, (long long)bs, R, r, (long long)got.nb, (long long)want_nb);
                                cr_assert_eq(dg_batch_sampler_num_batches(s), want_nb);
                                for (int64_t b = 0; b < got.nb; b++) {
                                    if (dl || b + 1 < got.nb) cr_assert_eq(got.cnt[b], bs);
                                    for (int64_t k = 0; k < got.cnt[b]; k++) {
                                        cr_assert(got.idx[b][k] >= 0 && got.idx[b][k] < n);
                                        count[got.idx[b][k]]++;
                                    }
                                }
                                /* reproducible: setting the epoch again gives the same order */
                                if (r == 0) {
                                    first = got;
                                    dg_batch_sampler_set_epoch(s, epoch + 1);
                                    dg_batch_sampler_set_epoch(s, epoch);
                                    batches again;
                                    collect(s, &again);
                                    cr_assert(memcmp(&again, &first, sizeof again) == 0, "epoch %lld not reproducible", (long long)epoch);
                                }
                                dg_batch_sampler_free(s);
                            }
                            /* index i appears once, plus once more for each padding slot j in [n, total) with j % n == i */
                            int64_t served = 0;
                            for (int64_t i = 0; i < n; i++) {
                                int want = 1;
                                for (int64_t j = n; j < total; j++) want += j % n == i;
                                if (dl) cr_assert_leq(count[i], want);
                                else cr_assert_eq(count[i], want, "n=%lld bs=%lld R=%d shuffle=%d: index %lld served %d times, want %d",
                                                  (long long)n, (long long)bs, R, sh, (long long)i, count[i], want);
                                served += count[i];
                            }
                            cr_assert_eq(served, dl ? want_nb * bs * R : total);
                        }
                    }
    /* epochs reshuffle */
    dg_batch_sampler *s = dist_sampler(64, 4, 2, 1, true, false, 0);
    batches e0, e1;
    collect(s, &e0);
    dg_batch_sampler_set_epoch(s, 1);
    collect(s, &e1);
    cr_assert(memcmp(&e0, &e1, sizeof e0) != 0, "set_epoch did not reshuffle");
    dg_batch_sampler_free(s);
}

Test(sampler, distributed_env_and_errors) {
    unsetenv("PADDLE_TRAINERS_NUM"); unsetenv("PADDLE_TRAINER_ID");
    unsetenv("OMPI_COMM_WORLD_SIZE"); unsetenv("OMPI_COMM_WORLD_RANK");
    batches want, got;
    /* nothing set: one replica */
    dg_distributed_batch_sampler_params dbsp = dg_distributed_batch_sampler_default_params();
    dbsp.batch_size = 2;
    dg_batch_sampler *s = dg_distributed_batch_sampler_new(10, dbsp);
    cr_assert(s);
    dg_batch_sampler *ref = dist_sampler(10, 2, 1, 0, false, false, 0);
    collect(s, &got); collect(ref, &want);
    cr_assert(memcmp(&got, &want, sizeof got) == 0);
    dg_batch_sampler_free(s); dg_batch_sampler_free(ref);
    /* Paddle's launcher variables */
    setenv("PADDLE_TRAINERS_NUM", "3", 1); setenv("PADDLE_TRAINER_ID", "2", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "5", 1); setenv("OMPI_COMM_WORLD_RANK", "4", 1);
    dg_distributed_batch_sampler_params dbsp2 = dg_distributed_batch_sampler_default_params();
    dbsp2.batch_size = 2;
    s = dg_distributed_batch_sampler_new(10, dbsp2);
    cr_assert(s, "%s", dg_last_error());
    ref = dist_sampler(10, 2, 3, 2, false, false, 0);
    collect(s, &got); collect(ref, &want);
    cr_assert(memcmp(&got, &want, sizeof got) == 0, "PADDLE_* not used");
    dg_batch_sampler_free(s); dg_batch_sampler_free(ref);
    /* explicit num_replicas wins over the environment */
    s = dist_sampler(10, 2, 2, 1, false, false, 0);
    ref = dist_sampler(10, 2, 2, 1, false, false, 0);
    dg_batch_sampler_free(s); dg_batch_sampler_free(ref);
    /* MPI's variables when Paddle's are absent */
    unsetenv("PADDLE_TRAINERS_NUM"); unsetenv("PADDLE_TRAINER_ID");
    dg_distributed_batch_sampler_params dbsp3 = dg_distributed_batch_sampler_default_params();
    dbsp3.batch_size = 2;
    s = dg_distributed_batch_sampler_new(10, dbsp3);
    cr_assert(s, "%s", dg_last_error());
    ref = dist_sampler(10, 2, 5, 4, false, false, 0);
    collect(s, &got); collect(ref, &want);
    cr_assert(memcmp(&got, &want, sizeof got) == 0, "OMPI_* not used");
    dg_batch_sampler_free(s); dg_batch_sampler_free(ref);
    /* bad values */
    setenv("PADDLE_TRAINERS_NUM", "two", 1);
    dg_clear_error();
    dg_distributed_batch_sampler_params dbsp4 = dg_distributed_batch_sampler_default_params();
    dbsp4.batch_size = 2;
    cr_assert_null(dg_distributed_batch_sampler_new(10, dbsp4));
    cr_assert(strstr(dg_last_error(), "PADDLE_TRAINERS_NUM"), "%s", dg_last_error());
    setenv("PADDLE_TRAINERS_NUM", "2", 1); setenv("PADDLE_TRAINER_ID", "2", 1);
    dg_clear_error();
    dg_distributed_batch_sampler_params dbsp5 = dg_distributed_batch_sampler_default_params();
    dbsp5.batch_size = 2;
    cr_assert_null(dg_distributed_batch_sampler_new(10, dbsp5));
    cr_assert(strstr(dg_last_error(), "rank 2"), "%s", dg_last_error());
    setenv("PADDLE_TRAINERS_NUM", "0", 1);
    dg_distributed_batch_sampler_params dbsp6 = dg_distributed_batch_sampler_default_params();
    dbsp6.batch_size = 2;
    cr_assert_null(dg_distributed_batch_sampler_new(10, dbsp6));
    dg_clear_error();
    dg_distributed_batch_sampler_params dbsp7 = dg_distributed_batch_sampler_default_params();
    dbsp7.num_replicas = 2;
    dbsp7.rank = 2;
    cr_assert_null(dg_distributed_batch_sampler_new(10, dbsp7));
    cr_assert(strstr(dg_last_error(), "rank 2"), "%s", dg_last_error());
    dg_distributed_batch_sampler_params dbsp8 = dg_distributed_batch_sampler_default_params();
    dbsp8.num_replicas = 2;
    dbsp8.rank = -2;   /* negative and not DG_FROM_ENV */
    cr_assert_null(dg_distributed_batch_sampler_new(10, dbsp8));
    dg_distributed_batch_sampler_params dbsp9 = dg_distributed_batch_sampler_default_params();
    dbsp9.num_replicas = -2;   /* negative and not DG_FROM_ENV */
    dbsp9.rank = 0;
    cr_assert_null(dg_distributed_batch_sampler_new(10, dbsp9));
    dg_distributed_batch_sampler_params dbsp10 = dg_distributed_batch_sampler_default_params();
    dbsp10.num_replicas = 1;
    dbsp10.rank = 0;
    cr_assert_null(dg_distributed_batch_sampler_new(-3, dbsp10));
}

/* ---- datasets ---- */
