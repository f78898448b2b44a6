/* samples/ctr_dnn.c — the parameter-server tutorial's CTR-DNN in C: 26 categorical slots hashed
 * to sparse_feature_dim ids, each slot's embedding (size 10, one table shared by the slots, as
 * PaddleRec's "SparseFeatFactors") sum-pooled, concatenated with the 13 continuous features, FC
 * 400-400-400 with ReLU, a 2-way softmax, cross-entropy, and Paddle's AUC (4096 thresholds:
 * batch and global). Run as a parameter-server job:
 *
 *   dgrun --server_num 2 --worker_num 2 build/bin/ctr_dnn [--async | --k-steps K (geo)]
 *
 * or alone (no role in the environment) with the table in this process.
 *
 * Data: --train / --test take Criteo files (tab-separated: label, 13 integers, 26 hex
 * categoricals, empty = missing). Preprocessing is PaddleRec's: integer i becomes
 * (x - min_i) / (max_i - min_i) with its fixed tables (missing: 0), categorical slot k's string s
 * becomes FNV-1a("<k+14>" s) % sparse_feature_dim (PaddleRec takes Python's hash, which changes
 * between processes; FNV is stable). Without files a SYNTHETIC Criteo-like set is generated: a
 * planted logistic model on 8 of the 26 slots and 2 integers, whose own AUC on the test set is
 * printed beside the trained model's. Worker w of W trains on the batches b with b % W == w.
 * Defaults: SGD lr 0.5, 3 epochs, batch 100 (the tutorial's batch; its lr 1e-4 is for the real
 * data: pass --lr 1e-4 with the Kaggle files). */
#include "sample_util.h"
#include <errno.h>
#include <math.h>

#define INTS 13
#define CATS 26
#define MAX_ROWS 2000000

static const char *const FLAGS[] = { "--train=none (synthetic rows)", "--test=none", "--synthetic-rows=50000", "--epochs=3", "--batch-size=100", "--lr=0.5", "--optimizer=sgd",
                                     "--embedding-size=10", "--sparse-feature-dim=1000001", "--max-steps=0 (no limit)", "--seed=1", "--async!", "--k-steps=0 (off)", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)",
                                     SU_PROFILE_FLAG, NULL };

/* PaddleRec's criteo reader's tables */
static const double CONT_MIN[INTS] = { 0, -3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
static const double CONT_DIFF[INTS] = { 20, 603, 100, 50, 64000, 500, 100, 50, 500, 10, 10, 10, 50 };

typedef struct { int n; float *dense; int64_t *ids; int64_t *label; double *planted; } ctr_data;

static uint64_t fnv(const char *a, const char *b, size_t nb) {
    uint64_t h = 1469598103934665603ull;
    for (; *a; a++) h = (h ^ (unsigned char)*a) * 1099511628211ull;
    for (size_t i = 0; i < nb; i++) h = (h ^ (unsigned char)b[i]) * 1099511628211ull;
    return h;
}

static int cmp_id(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}
/* How many distinct values ids[0..n) holds (sorts them). */
static int64_t count_unique(int64_t *ids, int64_t n) {
    qsort(ids, (size_t)n, sizeof *ids, cmp_id);
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++) u += i == 0 || ids[i] != ids[i - 1];
    return u;
}

static bool data_alloc(ctr_data *d, int n) {
    d->n = 0;
    d->dense = malloc(sizeof(float) * (size_t)n * INTS);
    d->ids = malloc(sizeof(int64_t) * (size_t)n * CATS);
    d->label = malloc(sizeof(int64_t) * (size_t)n);
    d->planted = malloc(sizeof(double) * (size_t)n);
    return d->dense && d->ids && d->label && d->planted;
}
static void data_free(ctr_data *d) { free(d->dense); free(d->ids); free(d->label); free(d->planted); }

/* One Criteo line into row r; an error names the file, the line and the field. */
static int parse_line(const char *path, int ln, char *line, ctr_data *d, int64_t dim) {
    int r = d->n;
    char *f[1 + INTS + CATS];
    int nf = 0;
    char *p = line;
    size_t len = strcspn(p, "\r\n");
    p[len] = 0;
    for (;;) {
        if (nf == 1 + INTS + CATS) {
            fprintf(stderr, "error: %s:%d: more than %d tab-separated fields\n", path, ln, 1 + INTS + CATS);
            return 1;
        }
        f[nf++] = p;
        char *t = strchr(p, '\t');
        if (!t) break;
        *t = 0;
        p = t + 1;
    }
    if (nf != 1 + INTS + CATS) {
        fprintf(stderr, "error: %s:%d: %d fields; Criteo lines have %d (label, 13 integers, 26 categoricals)\n", path, ln, nf,
                1 + INTS + CATS);
        return 1;
    }
    if (strcmp(f[0], "0") != 0 && strcmp(f[0], "1") != 0) {
        fprintf(stderr, "error: %s:%d: label '%s' is not 0 or 1\n", path, ln, f[0]);
        return 1;
    }
    d->label[r] = f[0][0] == '1';
    for (int i = 0; i < INTS; i++) {
        double x = 0;
        if (*f[1 + i]) {
            char *end;
            x = strtod(f[1 + i], &end);
            if (*end || !isfinite(x)) {
                fprintf(stderr, "error: %s:%d: integer feature I%d '%s' is not a number\n", path, ln, i + 1, f[1 + i]);
                return 1;
            }
            x = (x - CONT_MIN[i]) / CONT_DIFF[i];
        }
        d->dense[(size_t)r * INTS + i] = (float)x;
    }
    for (int k = 0; k < CATS; k++) {
        char slot[8];
        snprintf(slot, sizeof slot, "%d", k + 14);
        const char *s = f[1 + INTS + k];
        d->ids[(size_t)r * CATS + k] = (int64_t)(fnv(slot, s, strlen(s)) % (uint64_t)dim);
    }
    d->planted[r] = NAN;
    d->n++;
    return 0;
}

static int read_criteo(const char *path, ctr_data *d, int64_t dim) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "error: %s: %s\n", path, strerror(errno)); return 1; }
    if (!data_alloc(d, MAX_ROWS)) { fclose(f); fprintf(stderr, "error: out of memory\n"); return 1; }
    static char line[1 << 16];
    int ln = 0;
    while (fgets(line, sizeof line, f)) {
        ln++;
        if (!strchr(line, '\n') && !feof(f)) { fprintf(stderr, "error: %s:%d: line longer than %zu bytes\n", path, ln, sizeof line); fclose(f); return 1; }
        if (line[0] == '\n') continue;
        if (d->n == MAX_ROWS) { fprintf(stderr, "error: %s: more than %d lines\n", path, MAX_ROWS); fclose(f); return 1; }
        if (parse_line(path, ln, line, d, dim)) { fclose(f); return 1; }
    }
    fclose(f);
    if (!d->n) { fprintf(stderr, "error: %s: no examples\n", path); return 1; }
    return 0;
}

/* SYNTHETIC: categorical k takes value v in [0, 100) (small v more often); slots 0..7 carry a
 * planted weight per value, integers I1 and I2 a planted slope; label ~ Bernoulli(sigmoid(z)).
 * The rows go through the same text-free preprocessing as files: the id of (k, v) is the hash of
 * the hex string of v. */
static void synthetic(ctr_data *d, int n, uint64_t seed, int64_t dim) {
    data_alloc(d, n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 12345;
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, (double)(x >> 11) / 9007199254740992.0)
    static double w[CATS][100];
    uint64_t y = 0xC0FFEEull;
    for (int k = 0; k < CATS; k++)
        for (int v = 0; v < 100; v++) {
            y ^= y << 13, y ^= y >> 7, y ^= y << 17;
            double u1 = (double)(y >> 11) / 9007199254740992.0 + 1e-12;
            y ^= y << 13, y ^= y >> 7, y ^= y << 17;
            double u2 = (double)(y >> 11) / 9007199254740992.0;
            w[k][v] = k < 8 ? 0.9 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2) : 0;
        }
    for (int r = 0; r < n; r++) {
        double z = -0.4;
        for (int i = 0; i < INTS; i++) {
            double raw = floor(RND() * CONT_DIFF[i] * 0.5) + CONT_MIN[i];
            double xs = (raw - CONT_MIN[i]) / CONT_DIFF[i];
            d->dense[(size_t)r * INTS + i] = (float)xs;
            if (i < 2) z += (i ? -2.5 : 3.0) * (xs - 0.25);
        }
        for (int k = 0; k < CATS; k++) {
            int v = (int)(100 * RND() * RND());
            char hex[16], slot[8];
            snprintf(hex, sizeof hex, "%08x", (unsigned)(v * 2654435761u));
            snprintf(slot, sizeof slot, "%d", k + 14);
            d->ids[(size_t)r * CATS + k] = (int64_t)(fnv(slot, hex, strlen(hex)) % (uint64_t)dim);
            z += w[k][v];
        }
        d->planted[r] = 1 / (1 + exp(-z));
        d->label[r] = RND() < d->planted[r];
    }
#undef RND
    d->n = n;
}

/* Paddle's auc op: predictions of class 1 binned into 4096 buckets, positives and negatives
 * counted per bucket, the area by trapezoids from the highest bucket down. */
#define AUC_BUCKETS 4096
typedef struct { double pos[AUC_BUCKETS], neg[AUC_BUCKETS]; } auc_stat;
static void auc_add(auc_stat *a, double p, int64_t label) {
    int b = (int)(p * (AUC_BUCKETS - 1));
    b = b < 0 ? 0 : b >= AUC_BUCKETS ? AUC_BUCKETS - 1 : b;
    if (label) a->pos[b] += 1; else a->neg[b] += 1;
}
static double auc_value(const auc_stat *a) {
    double tp = 0, fp = 0, area = 0;
    for (int b = AUC_BUCKETS - 1; b >= 0; b--) {
        double tp2 = tp + a->pos[b], fp2 = fp + a->neg[b];
        area += (fp2 - fp) * (tp + tp2) / 2;
        tp = tp2, fp = fp2;
    }
    return tp > 0 && fp > 0 ? area / (tp * fp) : 0.5;
}

typedef struct { dg_layer *emb, *fc[4]; int64_t esize; } ctr_net;

/* class-1 probabilities and the loss of rows [r0, r0 + b) */
static dg_tensor *forward(ctr_net *m, const ctr_data *d, int r0, int b, dg_tensor **prob) {
    dg_tensor *ids = dg_from_data(DG_SHAPE(b, CATS), DG_I64, d->ids + (size_t)r0 * CATS);
    dg_tensor *e = dg_forward(m->emb, ids);   /* [b, 26, size]: one id per slot, so the sum-pool is the row */
    dg_tensor *x = e ? dg_concat((dg_tensor *[]){ dg_reshape(e, DG_SHAPE(b, CATS * m->esize)),
                                                  dg_from_data(DG_SHAPE(b, INTS), DG_F32, d->dense + (size_t)r0 * INTS) }, 2, 1) : NULL;
    for (int i = 0; i < 3 && x; i++) x = dg_relu(dg_forward(m->fc[i], x));
    dg_tensor *logits = x ? dg_forward(m->fc[3], x) : NULL;
    if (!logits) return NULL;
    *prob = dg_slice(dg_softmax(logits, 1), 1, 1, 2, 1);
    return dg_cross_entropy(logits, dg_from_data(DG_SHAPE(b), DG_I64, d->label + r0));
}

int main(int argc, char **argv) {
    su_args(argc, argv, FLAGS);
    const int64_t k_steps = su_flag_count(argc, argv, "--k-steps", 0);   /* geo mode's; checked in every mode */
    if (k_steps > 1000000) { fprintf(stderr, "%s: error: argument --k-steps: at most 1000000\n", argv[0]); return 2; }
    const char *train_path = su_flag(argc, argv, "--train", NULL), *test_path = su_flag(argc, argv, "--test", NULL);
    const char *optname = su_flag(argc, argv, "--optimizer", "sgd");
    int64_t rows = su_flag_count(argc, argv, "--synthetic-rows", 50000), epochs = su_flag_count(argc, argv, "--epochs", 3);
    int64_t batch = su_flag_count(argc, argv, "--batch-size", 100), esize = su_flag_count(argc, argv, "--embedding-size", 10);
    int64_t dim = su_flag_count(argc, argv, "--sparse-feature-dim", 1000001), max_steps = su_flag_count(argc, argv, "--max-steps", 0);
    int64_t seed = su_flag_count(argc, argv, "--seed", 1);
    /* the tutorial's SGD 1e-4 is for the 45 million rows of the real Criteo set; the 40,000 rows of
     * the synthetic one need 0.5 over 3 epochs */
    double lr = su_flag_num(argc, argv, "--lr", 0.5);
    bool adagrad = strcmp(optname, "adagrad") == 0;
    if (!adagrad && strcmp(optname, "sgd") != 0) { fprintf(stderr, "%s: error: argument --optimizer: sgd or adagrad, not '%s'\n", argv[0], optname); return 2; }
    if (batch < 1 || esize < 1 || dim < 1 || rows < 10 || rows > MAX_ROWS || !(lr >= 0)) {
        fprintf(stderr, "%s: error: --batch-size, --embedding-size, --sparse-feature-dim must be >= 1, --synthetic-rows in "
                "[10, %d], --lr >= 0\n", argv[0], MAX_ROWS);
        return 2;
    }
    if (!train_path != !test_path) { fprintf(stderr, "%s: error: --train and --test go together\n", argv[0]); return 2; }
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = (int)su_flag_num(argc, argv, "--threads", DG_FROM_ENV);
    if (dg_init(&ip) != 0) return su_die("init");
    if (su_profile_start(argc, argv)) return su_die("--profile");

    bool ps = getenv("TRAINING_ROLE") || getenv("PADDLE_TRAINING_ROLE");
    if (ps) {
        dg_fleet_strategy st = dg_fleet_default_strategy();
        st.k_steps = (int)k_steps;
        st.sync_mode = !su_has(argc, argv, "--async") && st.k_steps == 0;
        if (dg_fleet_init(false, &st) != 0) return su_die("fleet init");
        if (dg_fleet_is_server()) {
            if (dg_fleet_init_server(NULL) != 0 || dg_fleet_run_server() != 0) return su_die("server");
            printf("server %d: every worker stopped\n", dg_fleet_server_index());
            dg_fleet_shutdown();
            dg_shutdown();
            return 0;
        }
        if (dg_fleet_init_worker() != 0) return su_die("init_worker");
    }
    int worker = ps ? dg_fleet_worker_index() : 0, workers = ps ? dg_fleet_worker_num() : 1;

    ctr_data tr, te;
    if (train_path) {
        if (read_criteo(train_path, &tr, dim) || read_criteo(test_path, &te, dim)) return 1;
    } else {
        synthetic(&tr, (int)(rows * 4 / 5), 1, dim);
        synthetic(&te, (int)(rows - rows * 4 / 5), 2, dim);
    }
    printf("%s Criteo data: %d train / %d test examples; worker %d of %d, batch %lld, %s, %s lr %g\n",
           train_path ? train_path : "SYNTHETIC", tr.n, te.n, worker, workers, (long long)batch,
           ps ? (k_steps > 0 ? "geo" : su_has(argc, argv, "--async") ? "async" : "sync") : "one process", optname, lr);

    ctr_net m = { .esize = esize };
    dg_fleet_sparse_params sp = dg_fleet_sparse_default_params();
    sp.seed = (uint64_t)seed;
    sp.init_range = 0.05;
    if (ps) {
        m.emb = dg_fleet_sparse_embedding(esize, sp);
    } else {
        dg_nn_embedding_params ep = dg_nn_embedding_default_params();
        ep.sparse = true;
        m.emb = dg_nn_embedding(dim, esize, ep);
        dg_tensor *w = m.emb ? dg_layer_parameter(m.emb, "weight") : NULL;
        float *t = w ? malloc(sizeof(float) * (size_t)(dim * esize)) : NULL;   /* the servers' rows */
        for (int64_t id = 0; t && id < dim; id++) dg_fleet_sparse_initial_row(sp.seed, sp.init_range, id, esize, t + id * esize);
        dg_no_grad_begin();
        if (!t || dg_copy_(w, dg_from_data(DG_SHAPE(dim, esize), DG_F32, t))) return su_die("embedding");
        dg_no_grad_end();
        free(t);
    }
    dg_manual_seed((uint64_t)seed);
    const int64_t width[5] = { CATS * esize + INTS, 400, 400, 400, 2 };
    for (int i = 0; i < 4; i++) m.fc[i] = dg_nn_linear(width[i], width[i + 1]);
    if (!m.emb || !m.fc[3]) return su_die("model");
    dg_tensor *params[9];
    int np = 0;
    for (int i = 0; i < 4; i++) {
        int n;
        dg_tensor **p = dg_layer_parameters(m.fc[i], &n);
        for (int k = 0; k < n; k++) params[np++] = p[k];
        free(p);
    }
    if (!ps) params[np++] = dg_layer_parameter(m.emb, "weight");
    dg_optimizer *opt;
    if (adagrad) {
        dg_adagrad_params ap = dg_adagrad_default_params();
        ap.lr = lr;
        opt = dg_adagrad(params, np, ap);
    } else {
        dg_sgd_params s = dg_sgd_default_params();
        s.lr = lr;
        opt = dg_sgd(params, np, s);
    }
    if (!opt || (ps && !(opt = dg_fleet_distributed_optimizer(opt)))) return su_die("optimizer");

    static auc_stat global, batch_auc;
    int64_t step = 0, nb = tr.n / batch;
    int64_t dense_floats = 0, unique_ids = 0;   /* for the traffic model: what a step must move */
    for (int i = 0; i < np; i++) dense_floats += ps ? dg_numel(params[i]) : 0;
    int64_t *uniq = malloc(sizeof(int64_t) * (size_t)batch * CATS);
    if (!uniq) return su_die("out of memory");
    dg_fleet_traffic traffic0 = ps ? dg_fleet_ps_traffic() : (dg_fleet_traffic){ 0 };
    double t0 = su_now();
    int64_t seen = 0;
    for (int64_t epoch = 0; epoch < epochs; epoch++) {
        memset(&global, 0, sizeof global);
        for (int64_t b = worker; b < nb; b += workers) {
            dg_scope *s = dg_scope_begin();
            dg_tensor *prob = NULL, *loss = forward(&m, &tr, (int)(b * batch), (int)batch, &prob);
            /* async: the next batch's rows come while this one's backward and step run (after this
             * forward, which took the rows announced last time) */
            if (ps && loss && b + workers < nb &&
                dg_fleet_sparse_prefetch(m.emb, dg_from_data(DG_SHAPE(batch, CATS), DG_I64, tr.ids + (size_t)(b + workers) * batch * CATS)))
                return su_die("prefetch");
            if (!loss || dg_backward(loss) || dg_optimizer_step(opt)) return su_die("step");
            dg_optimizer_clear_grad(opt);
            float pr[4096];
            if (batch <= 4096 && !dg_to_host(prob, pr, sizeof(float) * (size_t)batch)) {
                memset(&batch_auc, 0, sizeof batch_auc);
                for (int64_t i = 0; i < batch; i++) {
                    auc_add(&global, pr[i], tr.label[b * batch + i]);
                    auc_add(&batch_auc, pr[i], tr.label[b * batch + i]);
                }
            }
            seen += batch;
            memcpy(uniq, tr.ids + b * batch * CATS, sizeof(int64_t) * (size_t)(batch * CATS));
            unique_ids += count_unique(uniq, batch * CATS);
            if (++step % 100 == 0)
                printf("epoch %lld step %lld loss %.5f batch auc %.4f auc %.4f\n", (long long)epoch, (long long)step, dg_item(loss),
                       auc_value(&batch_auc), auc_value(&global));
            dg_scope_end(s);
            if (max_steps && step >= max_steps) break;
        }
        if (max_steps && step >= max_steps) break;
    }
    double secs = su_now() - t0;
    if (ps && step) {
        dg_fleet_traffic t = dg_fleet_ps_traffic();
        double sent = (double)(t.bytes_sent - traffic0.bytes_sent) / (double)step;
        double received = (double)(t.bytes_received - traffic0.bytes_received) / (double)step;
        double ids = (double)unique_ids / (double)step, rows = ids * (double)esize * 4, dense = (double)dense_floats * 4;
        printf("ps traffic per step: %.0f B sent, %.0f B received, %.1f requests; model (%.0f unique ids x %lld B rows + "
               "%.0f B dense): %.0f B received, %.0f B sent (ids too)\n", sent, received,
               (double)(t.requests - traffic0.requests) / (double)step, ids, (long long)esize * 4, dense, rows + dense,
               rows + ids * 8 + dense);
    }
    free(uniq);
    /* held-out AUC of the trained model (and of the planted one on synthetic data) */
    auc_stat test, planted;
    memset(&test, 0, sizeof test);
    memset(&planted, 0, sizeof planted);
    dg_no_grad_begin();
    for (int r0 = 0; r0 < te.n; r0 += (int)batch) {
        int b = te.n - r0 < batch ? te.n - r0 : (int)batch;
        dg_scope *s = dg_scope_begin();
        dg_tensor *prob = NULL;
        float pr[4096];
        if (!forward(&m, &te, r0, b, &prob) || b > 4096 || dg_to_host(prob, pr, sizeof(float) * (size_t)b)) return su_die("test");
        for (int i = 0; i < b; i++) {
            auc_add(&test, pr[i], te.label[r0 + i]);
            if (!isnan(te.planted[r0 + i])) auc_add(&planted, te.planted[r0 + i], te.label[r0 + i]);
        }
        dg_scope_end(s);
    }
    dg_no_grad_end();
    printf("train: %lld steps, %.0f examples/s; test auc %.4f", (long long)step, (double)seen / secs, auc_value(&test));
    if (!train_path) printf(" (the planted model's: %.4f)", auc_value(&planted));
    printf("\n");
    if (ps && dg_fleet_stop_worker() != 0) return su_die("stop_worker");
    data_free(&tr);
    data_free(&te);
    dg_optimizer_free(opt);
    for (int i = 0; i < 4; i++) dg_layer_free(m.fc[i]);
    dg_layer_free(m.emb);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
