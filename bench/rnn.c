/* bench/rnn.c — recurrent workloads against PyTorch 1.13 (bench/rnn_torch.py, the same in
 * torch), one workload per process so each peak RSS is its own:
 *     bench_rnn <workload> <threads>
 * prints `<workload>_t<threads> <figure> <unit> <peak RSS MB> MB`:
 *   lstm650   an LSTM layer (650 -> 650) forward + backward on [seq 35, batch 20]: iterations/s
 *   lstm256   an LSTM layer (256 -> 256) forward + backward on [seq 100, batch 64]: iterations/s
 *   wlm       word_language_model's training step (LSTM, 2 layers of 200, emsize 200, dropout
 *             0.2, vocabulary 11993 as the fortunes corpus, batch 20, bptt 35, clip 0.25, SGD):
 *             tokens/s
 * bench/run_rnn.sh alternates the two over rounds and prints medians. */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "../samples/word_language_model.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static double peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}
static void die(const char *what) {
    fprintf(stderr, "bench_rnn: %s: %s\n", what, dg_last_error());
    exit(1);
}

/* iterations/s of forward + backward of sum(output) through one LSTM layer */
static double lstm_layer(int64_t T, int64_t N, int64_t H, double min_s) {
    dg_layer *l = dg_nn_rnn(DG_RNN_LSTM, H, H, dg_nn_rnn_default_params());
    dg_tensor *x = dg_randn(DG_SHAPE(T, N, H), DG_F32);
    dg_set_requires_grad(x, true);
    if (!l || !x) die("lstm setup");
    int reps = 0;
    double t0 = 0;
    for (int i = 0;; i++) {
        if (i == 2) t0 = now();   /* two warm-up iterations */
        dg_scope *s = dg_scope_begin();
        dg_tensor *y = dg_forward(l, x);
        if (!y || dg_backward(dg_sum_all(y))) die("lstm step");
        dg_scope_end(s);
        dg_layer_clear_gradients(l);
        dg_clear_grad(x);
        if (i >= 2 && ++reps && now() - t0 >= min_s) break;
    }
    double r = reps / (now() - t0);
    dg_tensor_free(x);
    dg_layer_free(l);
    return r;
}

/* tokens/s of word_language_model's training step on random ids */
static double wlm(double min_s) {
    const int64_t ntok = 11993, bsz = 20, bptt = 35;
    dg_layer *m = wlm_model_new(DG_RNN_LSTM, ntok, 200, 200, 2, 0.2, false);
    if (!m) die("model");
    int np;
    dg_tensor **params = dg_layer_parameters(m, &np);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 20;
    dg_optimizer *opt = dg_sgd(params, np, sp);
    dg_tensor *data = dg_randint(0, ntok, DG_SHAPE(bptt, bsz)), *target = dg_randint(0, ntok, DG_SHAPE(bptt * bsz));
    dg_tensor *h = NULL, *c = NULL;
    dg_layer_train(m);
    int reps = 0;
    double t0 = 0;
    for (int i = 0;; i++) {
        if (i == 2) t0 = now();
        dg_scope *s = dg_scope_begin();
        dg_tensor *hn, *cn;
        dg_layer_clear_gradients(m);
        dg_tensor *out = wlm_forward(m, data, h, c, &hn, &cn);
        dg_tensor *loss = out ? dg_nll_loss(out, target, DG_REDUCE_MEAN, -100) : NULL;
        if (!loss || dg_backward(loss) || dg_clip_grad_norm(params, np, 0.25) < 0 || dg_optimizer_step(opt)) die("wlm step");
        if (h) dg_tensor_free(h);
        if (c) dg_tensor_free(c);
        h = dg_keep_in_parent(dg_detach(hn));
        c = dg_keep_in_parent(dg_detach(cn));
        dg_scope_end(s);
        if (i >= 2 && ++reps && now() - t0 >= min_s) break;
    }
    double r = (double)(reps * bptt * bsz) / (now() - t0);
    dg_tensor_free(h);
    dg_tensor_free(c);
    dg_tensor_free(data);
    dg_tensor_free(target);
    free(params);
    dg_optimizer_free(opt);
    dg_layer_free(m);
    return r;
}

int main(int argc, char **argv) {
    char *end = NULL;
    long threads = argc == 3 ? strtol(argv[2], &end, 10) : 0;
    bool known = argc == 3 && (!strcmp(argv[1], "lstm650") || !strcmp(argv[1], "lstm256") || !strcmp(argv[1], "wlm"));
    if (!known || !end || *end || threads < 1) {
        fprintf(stderr, "usage: bench_rnn lstm650|lstm256|wlm THREADS\nbench_rnn: error: a workload and a thread count >= 1\n");
        return 2;
    }
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = (int)threads;
    ip.seed = 1;
    ip.device = "cpu";
    if (dg_init(&ip)) die("init");
    const char *w = argv[1];
    double v;
    const char *unit = "it/s";
    if (!strcmp(w, "lstm650")) v = lstm_layer(35, 20, 650, 3.0);
    else if (!strcmp(w, "lstm256")) v = lstm_layer(100, 64, 256, 3.0);
    else { v = wlm(6.0); unit = "tok/s"; }
    printf("%s_t%s %.2f %s %.0f MB\n", w, argv[2], v, unit, peak_mb());
    if (getenv("BENCH_RNN_MEM")) {   /* where the peak comes from: the tensors' own peak and what the cache holds */
        dg_memory_stats ms;
        if (!dg_memory_stats_get(dg_cpu(), &ms))
            fprintf(stderr, "tensors: peak %.1f MB, now %.1f MB; reserved %.1f MB\n", ms.peak_allocated / 1048576.0,
                    ms.allocated / 1048576.0, ms.reserved / 1048576.0);
    }
    dg_shutdown();
    return 0;
}
