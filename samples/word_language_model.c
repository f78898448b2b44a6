/* samples/word_language_model.c — pytorch/examples' word_language_model (main.py with model.py's
 * RNNModel in its RNN_TANH, RNN_RELU, LSTM and GRU modes): a word-level language model trained
 * by truncated backpropagation through time, SGD with the gradient clipped to norm --clip, the
 * learning rate divided by 4 whenever the validation loss does not improve, the best model saved
 * and evaluated on the test set. Same flags, defaults and printout as the original.
 *
 *   word_language_model [--data build/data/fortunes-wlm] [--model LSTM] [--emsize 200] [--nhid 200]
 *          [--nlayers 2] [--lr 20] [--clip 0.25] [--epochs 40] [--batch_size 20] [--bptt 35]
 *          [--dropout 0.2] [--tied] [--seed 1111] [--cuda] [--log-interval 200]
 *          [--save model.safetensors] [--dry-run] [--threads N]
 *          [--save-init FILE] [--dump-batches FILE] [--loss-log FILE] [--max-steps N]
 *
 * --data is a directory with train.txt, valid.txt and test.txt (WikiText-2 or Penn Treebank
 * work as they come); the default is running English text from Debian's `fortunes` package,
 * prepared by tools/wlm_corpus.py (`make data`). --save writes the state dict as safetensors
 * with model.py's names (a PyTorch RNNModel takes it with load_state_dict(strict=True)).
 * --save-init writes the initial state dict, --dump-batches the inputs and targets of the first
 * --max-steps training batches (input.<step> [bptt, batch], target.<step> [bptt * batch]),
 * --loss-log each step's loss with 9 digits (test/wlm_parity.py replays them in PyTorch with
 * --dropout 0). --max-steps stops training after that many batches (then validates and tests).
 * --cuda runs on gpu:0 (the original's flag). */
#include "sample_util.h"
#include "word_language_model.h"
#include <math.h>

/* batchify: the first nbatch * bsz ids as [nbatch, bsz], column b the b-th contiguous stretch */
static int64_t *batchify(const int64_t *ids, int64_t n, int64_t bsz, int64_t *rows) {
    int64_t nb = n / bsz;
    int64_t *out = malloc(sizeof *out * (size_t)(nb * bsz > 0 ? nb * bsz : 1));
    if (!out) return NULL;
    for (int64_t b = 0; b < bsz; b++)
        for (int64_t t = 0; t < nb; t++) out[t * bsz + b] = ids[b * nb + t];
    *rows = nb;
    return out;
}

/* get_batch(source, i): data [seq_len, bsz] and target [seq_len * bsz] on the current device */
static int64_t get_batch(const int64_t *src, int64_t rows, int64_t bsz, int64_t i, int64_t bptt, dg_tensor **data, dg_tensor **target) {
    int64_t len = bptt < rows - 1 - i ? bptt : rows - 1 - i;
    *data = dg_from_data(DG_SHAPE(len, bsz), DG_I64, src + i * bsz);
    *target = dg_from_data(DG_SHAPE(len * bsz), DG_I64, src + (i + 1) * bsz);
    return len;
}

/* evaluate(data_source): the mean loss per target, as the original sums len(data) * loss */
static double evaluate(dg_layer *model, const int64_t *src, int64_t rows, int64_t bsz, int64_t bptt) {
    dg_layer_eval(model);
    dg_no_grad_begin();
    double total = 0;
    dg_tensor *h = NULL, *c = NULL;
    for (int64_t i = 0; i < rows - 1; i += bptt) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *data, *target, *hn, *cn;
        int64_t len = get_batch(src, rows, bsz, i, bptt, &data, &target);
        dg_tensor *out = wlm_forward(model, data, h, c, &hn, &cn);
        double l = out ? dg_item(dg_nll_loss(out, target, DG_REDUCE_MEAN, -100)) : NAN;
        if (h) dg_tensor_free(h);
        if (c) dg_tensor_free(c);
        h = out ? dg_keep_in_parent(hn) : NULL;   /* repackage_hidden */
        c = out && cn ? dg_keep_in_parent(cn) : NULL;
        dg_scope_end(s);
        if (!out) { total = NAN; break; }
        total += (double)len * l;
    }
    if (h) dg_tensor_free(h);
    if (c) dg_tensor_free(c);
    dg_no_grad_end();
    return total / (double)(rows - 1);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--data=build/data/fortunes-wlm", "--model=LSTM (RNN_TANH, RNN_RELU, LSTM, GRU)", "--emsize=200", "--nhid=200", "--nlayers=2",
                                         "--lr=20", "--clip=0.25", "--epochs=40", "--batch_size=20", "--bptt=35", "--dropout=0.2", "--tied!", "--seed=1111",
                                         "--cuda!", "--log-interval=200", "--save=model.safetensors", "--dry-run!", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)",
                                         "--save-init=none", "--dump-batches=none", "--loss-log=none", "--max-steps=0 (no limit)", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    const char *dir = su_flag(argc, argv, "--data", "build/data/fortunes-wlm"), *mname = su_flag(argc, argv, "--model", "LSTM");
    int64_t emsize = su_flag_count(argc, argv, "--emsize", 200), nhid = su_flag_count(argc, argv, "--nhid", 200);
    int64_t nlayers = su_flag_count(argc, argv, "--nlayers", 2), epochs = su_flag_count(argc, argv, "--epochs", 40);
    int64_t bsz = su_flag_count(argc, argv, "--batch_size", 20), bptt = su_flag_count(argc, argv, "--bptt", 35);
    int64_t log_interval = su_flag_count(argc, argv, "--log-interval", 200), max_steps = su_flag_count(argc, argv, "--max-steps", 0);
    double lr = su_flag_num(argc, argv, "--lr", 20), clip = su_flag_num(argc, argv, "--clip", 0.25);
    double dropout = su_flag_num(argc, argv, "--dropout", 0.2);
    bool tied = su_has(argc, argv, "--tied"), dry = su_has(argc, argv, "--dry-run");
    const char *save = su_flag(argc, argv, "--save", "model.safetensors");
    dg_rnn_mode mode;
    if (!wlm_mode(mname, &mode) || emsize < 1 || nhid < 1 || nlayers < 1 || bsz < 1 || bptt < 1 || log_interval < 1 ||
        !(dropout >= 0 && dropout <= 1)) {
        su_usage(stderr, argv[0], flags);
        fprintf(stderr, "%s: error: --model is RNN_TANH, RNN_RELU, LSTM or GRU; sizes >= 1; dropout in [0, 1]\n", argv[0]);
        return 2;
    }
    if (su_has(argc, argv, "--cuda") && !su_flag(argc, argv, "--device", NULL)) setenv("DG_DEVICE", "gpu:0", 1);
    if (su_init(argc, argv, (uint64_t)su_flag_count(argc, argv, "--seed", 1111))) return su_die("init");

    /* corpus = data.Corpus(args.data): one dictionary over train, valid, test */
    wlm_dict dict = { 0 };
    int64_t n_train, n_valid, n_test, rows_train, rows_valid, rows_test;
    char path[4096];
    snprintf(path, sizeof path, "%s/train.txt", dir);
    int64_t *train_ids = wlm_tokenize(&dict, path, &n_train);
    snprintf(path, sizeof path, "%s/valid.txt", dir);
    int64_t *valid_ids = train_ids ? wlm_tokenize(&dict, path, &n_valid) : NULL;
    snprintf(path, sizeof path, "%s/test.txt", dir);
    int64_t *test_ids = valid_ids ? wlm_tokenize(&dict, path, &n_test) : NULL;
    if (!test_ids) return 1;
    const int64_t eval_bsz = 10;
    int64_t *train = batchify(train_ids, n_train, bsz, &rows_train), *valid = batchify(valid_ids, n_valid, eval_bsz, &rows_valid);
    int64_t *test = batchify(test_ids, n_test, eval_bsz, &rows_test);
    if (!train || !valid || !test) { fprintf(stderr, "error: out of memory\n"); return 1; }
    int64_t ntokens = dict.n;
    printf("corpus %s: %lld / %lld / %lld tokens, vocab size (%lld)\n", dir, (long long)n_train, (long long)n_valid, (long long)n_test,
           (long long)ntokens);

    dg_layer *model = wlm_model_new(mode, ntokens, emsize, nhid, (int)nlayers, dropout, tied);
    if (!model) return su_die("model");
    const char *init_path = su_flag(argc, argv, "--save-init", NULL);
    if (init_path && dg_layer_save(model, init_path)) return su_die("save-init");
    int np;
    dg_tensor **params = dg_layer_parameters(model, &np);   /* model.parameters(): the tied weight once */
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = lr;
    dg_optimizer *opt = dg_sgd(params, np, sp);   /* p.data.add_(p.grad, alpha=-lr) */
    if (!opt) return su_die("optimizer");

    const char *dump_path = su_flag(argc, argv, "--dump-batches", NULL), *log_path = su_flag(argc, argv, "--loss-log", NULL);
    if (dump_path && !max_steps) { fprintf(stderr, "%s: error: --dump-batches needs --max-steps\n", argv[0]); return 2; }
    dg_tensor_dict *dump = dump_path ? dg_tensor_dict_new() : NULL;
    FILE *loss_log = log_path ? fopen(log_path, "w") : NULL;
    if ((dump_path && !dump) || (log_path && !loss_log)) { fprintf(stderr, "error: cannot set up the logs\n"); return 1; }

    double best_val = INFINITY;
    int64_t step = 0, tokens = 0;
    double train_time = 0;
    bool stop = false;
    for (int64_t epoch = 1; epoch <= epochs && !stop; epoch++) {
        double epoch_start = su_now(), start = epoch_start, total_loss = 0;
        dg_layer_train(model);
        dg_tensor *h = NULL, *c = NULL;   /* init_hidden: zeros */
        int64_t batch = 0;
        for (int64_t i = 0; i < rows_train - 1; i += bptt, batch++) {
            dg_scope *s = dg_scope_begin();
            dg_tensor *data, *target, *hn, *cn;
            int64_t len = get_batch(train, rows_train, bsz, i, bptt, &data, &target);
            dg_layer_clear_gradients(model);   /* model.zero_grad() */
            dg_tensor *out = wlm_forward(model, data, h, c, &hn, &cn);
            dg_tensor *loss = out ? dg_nll_loss(out, target, DG_REDUCE_MEAN, -100) : NULL;
            if (!loss || dg_backward(loss)) return su_die("train step");
            if (!(dg_clip_grad_norm(params, np, clip) >= 0) || dg_optimizer_step(opt)) return su_die("update");
            double l = dg_item(loss);
            total_loss += l;
            tokens += len * bsz;
            if (loss_log) fprintf(loss_log, "%lld %.9g\n", (long long)step + 1, l);
            if (dump && step < max_steps) {
                char k[64];
                snprintf(k, sizeof k, "input.%lld", (long long)step);
                dg_tensor_dict_set(dump, k, dg_to_device(data, dg_cpu()));
                snprintf(k, sizeof k, "target.%lld", (long long)step);
                dg_tensor_dict_set(dump, k, dg_to_device(target, dg_cpu()));
            }
            /* repackage_hidden: the next batch starts from this state, without its history */
            if (h) dg_tensor_free(h);
            if (c) dg_tensor_free(c);
            h = dg_keep_in_parent(dg_detach(hn));
            c = cn ? dg_keep_in_parent(dg_detach(cn)) : NULL;
            dg_scope_end(s);
            step++;
            if (batch % log_interval == 0 && batch > 0) {
                double cur = total_loss / (double)log_interval, el = su_now() - start;
                printf("| epoch %3lld | %5lld/%5lld batches | lr %02.2f | ms/batch %5.2f | loss %5.2f | ppl %8.2f\n", (long long)epoch,
                       (long long)batch, (long long)(rows_train / bptt), lr, el * 1000 / (double)log_interval, cur, exp(cur));
                fflush(stdout);
                total_loss = 0;
                start = su_now();
            }
            if (dry || (max_steps && step >= max_steps)) { stop = true; break; }
        }
        if (h) dg_tensor_free(h);
        if (c) dg_tensor_free(c);
        train_time += su_now() - epoch_start;
        double val = evaluate(model, valid, rows_valid, eval_bsz, bptt);
        printf("-----------------------------------------------------------------------------------------\n");
        printf("| end of epoch %3lld | time: %5.2fs | valid loss %5.2f | valid ppl %8.2f\n", (long long)epoch, su_now() - epoch_start, val,
               exp(val));
        printf("-----------------------------------------------------------------------------------------\n");
        fflush(stdout);
        if (val < best_val) {   /* save the model if the validation loss is the best so far */
            if (dg_layer_save(model, save)) return su_die("save");
            best_val = val;
        } else {
            lr /= 4.0;   /* anneal the learning rate when no improvement is seen */
            dg_optimizer_set_lr(opt, lr);
        }
    }
    if (dump) {
        if (dg_save_safetensors(dump_path, dump)) return su_die("dump-batches");
        dg_tensor_dict_free(dump);
    }
    if (loss_log) fclose(loss_log);
    printf("training: %lld tokens in %.2f s, %.0f tokens/s\n", (long long)tokens, train_time, (double)tokens / train_time);

    /* load the best saved model and run it on the test data */
    if (dg_layer_load(model, save, dg_load_default_params(), NULL)) return su_die("load best model");
    double test_loss = evaluate(model, test, rows_test, eval_bsz, bptt);
    printf("=========================================================================================\n");
    printf("| End of training | test loss %5.2f | test ppl %8.2f\n", test_loss, exp(test_loss));
    printf("=========================================================================================\n");
    free(params);
    dg_optimizer_free(opt);
    dg_layer_free(model);
    free(train);
    free(valid);
    free(test);
    free(train_ids);
    free(valid_ids);
    free(test_ids);
    wlm_dict_free(&dict);
    dg_shutdown();
    return 0;
}
