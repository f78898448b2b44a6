/* samples/langid.c — a text classifier on data Debian ships: which language a word is, from the
 * word lists of wamerican, wngerman, wfrench, wspanish and witalian (/usr/share/dict). Each word
 * becomes a bag of hashed character 1- to 3-grams of "<word>" (fastText's features, ASCII
 * lower-cased so German capitals give nothing away); the model is Embedding (mean over the
 * word's n-grams, id 0 the padding) -> LayerNorm -> Linear, trained with cross-entropy.
 *
 *   langid [--dict-dir /usr/share/dict] [--per-lang 20000] [--epochs 3] [--batch-size 128]
 *          [--optimizer adam|sgd] [--lr 0.01] [--momentum 0.9] [--dim 64] [--buckets 32768]
 *          [--max-ngrams 64] [--sparse] [--max-steps N] [--seed 1] [--threads N] [--device cpu|gpu]
 *          [--save-init FILE] [--dump-batches FILE] [--loss-log FILE]
 *
 * Every 10th word of each language (after a seeded shuffle) is held out for the test accuracy.
 * --sparse keeps the embedding's gradient as rows (dg_sparse_grad). For checking against
 * another framework: --save-init writes the initial state dict (safetensors, torch's names:
 * embedding.weight, norm.weight, norm.bias, fc.weight, fc.bias), --dump-batches the first
 * --max-steps training batches (ids [steps, batch, max-ngrams], labels [steps, batch]) and
 * --loss-log each step's loss with 9 digits (test/text_parity.py replays them in PyTorch). */
#include "sample_util.h"
#include <ctype.h>
#include <math.h>
#include <stdint.h>

static const char *const LANGS[] = { "american-english", "ngerman", "french", "spanish", "italian" };
enum { N_LANGS = 5 };

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static void shuffle(int64_t *a, int64_t n, uint64_t *rng) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(splitmix(rng) % (uint64_t)(i + 1)), t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

typedef struct { char **w; int64_t n, cap; } wordlist;

/* The words of one list: one per line, ASCII lower-cased; possessives ("'s") and 1-byte words
 * skipped. */
static int read_words(const char *path, wordlist *out) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "error: cannot open %s (apt-get install wamerican wngerman wfrench wspanish witalian)\n", path); return -1; }
    char line[256];
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        line[len] = 0;
        if (len < 2 || strchr(line, '\'')) continue;
        for (size_t i = 0; i < len; i++) line[i] = (char)tolower((unsigned char)line[i]);
        if (out->n == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 4096;
            char **w = realloc(out->w, sizeof *w * (size_t)out->cap);
            if (!w) { fclose(f); fprintf(stderr, "error: out of memory reading %s\n", path); return -1; }
            out->w = w;
        }
        if (!(out->w[out->n++] = strdup(line))) { fclose(f); return -1; }
    }
    fclose(f);
    return 0;
}

/* The word's n-gram ids (1..buckets; 0 pads) into ids[max]: FNV-1a of the n and the bytes. */
static void featurize(const char *word, int64_t buckets, int64_t max, int64_t *ids) {
    char b[260];
    int len = snprintf(b, sizeof b, "<%s>", word), k = 0;
    for (int i = 0; i < len && k < max; i++)
        for (int n = 1; n <= 3 && i + n <= len && k < max; n++) {
            uint32_t h = 2166136261u ^ (uint32_t)n;
            for (int j = 0; j < n; j++) h = (h ^ (uint8_t)b[i + j]) * 16777619u;
            ids[k++] = 1 + (int64_t)(h % (uint32_t)buckets);
        }
    for (; k < max; k++) ids[k] = 0;
}

/* ---- the model: a layer of three sublayers, so its state dict reads like torch's module ---- */
static const dg_layer_class bag_class = DG_LAYER_CLASS("BagOfNgrams");

static dg_tensor *bag_forward(dg_layer *self, const dg_tensor *ids) {
    dg_tensor *e = dg_forward(dg_layer_sublayer(self, "embedding"), ids);            /* [B, L, D] */
    int ax = 1;
    dg_tensor *count = dg_clip(dg_sum(dg_cast(dg_greater(ids, dg_scalar(0, DG_I64)), dg_dtype_of(e)), &ax, 1, true), 1, INFINITY);
    dg_tensor *mean = dg_div(dg_sum(e, &ax, 1, false), count);                       /* [B, D] */
    return dg_forward(dg_layer_sublayer(self, "fc"), dg_forward(dg_layer_sublayer(self, "norm"), mean));
}

static dg_layer *bag_new(int64_t buckets, int64_t dim, bool sparse) {
    dg_layer *l = dg_layer_new(&bag_class, bag_forward, NULL, NULL);
    dg_nn_embedding_params ep = dg_nn_embedding_default_params();
    ep.padding_idx = 0;
    ep.sparse = sparse;
    if (!l || dg_layer_add_sublayer(l, "embedding", dg_nn_embedding(buckets + 1, dim, ep)) ||
        dg_layer_add_sublayer(l, "norm", dg_nn_layer_norm(DG_SHAPE(dim), dg_nn_layer_norm_default_params())) ||
        dg_layer_add_sublayer(l, "fc", dg_nn_linear(dim, N_LANGS))) {
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

/* Rows `idx[0..n)` of the feature matrix and labels, as tensors on the current device. */
static void batch_of(const int64_t *feat, const int64_t *label, const int64_t *idx, int64_t n, int64_t max,
                     int64_t *ids_buf, int64_t *lab_buf, dg_tensor **ids, dg_tensor **labels) {
    for (int64_t i = 0; i < n; i++) {
        memcpy(ids_buf + i * max, feat + idx[i] * max, sizeof *ids_buf * (size_t)max);
        lab_buf[i] = label[idx[i]];
    }
    *ids = dg_from_data(DG_SHAPE(n, max), DG_I64, ids_buf);   /* on the current device */
    *labels = dg_from_data(DG_SHAPE(n), DG_I64, lab_buf);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--dict-dir=/usr/share/dict", "--per-lang=20000", "--epochs=3", "--batch-size=128", "--optimizer=adam", "--lr=0.01", "--momentum=0.9",
                                         "--dim=64", "--buckets=32768", "--max-ngrams=64", "--sparse!", "--max-steps=0 (no limit)", "--seed=1", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)",
                                         "--device=$DG_DEVICE, else FLAGS_selected_gpus, else cpu", "--save-init=none", "--dump-batches=none", "--loss-log=none", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    const char *dir = su_flag(argc, argv, "--dict-dir", "/usr/share/dict");
    int64_t per_lang = su_flag_count(argc, argv, "--per-lang", 20000), epochs = su_flag_count(argc, argv, "--epochs", 3);
    int64_t batch = su_flag_count(argc, argv, "--batch-size", 128), dim = su_flag_count(argc, argv, "--dim", 64);
    int64_t buckets = su_flag_count(argc, argv, "--buckets", 32768), max = su_flag_count(argc, argv, "--max-ngrams", 64);
    int64_t max_steps = su_flag_count(argc, argv, "--max-steps", 0);
    const char *optname = su_flag(argc, argv, "--optimizer", "adam");
    double lr = su_flag_num(argc, argv, "--lr", 0.01), momentum = su_flag_num(argc, argv, "--momentum", 0.9);
    uint64_t seed = (uint64_t)su_flag_count(argc, argv, "--seed", 1);
    bool sgd = strcmp(optname, "sgd") == 0;
    if ((!sgd && strcmp(optname, "adam") != 0) || per_lang < 10 || batch < 1 || dim < 1 || buckets < 1 || max < 1) {
        su_usage(stderr, argv[0], flags);
        fprintf(stderr, "%s: error: --optimizer is adam or sgd; --per-lang >= 10; batch, dim, buckets, max-ngrams >= 1\n", argv[0]);
        return 2;
    }
    if (su_init(argc, argv, seed)) return su_die("init");

    /* the words, shuffled per language; every 10th held out */
    uint64_t rng = seed;
    int64_t cap = per_lang * N_LANGS, n_train = 0, n_test = 0;
    int64_t *feat = malloc(sizeof *feat * (size_t)(cap * max)), *label = malloc(sizeof *label * (size_t)cap);
    int64_t *train = malloc(sizeof *train * (size_t)cap), *test = malloc(sizeof *test * (size_t)cap);
    if (!feat || !label || !train || !test) { fprintf(stderr, "error: out of memory\n"); return 1; }
    int64_t rows = 0;
    for (int l = 0; l < N_LANGS; l++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, LANGS[l]);
        wordlist wl = {0};
        if (read_words(path, &wl)) return 1;
        int64_t *order = malloc(sizeof *order * (size_t)(wl.n ? wl.n : 1)), take = wl.n < per_lang ? wl.n : per_lang;
        if (!order) return 1;
        for (int64_t i = 0; i < wl.n; i++) order[i] = i;
        shuffle(order, wl.n, &rng);
        for (int64_t i = 0; i < take; i++, rows++) {
            featurize(wl.w[order[i]], buckets, max, feat + rows * max);
            label[rows] = l;
            if (i % 10 == 9) test[n_test++] = rows;
            else train[n_train++] = rows;
        }
        printf("%-16s %7lld words, %lld used\n", LANGS[l], (long long)wl.n, (long long)take);
        for (int64_t i = 0; i < wl.n; i++) free(wl.w[i]);
        free(wl.w);
        free(order);
    }
    printf("langid: %lld training / %lld test words, %lld n-gram buckets, dim %lld, %s%s\n", (long long)n_train, (long long)n_test,
           (long long)buckets, (long long)dim, optname, su_has(argc, argv, "--sparse") ? ", sparse embedding gradient" : "");

    dg_layer *net = bag_new(buckets, dim, su_has(argc, argv, "--sparse"));
    if (!net) return su_die("model");
    const char *init_path = su_flag(argc, argv, "--save-init", NULL);
    if (init_path && dg_layer_save(net, init_path)) return su_die("save-init");
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_optimizer *opt = NULL;
    if (sgd) {
        dg_momentum_params mp = dg_momentum_default_params();
        mp.lr = lr;
        mp.momentum = momentum;
        opt = dg_momentum(params, n, mp);
    } else {
        dg_adam_params ap = dg_adam_default_params();
        ap.lr = lr;
        opt = dg_adam(params, n, ap);
    }
    free(params);
    if (!opt) return su_die("optimizer");

    const char *dump_path = su_flag(argc, argv, "--dump-batches", NULL), *log_path = su_flag(argc, argv, "--loss-log", NULL);
    if (dump_path && !max_steps) { fprintf(stderr, "%s: error: --dump-batches needs --max-steps\n", argv[0]); return 2; }
    int64_t *dump_ids = dump_path ? calloc((size_t)(max_steps * batch * max), sizeof *dump_ids) : NULL;
    int64_t *dump_lab = dump_path ? calloc((size_t)(max_steps * batch), sizeof *dump_lab) : NULL;
    FILE *loss_log = log_path ? fopen(log_path, "w") : NULL;
    if ((dump_path && (!dump_ids || !dump_lab)) || (log_path && !loss_log)) { fprintf(stderr, "error: cannot set up the logs\n"); return 1; }
    int64_t *ids_buf = malloc(sizeof *ids_buf * (size_t)(batch * max)), *lab_buf = malloc(sizeof *lab_buf * (size_t)batch);
    if (!ids_buf || !lab_buf) return 1;

    int64_t step = 0;
    double t0 = su_now();
    for (int64_t epoch = 0; epoch < epochs && (!max_steps || step < max_steps); epoch++) {
        shuffle(train, n_train, &rng);
        double loss_sum = 0;
        int64_t loss_n = 0;
        dg_layer_train(net);
        for (int64_t at = 0; at + batch <= n_train && (!max_steps || step < max_steps); at += batch, step++) {
            dg_scope *s = dg_scope_begin();
            dg_tensor *ids, *labels;
            batch_of(feat, label, train + at, batch, max, ids_buf, lab_buf, &ids, &labels);
            if (dump_ids && step < max_steps) {
                memcpy(dump_ids + step * batch * max, ids_buf, sizeof *ids_buf * (size_t)(batch * max));
                memcpy(dump_lab + step * batch, lab_buf, sizeof *lab_buf * (size_t)batch);
            }
            dg_tensor *loss = dg_cross_entropy(dg_forward(net, ids), labels);
            if (!loss || dg_backward(loss) || dg_optimizer_step(opt)) return su_die("train step");
            dg_optimizer_clear_grad(opt);
            double l = dg_item(loss);
            if (loss_log) fprintf(loss_log, "%lld %.9g\n", (long long)step + 1, l);
            loss_sum += l;
            loss_n++;
            dg_scope_end(s);
        }
        /* test accuracy */
        dg_layer_eval(net);
        int64_t correct = 0;
        dg_no_grad_begin();
        for (int64_t at = 0; at < n_test; at += batch) {
            dg_scope *s = dg_scope_begin();
            int64_t m = n_test - at < batch ? n_test - at : batch;
            dg_tensor *ids, *labels;
            batch_of(feat, label, test + at, m, max, ids_buf, lab_buf, &ids, &labels);
            dg_tensor *acc = dg_accuracy(dg_forward(net, ids), labels, 1);
            if (!acc) return su_die("evaluate");
            correct += (int64_t)(dg_item(acc) * (double)m + 0.5);
            dg_scope_end(s);
        }
        dg_no_grad_end();
        printf("epoch %lld: train loss %.4f, test accuracy %.4f (%lld words), %.1f s\n", (long long)epoch + 1,
               loss_sum / (double)(loss_n ? loss_n : 1), (double)correct / (double)n_test, (long long)n_test, su_now() - t0);
    }
    if (dump_path) {
        dg_scope *s = dg_scope_begin();
        dg_tensor_dict *d = dg_tensor_dict_new();
        int64_t steps = step < max_steps ? step : max_steps;
        if (!d || dg_tensor_dict_set(d, "ids", dg_from_data(DG_SHAPE(steps, batch, max), DG_I64, dump_ids)) ||
            dg_tensor_dict_set(d, "labels", dg_from_data(DG_SHAPE(steps, batch), DG_I64, dump_lab)) || dg_save_safetensors(dump_path, d))
            return su_die("dump-batches");
        dg_tensor_dict_free(d);
        dg_scope_end(s);
    }
    if (loss_log) fclose(loss_log);
    free(dump_ids); free(dump_lab); free(ids_buf); free(lab_buf);
    free(feat); free(label); free(train); free(test);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_shutdown();
    return 0;
}
