/* samples/housing_ps.c — the parameter-server tutorial's linear regression (13 features -> fc 1,
 * square error, SGD 0.001, batch 8, 30 epochs, "Epoch: X, Batch: Y, loss: Z" every 10 batches) in
 * C, as one program for both roles, run by the launcher:
 *
 *   dgrun --server_num 2 --worker_num 2 build/bin/housing_ps      (2 PSERVER + 2 TRAINER)
 *
 * Alone (no role in the environment) it trains in one process; --batch-size 16 there is the
 * 2-worker job's step over both workers' batches of 8 (worker w of W takes rows [w*B, (w+1)*B) of
 * each group of W*B; every process shuffles with the same seed).
 *
 * Data: --data FILE reads UCI housing's housing.data (whitespace-separated, 14 columns: 13
 * features then the median value); without it a SYNTHETIC set of the same shape is generated
 * (506 rows, 13 features, a planted linear model plus noise; the name says so in the output).
 * Features are scaled as paddle.dataset.uci_housing does ((x - mean) / (max - min)) and the first
 * 80% of the rows train. */
#include "sample_util.h"
#include <errno.h>
#include <math.h>

#define FEATURES 13
#define MAX_ROWS 100000

static const char *const FLAGS[] = { "--data=none (SYNTHETIC rows)", "--epochs=30", "--batch-size=8", "--lr=0.001", "--max-steps=0 (no limit)", "--seed=1", "--async!", "--k-steps=0 (off)",
                                     "--save-params=none", "--threads=1", SU_PROFILE_FLAG, NULL };

/* housing.data: 14 numbers a row; a row of another length or a non-number is an error naming
 * the line */
static int read_housing(const char *path, float *rows, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "error: %s: %s\n", path, strerror(errno)); return 1; }
    char line[4096];
    int ln = 0;
    *n = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        char *p = line, *end;
        int k = 0;
        float v[FEATURES + 2];
        while (k < FEATURES + 2) {
            double x = strtod(p, &end);
            if (end == p) break;
            v[k++] = (float)x;
            p = end;
        }
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
        if (k == 0 && !*p) continue;   /* a blank line */
        if (k != FEATURES + 1 || *p) {
            fprintf(stderr, "error: %s:%d: expected %d numbers (13 features, the value), got %d%s\n", path, ln, FEATURES + 1, k,
                    *p ? " and text" : "");
            fclose(f);
            return 1;
        }
        if (*n == MAX_ROWS) { fprintf(stderr, "error: %s: more than %d rows\n", path, MAX_ROWS); fclose(f); return 1; }
        memcpy(rows + (size_t)*n * (FEATURES + 1), v, sizeof(float) * (FEATURES + 1));
        (*n)++;
    }
    fclose(f);
    if (*n < 2) { fprintf(stderr, "error: %s: %d rows\n", path, *n); return 1; }
    return 0;
}

/* SYNTHETIC: features uniform in ranges like UCI's, value = planted weights . x + N(0, 2) */
static void synthetic_housing(float *rows, int n) {
    dg_manual_seed(506);
    dg_scope *s = dg_scope_begin();
    dg_tensor *u = dg_uniform(DG_SHAPE(n, FEATURES), 0, 1, DG_F32), *e = dg_randn(DG_SHAPE(n), DG_F32);
    float uu[506 * FEATURES], ee[506];
    dg_to_host(u, uu, sizeof uu);
    dg_to_host(e, ee, sizeof ee);
    dg_scope_end(s);
    static const float scale[FEATURES] = { 90, 100, 28, 1, 0.5f, 5, 100, 11, 24, 520, 10, 400, 37 };
    static const float w[FEATURES] = { -0.1f, 0.05f, 0.02f, 2.7f, -17, 3.8f, 0.0f, -1.5f, 0.3f, -0.01f, -0.95f, 0.01f, -0.52f };
    for (int i = 0; i < n; i++) {
        float y = 36;
        for (int j = 0; j < FEATURES; j++) {
            float x = uu[i * FEATURES + j] * scale[j];
            rows[i * (FEATURES + 1) + j] = x;
            y += w[j] * x;
        }
        rows[i * (FEATURES + 1) + FEATURES] = y + 2 * ee[i];
    }
}

/* the mean squared error of the model on rows [n_train, n) */
static double held_out_loss(dg_layer *fc, const float *rows, int n, int n_train) {
    int nt = n - n_train;
    if (nt <= 0) return 0;
    dg_scope *s = dg_scope_begin();
    float *x = malloc(sizeof(float) * (size_t)nt * FEATURES), *y = malloc(sizeof(float) * (size_t)nt);
    double v = NAN;
    if (x && y) {
        for (int i = 0; i < nt; i++) {
            memcpy(x + (size_t)i * FEATURES, rows + (size_t)(n_train + i) * (FEATURES + 1), sizeof(float) * FEATURES);
            y[i] = rows[(size_t)(n_train + i) * (FEATURES + 1) + FEATURES];
        }
        dg_no_grad_begin();
        dg_tensor *l = dg_mse_loss(dg_forward(fc, dg_from_data(DG_SHAPE(nt, FEATURES), DG_F32, x)), dg_from_data(DG_SHAPE(nt, 1), DG_F32, y));
        dg_no_grad_end();
        if (l) v = dg_item(l);
    }
    free(x);
    free(y);
    dg_scope_end(s);
    return v;
}

int main(int argc, char **argv) {
    su_args(argc, argv, FLAGS);
    const int64_t k_steps = su_flag_count(argc, argv, "--k-steps", 0);   /* geo mode's; checked in every mode */
    if (k_steps > 1000000) { fprintf(stderr, "%s: error: argument --k-steps: at most 1000000\n", argv[0]); return 2; }
    const char *data = su_flag(argc, argv, "--data", NULL), *save = su_flag(argc, argv, "--save-params", NULL);
    int64_t epochs = su_flag_count(argc, argv, "--epochs", 30), batch = su_flag_count(argc, argv, "--batch-size", 8);
    int64_t max_steps = su_flag_count(argc, argv, "--max-steps", 0), seed = su_flag_count(argc, argv, "--seed", 1);
    double lr = su_flag_num(argc, argv, "--lr", 0.001);
    if (batch < 1) { fprintf(stderr, "%s: error: argument --batch-size: must be >= 1\n", argv[0]); return 2; }
    if (!(lr >= 0)) { fprintf(stderr, "%s: error: argument --lr: must be >= 0\n", argv[0]); return 2; }
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = (int)su_flag_num(argc, argv, "--threads", 1);
    if (dg_init(&ip) != 0) return su_die("init");
    if (su_profile_start(argc, argv)) return su_die("--profile");

    /* the role: a parameter-server job when the launcher (or the tutorial's variables) said so */
    bool ps = getenv("TRAINING_ROLE") || getenv("PADDLE_TRAINING_ROLE");
    if (ps) {
        dg_fleet_strategy st = dg_fleet_default_strategy();
        st.k_steps = (int)k_steps;
        st.sync_mode = !su_has(argc, argv, "--async") && st.k_steps == 0;
        if (dg_fleet_init(false, &st) != 0) return su_die("fleet init");
        if (dg_fleet_is_server()) {
            printf("server %d of %d at %s\n", dg_fleet_server_index(), dg_fleet_server_num(),
                   dg_fleet_server_endpoint(dg_fleet_server_index()));
            fflush(stdout);
            if (dg_fleet_init_server(NULL) != 0 || dg_fleet_run_server() != 0) return su_die("server");
            printf("server %d: every worker stopped\n", dg_fleet_server_index());
            dg_fleet_shutdown();
            dg_shutdown();
            return 0;
        }
        if (dg_fleet_init_worker() != 0) return su_die("init_worker");
    }
    int worker = ps ? dg_fleet_worker_index() : 0, workers = ps ? dg_fleet_worker_num() : 1;

    static float rows[MAX_ROWS * (FEATURES + 1)];
    int n = 506;
    if (data) {
        if (read_housing(data, rows, &n)) return 1;
    } else {
        synthetic_housing(rows, n);
    }
    /* uci_housing's scaling, over all rows, then its 80 / 20 split */
    for (int j = 0; j < FEATURES; j++) {
        double mx = -INFINITY, mn = INFINITY, sum = 0;
        for (int i = 0; i < n; i++) {
            double x = rows[i * (FEATURES + 1) + j];
            mx = x > mx ? x : mx, mn = x < mn ? x : mn, sum += x;
        }
        double avg = sum / n, range = mx - mn > 0 ? mx - mn : 1;
        for (int i = 0; i < n; i++) rows[i * (FEATURES + 1) + j] = (float)((rows[i * (FEATURES + 1) + j] - avg) / range);
    }
    int n_train = n * 8 / 10;
    printf("%s housing data: %d rows, %d train; worker %d of %d, batch %lld, %s\n", data ? data : "SYNTHETIC", n, n_train,
           worker, workers, (long long)batch, ps ? (k_steps > 0 ? "geo" : su_has(argc, argv, "--async") ? "async" : "sync") : "one process");

    dg_manual_seed((uint64_t)seed);   /* the same initial weights in every process */
    dg_layer *fc = dg_nn_linear(FEATURES, 1);
    int np;
    dg_tensor **params = dg_layer_parameters(fc, &np);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = lr;
    dg_optimizer *opt = dg_sgd(params, np, sp);
    free(params);
    if (!fc || !opt) return su_die("model");
    double test_before = held_out_loss(fc, rows, n, n_train);   /* the initial weights (async: others may be ahead) */
    if (ps && !(opt = dg_fleet_distributed_optimizer(opt))) return su_die("distributed_optimizer");

    int64_t group = batch * workers, step = 0;
    int *order = malloc(sizeof(int) * (size_t)n_train);
    uint64_t shuffle = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    bool done = false;
    double epoch_loss = 0, first_epoch_loss = -1;
    for (int64_t epoch = 0; epoch < epochs && !done; epoch++) {
        double sum = 0;
        int64_t batches = 0;
        for (int i = 0; i < n_train; i++) order[i] = i;
        for (int i = n_train - 1; i > 0; i--) {   /* the same permutation in every process */
            shuffle ^= shuffle << 13, shuffle ^= shuffle >> 7, shuffle ^= shuffle << 17;
            int j = (int)(shuffle % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int64_t b = 0; (b + 1) * group <= n_train && !done; b++) {
            float x[4096 * FEATURES], y[4096];
            if (batch > 4096) { fprintf(stderr, "%s: error: argument --batch-size: at most 4096\n", argv[0]); return 2; }
            for (int64_t k = 0; k < batch; k++) {
                const float *r = rows + (size_t)order[b * group + worker * batch + k] * (FEATURES + 1);
                memcpy(x + k * FEATURES, r, sizeof(float) * FEATURES);
                y[k] = r[FEATURES];
            }
            dg_scope *s = dg_scope_begin();
            dg_tensor *pred = dg_forward(fc, dg_from_data(DG_SHAPE(batch, FEATURES), DG_F32, x));
            dg_tensor *loss = dg_mse_loss(pred, dg_from_data(DG_SHAPE(batch, 1), DG_F32, y));
            if (!loss || dg_backward(loss) || dg_optimizer_step(opt)) return su_die("step");
            dg_optimizer_clear_grad(opt);
            double l = dg_item(loss);
            sum += l;
            batches++;
            if ((b + 1) % 10 == 0) printf("Epoch: %lld, Batch: %lld, loss: %.6f\n", (long long)epoch, (long long)b, l);
            dg_scope_end(s);
            if (max_steps && ++step >= max_steps) done = true;
        }
        epoch_loss = batches ? sum / (double)batches : 0;
        if (first_epoch_loss < 0) first_epoch_loss = epoch_loss;
    }
    free(order);
    /* this worker's batches' mean loss in the first and the last epoch, and the squared error on
     * the held-out 20% before and after training */
    double test_loss = held_out_loss(fc, rows, n, n_train);
    printf("train loss: first epoch %.4f, last epoch %.4f; test loss %.4f before training, %.4f after (%d held-out rows)\n",
           first_epoch_loss, epoch_loss, test_before, test_loss, n - n_train);
    /* the final parameters (each process holds the servers' values after its last step) */
    if (save && (!ps || worker == 0) && dg_layer_save(fc, save) != 0) return su_die("save");
    if (ps && dg_fleet_stop_worker() != 0) return su_die("stop_worker");
    dg_optimizer_free(opt);
    dg_layer_free(fc);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
