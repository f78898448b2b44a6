/* test/test_rng.c — random-number generators: the default generator draws exactly the numbers it
 * drew before generators existed; a seed gives the same numbers on any generator; generators do
 * not disturb each other; a saved state repeats the stream (a dropout mask); threads drawing from
 * one generator at once get disjoint counters and numbers; the thread's generator reaches layer
 * initialisation; bad arguments are errors. */
#include "test_util.h"
#include <pthread.h>

static void expect_same(const dg_tensor *a, const dg_tensor *b, const char *what) {
    cr_assert(a && b, "%s: %s", what, dg_last_error());
    cr_assert_eq(dg_numel(a), dg_numel(b));
    size_t bytes = (size_t)dg_numel(a) * dg_dtype_size(dg_dtype_of(a));
    cr_assert(memcmp(dg_data(a), dg_data(b), bytes) == 0, "%s: the draws differ", what);
}
static bool same(const dg_tensor *a, const dg_tensor *b) {
    return memcmp(dg_data(a), dg_data(b), (size_t)dg_numel(a) * dg_dtype_size(dg_dtype_of(a))) == 0;
}

/* Printed by the library before generators were added (seed 123, these calls in this order);
 * goldens and checkpoints of users depend on these numbers staying put. */
Test(rng, default_generator_draws_the_numbers_it_always_drew) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(123);
    cr_assert_eq(dg_get_seed(), 123);
    const float *a = dg_data(dg_rand(DG_SHAPE(5), DG_F32));
    const double *b = dg_data(dg_randn(DG_SHAPE(3), DG_F64));
    const float *d = dg_data(dg_dropout(dg_ones(DG_SHAPE(16), DG_F32), 0.5, true));
    const double *c = dg_data(dg_uniform(DG_SHAPE(2), -1, 1, DG_F64));
    dg_tensor *e = dg_zeros(DG_SHAPE(2), DG_F32);
    cr_assert_eq(dg_normal_(e, 1.0, 2.0), 0);
    const float *ep = dg_data(e);
    const float want_a[5] = { 0.0669476986f, 0.748788655f, 0.63964963f, 0.206395686f, 0.172292352f };
    const double want_b[3] = { 1.2140756817090492, -1.6695445638646251, 0.35052764037326051 };
    const float want_d[16] = { 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 2, 0, 0, 0 };
    const double want_c[2] = { -0.16289784078123959, -0.50760366177339589 };
    const float want_e[2] = { 2.63738918f, 0.239002347f };
    for (int i = 0; i < 5; i++) cr_assert_eq(a[i], want_a[i], "rand[%d] %.9g", i, a[i]);
    for (int i = 0; i < 3; i++) cr_assert_eq(b[i], want_b[i], "randn[%d] %.17g", i, b[i]);
    for (int i = 0; i < 16; i++) cr_assert_eq(d[i], want_d[i], "dropout[%d] %g", i, d[i]);
    for (int i = 0; i < 2; i++) cr_assert_eq(c[i], want_c[i], "uniform[%d] %.17g", i, c[i]);
    for (int i = 0; i < 2; i++) cr_assert_eq(ep[i], want_e[i], "normal_[%d] %.9g", i, ep[i]);
    dg_generator_state st;
    cr_assert_eq(dg_generator_get_state(dg_default_generator(), &st), 0);
    /* counters: 5*2 draws -> 3, 3*2 -> 2, 16*2 -> 8, 2*2 -> 1, 2*2 -> 1 */
    cr_assert_eq(st.seed, 123);
    cr_assert_eq(st.offset, 15, "offset %llu", (unsigned long long)st.offset);
    dg_scope_end(s);
}

Test(rng, the_same_seed_gives_the_same_numbers_on_any_generator) {
    dg_scope *s = dg_scope_begin();
    dg_generator *g1 = dg_generator_new(7), *g2 = dg_generator_new(7);
    cr_assert(g1 && g2);
    cr_assert_eq(dg_generator_get_seed(g1), 7);
    expect_same(dg_generator_randn(g1, DG_SHAPE(33), DG_F32), dg_generator_randn(g2, DG_SHAPE(33), DG_F32), "randn");
    expect_same(dg_generator_uniform(g1, DG_SHAPE(9), -2, 3, DG_F64), dg_generator_uniform(g2, DG_SHAPE(9), -2, 3, DG_F64),
                "uniform");
    /* the default generator seeded alike is the same stream */
    dg_manual_seed(7);
    dg_generator_manual_seed(g1, 7);
    expect_same(dg_rand(DG_SHAPE(20), DG_F32), dg_generator_rand(g1, DG_SHAPE(20), DG_F32), "default vs own");
    expect_same(dg_normal(DG_SHAPE(4), 1, 2, DG_F64), dg_generator_normal(g1, DG_SHAPE(4), 1, 2, DG_F64), "normal");
    /* reseeding starts the stream over */
    dg_generator_manual_seed(g2, 7);
    dg_generator_manual_seed(g1, 8);
    dg_tensor *x = dg_generator_rand(g2, DG_SHAPE(20), DG_F32), *y = dg_generator_rand(g1, DG_SHAPE(20), DG_F32);
    dg_generator_manual_seed(g2, 7);
    expect_same(x, dg_generator_rand(g2, DG_SHAPE(20), DG_F32), "after reseeding");
    cr_assert_not(same(x, y), "another seed, other numbers");
    dg_generator_free(g1);
    dg_generator_free(g2);
    dg_scope_end(s);
}

Test(rng, generators_do_not_disturb_each_other_or_the_default) {
    dg_scope *s = dg_scope_begin();
    dg_manual_seed(5);
    dg_tensor *ref1 = dg_randn(DG_SHAPE(10), DG_F32), *ref2 = dg_randn(DG_SHAPE(10), DG_F32);
    dg_generator *g = dg_generator_new(5), *h = dg_generator_new(99);
    dg_tensor *h1 = dg_generator_rand(h, DG_SHAPE(6), DG_F64);
    dg_generator_manual_seed(h, 99);

    dg_manual_seed(5);
    expect_same(dg_randn(DG_SHAPE(10), DG_F32), ref1, "default, first draw");
    for (int i = 0; i < 5; i++) cr_assert_not_null(dg_generator_randn(g, DG_SHAPE(10), DG_F32));   /* g moves on... */
    dg_dropout_params d3 = dg_dropout_default_params();
    d3.p = 0.3, d3.training = true, d3.generator = g;
    cr_assert_not_null(dg_dropout_ext(dg_ones(DG_SHAPE(50), DG_F32), d3));
    expect_same(dg_randn(DG_SHAPE(10), DG_F32), ref2, "default, second draw");   /* ...the default does not */
    expect_same(dg_generator_rand(h, DG_SHAPE(6), DG_F64), h1, "h after g and the default drew");

    dg_generator_state sg;
    dg_generator_get_state(g, &sg);
    cr_assert_eq(sg.seed, 5);
    cr_assert_eq(sg.offset, 5 * 5 + 25, "five randn(10) take 5 counters each, dropout(50) 25: %llu", (unsigned long long)sg.offset);
    dg_generator_free(g);
    dg_generator_free(h);
    dg_scope_end(s);
}

Test(rng, a_saved_state_repeats_the_stream_exactly) {
    dg_scope *s = dg_scope_begin();
    dg_generator *g = dg_generator_new(2024);
    dg_tensor *x = dg_ones(DG_SHAPE(4, 64), DG_F32);
    dg_dropout_params dp = dg_dropout_default_params();
    dp.p = 0.5, dp.training = true, dp.generator = g;
    cr_assert_not_null(dg_dropout_ext(x, dp));   /* somewhere in the middle of the stream */
    dg_generator_state st;
    cr_assert_eq(dg_generator_get_state(g, &st), 0);
    dg_tensor *m1 = dg_dropout_ext(x, dp), *n1 = dg_generator_randn(g, DG_SHAPE(7), DG_F64);
    cr_assert_not(same(m1, dg_dropout_ext(x, dp)), "the stream moved on");
    /* a checkpoint restores the position into a fresh generator */
    dg_generator *r = dg_generator_new(1);
    cr_assert_eq(dg_generator_set_state(r, &st), 0);
    dp.generator = r;
    expect_same(dg_dropout_ext(x, dp), m1, "dropout mask after set_state");
    expect_same(dg_generator_randn(r, DG_SHAPE(7), DG_F64), n1, "the draw after it");
    cr_assert_eq(dg_generator_get_seed(r), 2024);

    /* the same through the default generator and the Dropout layer */
    dg_layer *drop = dg_nn_dropout(0.25);
    dg_manual_seed(3);
    dg_randn(DG_SHAPE(3), DG_F32);
    dg_generator_get_state(dg_default_generator(), &st);
    dg_tensor *l1 = dg_forward(drop, x);
    dg_randn(DG_SHAPE(100), DG_F32);
    dg_generator_set_state(dg_default_generator(), &st);
    expect_same(dg_forward(drop, x), l1, "Dropout layer after restoring the default generator");
    /* a layer with a generator of its own ignores the default one */
    dg_nn_dropout_params nd = dg_nn_dropout_default_params();
    nd.p = 0.25, nd.generator = r;
    dg_layer *own = dg_nn_dropout_ext(nd);
    cr_assert_not_null(own, "%s", dg_last_error());
    dg_generator_set_state(r, &st);
    dg_randn(DG_SHAPE(100), DG_F32);
    expect_same(dg_forward(own, x), l1, "same state, same mask, on another generator");
    dg_layer_free(drop);
    dg_layer_free(own);
    dg_generator_free(g);
    dg_generator_free(r);
    dg_scope_end(s);
}

/* ---- several threads on one generator ----
 * Both threads wait at a barrier and then reserve as fast as they can, so that on a machine with
 * two free CPUs their reservations interleave by the thousand: a counter that is not advanced
 * atomically hands the same start to both. */
#define RESERVATIONS 1000000
static pthread_barrier_t g_start;
typedef struct { dg_generator *g; uint64_t *start; } reserver;
static uint64_t len_of(int i) { return (uint64_t)(1 + i % 13 + 3) / 4; }   /* 1..13 draws: 1..4 counters */
static void *reserve_many(void *arg) {
    reserver *r = arg;
    pthread_barrier_wait(&g_start);
    for (int i = 0; i < RESERVATIONS; i++) {
        uint64_t seed;
        r->start[i] = dg_generator_reserve(r->g, (uint64_t)(1 + i % 13), &seed);
    }
    return NULL;
}
static int by_start(const void *a, const void *b) {
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void check_disjoint(dg_generator *g, uint64_t offset0) {
    reserver r[2];
    uint64_t (*all)[2] = malloc(sizeof *all * 2 * RESERVATIONS);
    cr_assert_not_null(all);
    pthread_barrier_init(&g_start, NULL, 2);
    pthread_t th[2];
    for (int t = 0; t < 2; t++) {
        r[t] = (reserver){ g, malloc(sizeof(uint64_t) * RESERVATIONS) };
        cr_assert_not_null(r[t].start);
        cr_assert_eq(pthread_create(&th[t], NULL, reserve_many, &r[t]), 0);
    }
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&g_start);
    uint64_t total = 0;
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < RESERVATIONS; i++) {
            all[t * RESERVATIONS + i][0] = r[t].start[i];
            all[t * RESERVATIONS + i][1] = len_of(i);
            total += len_of(i);
        }
    free(r[0].start);
    free(r[1].start);
    dg_generator_state st;
    dg_generator_get_state(g ? g : dg_default_generator(), &st);
    cr_assert_eq(st.offset, offset0 + total, "the generator advanced by %llu counters for %llu reserved",
                 (unsigned long long)(st.offset - offset0), (unsigned long long)total);
    qsort(all, 2 * RESERVATIONS, sizeof *all, by_start);
    /* sorted by start, the ranges must tile [offset0, offset0 + total) with no overlap or gap */
    uint64_t next = offset0;
    for (int i = 0; i < 2 * RESERVATIONS; i++) {
        if (all[i][0] != next) {
            unsigned long long got = all[i][0];
            free(all);
            cr_assert_fail("range %d starts at %llu, expected %llu: two threads got overlapping counters", i, got,
                           (unsigned long long)next);
        }
        next += all[i][1];
    }
    free(all);
}

Test(rng, two_threads_reserving_from_one_generator_get_disjoint_counters, .timeout = 60) {
    dg_manual_seed(1);
    dg_tensor_free(dg_randn(DG_SHAPE(1), DG_F32));   /* start somewhere other than 0 */
    check_disjoint(NULL, 1);          /* the default generator, through a new thread's NULL */
    dg_generator *g = dg_generator_new(3);
    check_disjoint(g, 0);
    dg_generator_free(g);
}

/* the same at the level of ops: every row drawn by two threads together is a row the default
 * generator gives when one thread draws them all, and none comes twice */
#define ROWS 20000
static void *draw_rows(void *arg) {
    double (*v)[4] = arg;
    for (int i = 0; i < ROWS; i++) {
        dg_tensor *t = dg_rand(DG_SHAPE(4), DG_F64);   /* two counters each */
        memcpy(v[i], dg_data(t), sizeof v[i]);
        dg_tensor_free(t);
    }
    return NULL;
}
static int by_row(const void *a, const void *b) { return memcmp(a, b, 4 * sizeof(double)); }

static void *draw_rows_at_once(void *arg) {
    pthread_barrier_wait(&g_start);
    return draw_rows(arg);
}

Test(rng, two_threads_drawing_from_the_default_generator_never_get_the_same_numbers, .timeout = 60) {
    static double both[2 * ROWS][4], seq[2 * ROWS][4];
    dg_manual_seed(77);
    pthread_barrier_init(&g_start, NULL, 2);
    pthread_t th[2];
    for (int t = 0; t < 2; t++) cr_assert_eq(pthread_create(&th[t], NULL, draw_rows_at_once, both + t * ROWS), 0);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&g_start);
    dg_manual_seed(77);
    draw_rows(seq);
    draw_rows(seq + ROWS);
    qsort(both, 2 * ROWS, sizeof both[0], by_row);
    qsort(seq, 2 * ROWS, sizeof seq[0], by_row);
    cr_assert(memcmp(both, seq, sizeof both) == 0, "the rows of two threads are not the rows of one sequential stream");
    for (int i = 1; i < 2 * ROWS; i++) cr_assert(by_row(both[i - 1], both[i]) != 0, "row %d drawn twice", i);
}

Test(rng, the_threads_generator_reaches_layer_initialisation) {
    dg_generator *g = dg_generator_new(11);
    dg_generator_state d0, d1;
    dg_generator_get_state(dg_default_generator(), &d0);
    cr_assert_eq(dg_generator_use(g), dg_default_generator(), "the default generator was in use");
    dg_layer *a = dg_nn_linear(6, 4);
    dg_generator_manual_seed(g, 11);
    dg_layer *b = dg_nn_linear(6, 4);
    cr_assert_eq(dg_generator_use(NULL), g, "nesting gets back what was in use");
    dg_generator_get_state(dg_default_generator(), &d1);
    cr_assert_eq(d1.offset, d0.offset, "the default generator did not move");
    cr_assert_eq(d1.seed, d0.seed);
    int n;
    dg_named_tensor *sa = dg_layer_state_dict(a, &n), *sb = dg_layer_state_dict(b, &n);
    for (int i = 0; i < n; i++) expect_same(sa[i].tensor, sb[i].tensor, sa[i].name);
    free(sa);
    free(sb);
    /* back on the default: initialisation draws from it again */
    dg_layer *c = dg_nn_linear(6, 4);
    dg_generator_get_state(dg_default_generator(), &d1);
    cr_assert_gt(d1.offset, d0.offset);

    /* kaiming takes a generator in its params, whatever the thread uses */
    dg_tensor *w1 = dg_zeros(DG_SHAPE(8, 5), DG_F32), *w2 = dg_zeros(DG_SHAPE(8, 5), DG_F32);
    dg_nn_kaiming_params kp = dg_nn_kaiming_default_params();
    kp.generator = g;
    dg_generator_manual_seed(g, 4);
    cr_assert_eq(dg_nn_init_kaiming_normal_(w1, kp), 0);
    dg_generator_manual_seed(g, 4);
    dg_tensor_free(dg_randn(DG_SHAPE(10), DG_F32));   /* the default generator: g stays put */
    cr_assert_eq(dg_nn_init_kaiming_normal_(w2, kp), 0);
    expect_same(w1, w2, "kaiming_normal_ from the same generator state");

    /* freeing the generator a thread uses puts that thread back on the default */
    dg_generator_use(g);
    dg_generator_free(g);
    dg_tensor *t = dg_rand(DG_SHAPE(3), DG_F32);
    cr_assert_not_null(t);
    dg_tensor_free(t);
    dg_tensor_free(w1);
    dg_tensor_free(w2);
    dg_layer_free(a);
    dg_layer_free(b);
    dg_layer_free(c);
}

Test(rng, bad_arguments_are_errors) {
    cr_assert_eq(dg_generator_manual_seed(NULL, 1), DG_EINVAL);
    cr_assert(strstr(dg_last_error(), "generator is NULL"), "%s", dg_last_error());
    dg_clear_error();
    dg_generator_state st;
    cr_assert_eq(dg_generator_get_state(NULL, &st), DG_EINVAL);
    dg_clear_error();
    cr_assert_eq(dg_generator_get_state(dg_default_generator(), NULL), DG_EINVAL);
    dg_clear_error();
    cr_assert_eq(dg_generator_set_state(dg_default_generator(), NULL), DG_EINVAL);
    cr_assert(strstr(dg_last_error(), "state is NULL"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_eq(dg_generator_get_seed(NULL), 0);
    cr_assert_eq(dg_last_status(), DG_EINVAL);
    dg_clear_error();
    dg_generator_free(NULL);
    dg_generator_free(dg_default_generator());   /* ignored: it is the library's */
    dg_manual_seed(9);
    cr_assert_eq(dg_get_seed(), 9);
    dg_tensor *x = dg_ones(DG_SHAPE(4), DG_F32);
    dg_dropout_params bad = dg_dropout_default_params();
    bad.p = 1.5;
    cr_assert_null(dg_dropout_ext(x, bad));
    cr_assert(strstr(dg_last_error(), "p must be in [0, 1]"), "%s", dg_last_error());
    dg_clear_error();
    dg_nn_dropout_params nbad = dg_nn_dropout_default_params();
    nbad.p = -0.1;
    cr_assert_null(dg_nn_dropout_ext(nbad));
    cr_assert(strstr(dg_last_error(), "p must be in [0, 1]"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_null(dg_generator_rand(NULL, DG_SHAPE(2), DG_I64));
    cr_assert(strstr(dg_last_error(), "generator_rand: dtype must be a float type, got int64"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_eq(dg_generator_uniform_(NULL, NULL, 0, 1), DG_EINVAL);
    dg_clear_error();
    dg_tensor_free(x);
}

/* The dropout params have their defaults like every params struct (torch's p = 0.5). */
Test(rng, dropout_default_params_are_torchs) {
    dg_dropout_params d = dg_dropout_default_params();
    cr_expect_float_eq(d.p, 0.5, 0);
    cr_expect(d.training);
    cr_expect_null(d.generator);
    dg_nn_dropout_params n = dg_nn_dropout_default_params();
    cr_expect_float_eq(n.p, 0.5, 0);
    cr_expect_null(n.generator);
}
