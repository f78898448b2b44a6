/* test/test_ps_communicator.c — async mode's communicator thread (dist/ps/communicator.c) with a
 * fake exchange the test holds and releases: gradients handed over during an exchange are summed
 * into the next push, the values handed back come with exactly the gradients they lack, max_merge
 * makes the worker wait, max_merge 1 keeps one gradient in flight, a failure is re-raised on the
 * worker's side, and flush delivers everything. */
#include "test_util.h"
#include "../dist/ps/communicator.h"
#include <dygraph/extension.h>
#include <pthread.h>
#include <unistd.h>

#define N 3

/* The "server": values = the sum of every push; each exchange waits until the test allows it. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int allowed, started, done, fail_at, posts, post_order[8];
    float server[N];
} fake;

static int fake_exchange(void *ctx, dg_ps_transport *tr, const float *grad, float *values) {
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->started++;
    pthread_cond_broadcast(&f->cv);
    while (f->allowed < f->started) pthread_cond_wait(&f->cv, &f->mu);
    int rc = 0;
    if (f->started == f->fail_at) {
        DG_RAISE(DG_ECOMM, "no reply from server 10.0.0.9:7000");
        rc = DG_ECOMM;
    } else {
        for (int i = 0; i < N; i++) f->server[i] += grad[i];
        memcpy(values, f->server, sizeof f->server);
    }
    f->done++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return rc;
}
/* Posts: the "server" answers with the message's first float doubled, and counts them. */
static int fake_send(void *ctx, dg_ps_transport *tr, const dg_ps_post *p) {
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->posts++;
    f->post_order[f->posts - 1] = f->started;   /* how many exchanges had begun when it went out */
    pthread_mutex_unlock(&f->mu);
    float v;
    memcpy(&v, p->msg, 4);
    v *= 2;
    if (p->reply) p->reply(p->arg, 0, (const unsigned char *)&v, 4);
    return 0;
}
static void wait_for(fake *f, int *counter, int n) {
    pthread_mutex_lock(&f->mu);
    while (*counter < n) pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}
static void allow(fake *f, int n) {
    pthread_mutex_lock(&f->mu);
    f->allowed = n;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}
static void no_destroy(dg_ps_transport *t) { (void)t; }
static const dg_ps_transport_ops fake_ops = { .name = "fake", .destroy = no_destroy };
static dg_ps_transport fake_tr = { &fake_ops, NULL };

/* The worker's side: take copies what it is handed, add hands `grad` over. */
typedef struct { const float *grad; float values[N], lack[N]; int n_missing, taken; } worker;
static void take(void *ctx, const dg_ps_handover *h) {
    worker *w = ctx;
    for (int i = 0; i < N; i++) {
        w->values[i] = h->fresh[i];
        w->lack[i] = (h->sending ? h->sending[i] : 0) + (h->queued ? h->queued[i] : 0);
    }
    w->n_missing = h->n_missing;
    w->taken++;
}
static int add(void *ctx, float *queue, bool accumulate) {
    worker *w = ctx;
    for (int i = 0; i < N; i++) queue[i] = (accumulate ? queue[i] : 0) + w->grad[i];
    return 0;
}
static int step(dg_ps_communicator *c, worker *w, const float *g) {
    w->grad = g;
    return dg_ps_communicator_step(c, take, add, w);
}

static fake *fake_new(int fail_at) {
    fake *f = calloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->fail_at = fail_at;
    return f;
}

Test(ps_communicator, merges_during_an_exchange_and_says_what_the_values_lack) {
    fake *f = fake_new(0);
    dg_ps_communicator *c = dg_ps_communicator_new(&fake_tr, N, 20, fake_exchange, fake_send, f);
    cr_assert(c);
    float g[5][N];
    for (int k = 0; k < 5; k++) for (int i = 0; i < N; i++) g[k][i] = (float)((k + 1) * (i + 1));
    worker w = { 0 };
    cr_expect_eq(step(c, &w, g[0]), 0, "no values before the first exchange");
    wait_for(f, &f->started, 1);                        /* exchange 1 (g0) is held */
    cr_expect_eq(step(c, &w, g[1]), 0);
    cr_expect_eq(step(c, &w, g[2]), 0);
    allow(f, 1);
    wait_for(f, &f->started, 2);                        /* exchange 2 took g1 + g2 in one push */
    cr_assert_eq(step(c, &w, g[3]), 1, "exchange 1's values");
    for (int i = 0; i < N; i++) {
        cr_expect_float_eq(w.values[i], g[0][i], 0, "values after g0");
        cr_expect_float_eq(w.lack[i], g[1][i] + g[2][i], 0, "they lack g1 + g2 (in flight)");
    }
    cr_expect_eq(w.n_missing, 2);
    allow(f, 100);
    cr_assert_eq(dg_ps_communicator_flush(c, take, &w), 1);
    for (int i = 0; i < N; i++) {
        cr_expect_float_eq(w.values[i], g[0][i] + g[1][i] + g[2][i] + g[3][i], 1e-6, "every push arrived");
        cr_expect_float_eq(w.lack[i], 0, 0, "and nothing is missing");
    }
    cr_expect_eq(f->started, 3, "g3 went alone after exchange 2: %d exchanges", f->started);
    cr_expect_eq(dg_ps_communicator_flush(c, take, &w), 0, "nothing new");
    dg_ps_communicator_free(c);
    free(f);
}

/* max_merge 1: handing over the next gradient waits for the exchange under way. */
typedef struct { dg_ps_communicator *c; worker *w; const float *g; volatile int returned; } handoff;
static void *hand_over(void *arg) {
    handoff *h = arg;
    step(h->c, h->w, h->g);
    h->returned = 1;
    return NULL;
}

Test(ps_communicator, one_in_flight_waits_for_the_exchange) {
    fake *f = fake_new(0);
    dg_ps_communicator *c = dg_ps_communicator_new(&fake_tr, N, 1, fake_exchange, fake_send, f);
    float g[N] = { 1, 2, 3 };
    worker w = { 0 };
    cr_expect_eq(step(c, &w, g), 0);
    wait_for(f, &f->started, 1);
    handoff h = { c, &w, g, 0 };
    pthread_t t;
    pthread_create(&t, NULL, hand_over, &h);
    usleep(100 * 1000);
    cr_expect_eq(h.returned, 0, "the second hand-over went on while the first exchange was under way");
    allow(f, 100);
    pthread_join(t, NULL);
    cr_expect_eq(h.returned, 1);
    cr_expect_float_eq(w.values[2], 3, 0, "and it got the first exchange's values");
    dg_ps_communicator_flush(c, take, &w);
    dg_ps_communicator_free(c);
    free(f);
}

Test(ps_communicator, a_failed_exchange_is_the_workers_error) {
    fake *f = fake_new(1);
    dg_ps_communicator *c = dg_ps_communicator_new(&fake_tr, N, 20, fake_exchange, fake_send, f);
    float g[N] = { 1, 1, 1 };
    worker w = { 0 };
    allow(f, 100);
    step(c, &w, g);
    wait_for(f, &f->done, 1);
    int rc = dg_ps_communicator_flush(c, take, &w);
    cr_expect_eq(rc, DG_ECOMM);
    cr_expect(strstr(dg_last_error(), "10.0.0.9:7000"), "%s", dg_last_error());
    cr_expect_eq(step(c, &w, g), DG_ECOMM, "and every later hand-over");
    dg_ps_communicator_free(c);
    free(f);
}

/* Posts go out before the exchange of the gradients handed over after them, in order, with their
 * replies handed on; flush waits for them too. */
static void got_reply(void *arg, int rc, const unsigned char *payload, size_t n) {
    float *out = arg;
    if (!rc && n == 4) memcpy(out, payload, 4);
    else *out = -1;
}
Test(ps_communicator, posts_go_before_the_next_exchange) {
    fake *f = fake_new(0);
    dg_ps_communicator *c = dg_ps_communicator_new(&fake_tr, N, 20, fake_exchange, fake_send, f);
    float g[N] = { 1, 1, 1 }, answer[2] = { 0, 0 };
    worker w = { 0 };
    allow(f, 100);
    for (int k = 0; k < 2; k++) {
        unsigned char *msg = malloc(4);
        float v = (float)(k + 3);
        memcpy(msg, &v, 4);
        cr_assert_eq(dg_ps_communicator_post(c, 0, msg, 4, got_reply, &answer[k]), 0);
        cr_assert_eq(step(c, &w, g) >= 0, 1);
        cr_assert_eq(dg_ps_communicator_flush(c, take, &w) >= 0, 1);
    }
    cr_expect_eq(f->posts, 2);
    cr_expect_eq(f->post_order[0], 0, "the first post went before any exchange");
    cr_expect_eq(f->post_order[1], 1, "the second before the second exchange");
    cr_expect_float_eq(answer[0], 6, 0);
    cr_expect_float_eq(answer[1], 8, 0);
    dg_ps_communicator_free(c);
    free(f);
}
