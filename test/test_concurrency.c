/* test/test_concurrency.c — what README's "Threads" section promises, exercised from several
 * threads at once: threads training models of their own (each with its own generator) get
 * exactly what one thread gets running the same programs in turn; threads sharing one model for
 * inference (eval mode, no grad) get the results of a lone thread; a caller-owned tensor may be
 * freed on another thread than the one that made it; errors and scopes belong to their thread. */
#include "test_util.h"
#include <pthread.h>

static pthread_barrier_t g_go;

/* ---- training, one model per thread ---- */
#define STEPS 12
typedef struct {
    uint64_t seed;
    bool wait;               /* at the barrier: run concurrently with the other thread */
    float loss[STEPS];
    float params[2048];      /* the first floats of the state after training */
    int nparams;
    char err[256];
} trainer;

static void *train(void *arg) {
    trainer *tr = arg;
    dg_generator *g = dg_generator_new(tr->seed);
    dg_generator_use(g);   /* this thread's initialisation, data and dropout masks */
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.padding = 1;
    dg_layer *net = dg_nn_sequential(7, dg_nn_conv2d(3, 16, 3, cp),
                                     dg_nn_batch_norm2d(16, dg_nn_batch_norm_default_params()), dg_nn_relu(),
                                     dg_nn_max_pool2d(2, dg_nn_pool2d_default_params()), dg_nn_flatten(1, -1),
                                     dg_nn_dropout(0.2), dg_nn_linear(16 * 8 * 8, 10));
    int n;
    dg_tensor **p = net ? dg_layer_parameters(net, &n) : NULL;
    dg_adam_params ap = dg_adam_default_params();
    ap.lr = 1e-2;
    dg_optimizer *opt = p ? dg_adam(p, n, ap) : NULL;
    free(p);
    /* one batch learnt by heart: the loss must fall */
    dg_scope *data = dg_scope_begin();
    dg_tensor *x = dg_keep(dg_randn(DG_SHAPE(8, 3, 16, 16), DG_F32));
    dg_tensor *y = dg_keep(dg_cast(dg_mul_scalar(dg_rand(DG_SHAPE(8), DG_F32), 9.99), DG_I64));
    dg_scope_end(data);
    if (tr->wait) pthread_barrier_wait(&g_go);
    for (int step = 0; opt && step < STEPS; step++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), y);
        if (!loss || dg_backward(loss) || dg_optimizer_step(opt)) { dg_scope_end(s); break; }
        dg_optimizer_clear_grad(opt);
        tr->loss[step] = (float)dg_item(loss);
        dg_scope_end(s);
    }
    snprintf(tr->err, sizeof tr->err, "%s", dg_last_error());
    if (net) {
        dg_named_tensor *sd = dg_layer_state_dict(net, &n);
        tr->nparams = 0;
        for (int i = 0; i < n && tr->nparams < 2048; i++) {
            if (dg_dtype_of(sd[i].tensor) != DG_F32) continue;
            const float *d = dg_data(sd[i].tensor);
            for (int64_t k = 0; k < dg_numel(sd[i].tensor) && tr->nparams < 2048; k++) tr->params[tr->nparams++] = d[k];
        }
        free(sd);
    }
    dg_tensor_free(x);
    dg_tensor_free(y);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_generator_use(NULL);
    dg_generator_free(g);
    return NULL;
}

Test(concurrency, threads_training_their_own_models_get_what_one_thread_gets, .timeout = 120) {
    dg_set_num_threads(1);   /* the same kernel partitioning in both runs; README asks for it anyway */
    size_t live = dg_live_tensors();
    static trainer seq[2], par[2];
    for (int t = 0; t < 2; t++) {
        seq[t].seed = par[t].seed = 100 + (uint64_t)t;
        par[t].wait = true;
        train(&seq[t]);
        cr_assert_str_empty(seq[t].err, "%s", seq[t].err);
    }
    cr_assert_neq(seq[0].loss[0], seq[1].loss[0], "two seeds, two different runs");
    pthread_barrier_init(&g_go, NULL, 2);
    pthread_t th[2];
    for (int t = 0; t < 2; t++) cr_assert_eq(pthread_create(&th[t], NULL, train, &par[t]), 0);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&g_go);
    for (int t = 0; t < 2; t++) {
        cr_assert_str_empty(par[t].err, "thread %d: %s", t, par[t].err);
        cr_assert_eq(par[t].nparams, seq[t].nparams);
        for (int k = 0; k < STEPS; k++)
            cr_assert_eq(par[t].loss[k], seq[t].loss[k], "model %d step %d: loss %.9g concurrently, %.9g alone", t, k,
                         par[t].loss[k], seq[t].loss[k]);
        cr_assert(memcmp(par[t].params, seq[t].params, sizeof(float) * (size_t)seq[t].nparams) == 0,
                  "model %d: trained parameters differ", t);
    }
    cr_assert_lt(seq[0].loss[STEPS - 1], seq[0].loss[0], "it trains");
    cr_assert_eq(dg_live_tensors(), live, "every thread's tensors are gone");
}

/* ---- inference, one model shared ---- */
#define RUNS 4
typedef struct {
    dg_layer *net;
    dg_tensor *x[RUNS];
    float out[RUNS][2 * 10];
    char err[256];
} reader;

static void *infer(void *arg) {
    reader *r = arg;
    pthread_barrier_wait(&g_go);
    dg_no_grad_begin();   /* per thread, like every other mode */
    for (int i = 0; i < RUNS; i++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *y = dg_forward(r->net, r->x[i]);
        if (y) dg_to_host(y, r->out[i], sizeof r->out[i]);
        dg_scope_end(s);
        if (!y) break;
    }
    dg_no_grad_end();
    snprintf(r->err, sizeof r->err, "%s", dg_last_error());
    return NULL;
}

Test(concurrency, threads_sharing_a_model_for_inference_get_what_one_thread_gets, .timeout = 120) {
    dg_manual_seed(5);
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 10;
    dg_layer *net = dg_resnet18(rp);   /* folded Conv+BN in eval */
    cr_assert_not_null(net, "%s", dg_last_error());
    /* running statistics other than the initial ones, so batch norm's folding matters */
    dg_scope *s = dg_scope_begin();
    cr_assert_not_null(dg_forward(net, dg_randn(DG_SHAPE(4, 3, 32, 32), DG_F32)), "%s", dg_last_error());
    dg_scope_end(s);
    dg_layer_eval(net);
    static reader rd[3];
    for (int t = 0; t < 3; t++) {
        rd[t].net = net;
        for (int i = 0; i < RUNS; i++) rd[t].x[i] = dg_randn(DG_SHAPE(2, 3, 32, 32), DG_F32);
    }
    /* alone first: each reader's inputs on this thread */
    static float alone[3][RUNS][2 * 10];
    dg_no_grad_begin();
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < RUNS; i++) {
            dg_scope *s2 = dg_scope_begin();
            dg_tensor *y = dg_forward(net, rd[t].x[i]);
            cr_assert_not_null(y, "%s", dg_last_error());
            dg_to_host(y, alone[t][i], sizeof alone[t][i]);
            dg_scope_end(s2);
        }
    dg_no_grad_end();
    pthread_barrier_init(&g_go, NULL, 3);
    pthread_t th[3];
    for (int t = 0; t < 3; t++) cr_assert_eq(pthread_create(&th[t], NULL, infer, &rd[t]), 0);
    for (int t = 0; t < 3; t++) pthread_join(th[t], NULL);
    pthread_barrier_destroy(&g_go);
    for (int t = 0; t < 3; t++) {
        cr_assert_str_empty(rd[t].err, "reader %d: %s", t, rd[t].err);
        for (int i = 0; i < RUNS; i++) {
            /* the thread count may differ between the runs (automatic): a GEMM may round differently */
            for (int k = 0; k < 20; k++)
                cr_assert(fabsf(rd[t].out[i][k] - alone[t][i][k]) <= 1e-4f * (1 + fabsf(alone[t][i][k])),
                          "reader %d run %d logit %d: %.7g shared, %.7g alone", t, i, k, rd[t].out[i][k], alone[t][i][k]);
        }
        for (int i = 0; i < RUNS; i++) dg_tensor_free(rd[t].x[i]);
    }
    dg_layer_free(net);
}

/* ---- tensors, errors and scopes across threads ---- */
typedef struct { dg_tensor *t[4]; bool scoped; char err[256]; int status; } handoff;

static void *make_tensors(void *arg) {
    handoff *h = arg;
    h->t[0] = dg_ones(DG_SHAPE(8), DG_F32);                 /* a block of the small-block cache */
    h->t[1] = dg_randn(DG_SHAPE(256, 512), DG_F32);         /* 512 KB: the large-block pool */
    h->t[2] = dg_reshape(h->t[1], DG_SHAPE(512, 256));       /* a view sharing that storage */
    h->t[3] = dg_zeros(DG_SHAPE(3), DG_F64);
    return NULL;
}
static void *free_tensors(void *arg) {
    handoff *h = arg;
    for (int i = 0; i < 4; i++) dg_tensor_free(h->t[i]);
    return NULL;
}
static void *fail_here(void *arg) {
    handoff *h = arg;
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(4, 5), DG_F32);
    dg_tensor *c = dg_matmul(a, b);   /* inner dims 3 vs 4 */
    dg_tensor_free(c);
    snprintf(h->err, sizeof h->err, "%s", dg_last_error());
    h->status = dg_last_status();
    dg_tensor_free(a);
    dg_tensor_free(b);
    return NULL;
}

Test(concurrency, a_caller_owned_tensor_may_be_freed_on_another_thread) {
    size_t live = dg_live_tensors();
    for (int round = 0; round < 20; round++) {
        handoff h = {0};
        pthread_t a, b;
        cr_assert_eq(pthread_create(&a, NULL, make_tensors, &h), 0);
        pthread_join(a, NULL);
        for (int i = 0; i < 4; i++) cr_assert_not_null(h.t[i], "%s", dg_last_error());
        cr_assert_eq(dg_get(h.t[2], (int64_t[]){ 511, 255 }), dg_get(h.t[1], (int64_t[]){ 255, 511 }));
        cr_assert_eq(pthread_create(&b, NULL, free_tensors, &h), 0);   /* the maker has exited by now */
        pthread_join(b, NULL);
    }
    cr_assert_eq(dg_live_tensors(), live);
}

Test(concurrency, errors_and_scopes_belong_to_their_thread) {
    dg_scope *mine = dg_scope_begin();
    handoff h = {0};
    pthread_t a;
    cr_assert_eq(pthread_create(&a, NULL, fail_here, &h), 0);
    pthread_join(a, NULL);
    cr_assert(strstr(h.err, "matmul"), "the failing thread sees its message: %s", h.err);
    cr_assert_eq(h.status, DG_EINVAL);
    cr_assert_str_empty(dg_last_error(), "this thread has no error: %s", dg_last_error());
    cr_assert_eq(dg_last_status(), 0);
    /* a tensor made on another thread while this thread has a scope open is not this scope's */
    cr_assert_eq(pthread_create(&a, NULL, make_tensors, &h), 0);
    pthread_join(a, NULL);
    size_t live = dg_live_tensors();
    dg_scope_end(mine);
    cr_assert_eq(dg_live_tensors(), live, "ending this thread's scope freed another thread's tensors");
    for (int i = 0; i < 4; i++) dg_tensor_free(h.t[i]);
}
