/* samples/word_language_model_generate.c — pytorch/examples' word_language_model/generate.py:
 * samples --words words from a model word_language_model saved (--checkpoint, its state dict),
 * starting from a random word, each next word drawn from softmax(output / --temperature)
 * (multinomial), 20 words a line into --outf.
 *
 *   word_language_model_generate [--data build/data/fortunes-wlm] [--checkpoint model.safetensors]
 *          [--outf generated.txt] [--words 1000] [--seed 1111] [--cuda] [--temperature 1.0]
 *          [--log-interval 100] [--model auto] [--threads N] [--save-init FILE] [--dump-batches FILE]
 *
 * For checking against PyTorch (the samples' convention): --save-init writes the state dict the
 * generation starts from (model.py's names), --dump-batches the start word and every drawn word
 * (int64 tensors input.0 [1, 1] and words [--words]), the random draws a replay needs.
 * The original unpickles the whole model; a state dict has only tensors, so the model is rebuilt
 * from their shapes: ntoken and emsize from encoder.weight, nhid and the cell from
 * rnn.weight_hh_l0 ([4 nhid, nhid] LSTM, [3 nhid, nhid] GRU, [nhid, nhid] RNN), nlayers from
 * the rnn.weight_ih_l<k> present. An RNN's nonlinearity is not in its weights: --model RNN_RELU
 * says so (RNN_TANH is assumed otherwise). The corpus (--data) gives the words, as in the
 * original: it must be the one the model was trained on. */
#include "sample_util.h"
#include "word_language_model.h"
#include <math.h>

int main(int argc, char **argv) {
    static const char *const flags[] = { "--data=build/data/fortunes-wlm", "--checkpoint=model.safetensors", "--outf=generated.txt", "--words=1000",
                                         "--seed=1111", "--cuda!", "--temperature=1.0", "--log-interval=100", "--model=auto (from the weights; RNN_RELU must be named)",
                                         "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)", "--save-init=none", "--dump-batches=none",
                                         SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    const char *dir = su_flag(argc, argv, "--data", "build/data/fortunes-wlm"), *ckpt = su_flag(argc, argv, "--checkpoint", "model.safetensors");
    const char *outf = su_flag(argc, argv, "--outf", "generated.txt"), *mname = su_flag(argc, argv, "--model", NULL);
    int64_t words = su_flag_count(argc, argv, "--words", 1000), log_interval = su_flag_count(argc, argv, "--log-interval", 100);
    double temperature = su_flag_num(argc, argv, "--temperature", 1.0);
    if (temperature < 1e-3) {
        su_usage(stderr, argv[0], flags);
        fprintf(stderr, "%s: error: --temperature has to be greater or equal 1e-3\n", argv[0]);
        return 2;
    }
    if (su_has(argc, argv, "--cuda") && !su_flag(argc, argv, "--device", NULL)) setenv("DG_DEVICE", "gpu:0", 1);
    if (su_init(argc, argv, (uint64_t)su_flag_count(argc, argv, "--seed", 1111))) return su_die("init");

    dg_tensor_dict *state = dg_load_safetensors(ckpt);
    if (!state) return su_die("checkpoint");
    dg_tensor *enc = dg_tensor_dict_get(state, "encoder.weight"), *whh = dg_tensor_dict_get(state, "rnn.weight_hh_l0");
    if (!enc || !whh || dg_ndim(enc) != 2 || dg_ndim(whh) != 2) {
        fprintf(stderr, "error: %s is not a word_language_model state dict (no encoder.weight / rnn.weight_hh_l0)\n", ckpt);
        return 1;
    }
    int64_t ntoken = dg_dim(enc, 0), emsize = dg_dim(enc, 1), nhid = dg_dim(whh, 1), gates = dg_dim(whh, 0) / nhid;
    dg_rnn_mode mode = gates == 4 ? DG_RNN_LSTM : gates == 3 ? DG_RNN_GRU : DG_RNN_TANH;
    if (mname && !wlm_mode(mname, &mode)) {
        fprintf(stderr, "%s: error: --model is RNN_TANH, RNN_RELU, LSTM or GRU, got %s\n", argv[0], mname);
        return 2;
    }
    int nlayers = 0;
    for (char k[64]; snprintf(k, sizeof k, "rnn.weight_ih_l%d", nlayers), dg_tensor_dict_get(state, k);) nlayers++;

    wlm_dict dict = { 0 };
    char path[4096];
    int64_t n;
    for (int i = 0; i < 3; i++) {   /* data.Corpus: the dictionary over train, valid, test */
        static const char *const part[3] = { "train", "valid", "test" };
        snprintf(path, sizeof path, "%s/%s.txt", dir, part[i]);
        int64_t *ids = wlm_tokenize(&dict, path, &n);
        if (!ids) return 1;
        free(ids);
    }
    if (dict.n != ntoken) {
        fprintf(stderr, "error: the corpus in %s has %lld words, the model %lld: not the corpus it was trained on\n", dir, (long long)dict.n,
                (long long)ntoken);
        return 1;
    }
    dg_layer *model = wlm_model_new(mode, ntoken, emsize, nhid, nlayers, 0.0, false);
    if (!model || dg_layer_load_dict(model, state, dg_load_default_params(), NULL)) return su_die("model");
    dg_tensor_dict_free(state);
    dg_layer_eval(model);
    const char *init_path = su_flag(argc, argv, "--save-init", NULL), *dump_path = su_flag(argc, argv, "--dump-batches", NULL);
    if (init_path && dg_layer_save(model, init_path)) return su_die("save-init");
    int64_t *drawn = dump_path ? calloc((size_t)(words > 0 ? words : 1), sizeof *drawn) : NULL;
    if (dump_path && !drawn) { fprintf(stderr, "error: out of memory\n"); return 1; }

    FILE *out = fopen(outf, "w");
    if (!out) { fprintf(stderr, "error: cannot write %s\n", outf); return 1; }
    dg_no_grad_begin();
    dg_tensor *h = NULL, *c = NULL;
    dg_tensor *input = dg_randint(0, ntoken, DG_SHAPE(1, 1));   /* torch.randint(ntokens, (1, 1)) */
    dg_tensor_dict *dump = dump_path ? dg_tensor_dict_new() : NULL;
    if (dump && dg_tensor_dict_set(dump, "input.0", dg_clone(input))) return su_die("dump-batches");
    for (int64_t i = 0; i < words; i++) {
        dg_scope *s = dg_scope_begin();
        dg_tensor *hn, *cn;
        dg_tensor *output = wlm_forward(model, input, h, c, &hn, &cn);
        /* word_weights = output.squeeze().div(temperature).exp(); multinomial(word_weights, 1) */
        dg_tensor *idx = output ? dg_multinomial(dg_exp(dg_div_scalar(dg_reshape(output, DG_SHAPE(ntoken)), temperature)), 1, false) : NULL;
        if (!idx) return su_die("generate");
        int64_t zero = 0, w = (int64_t)dg_get(idx, &zero);
        if (h) dg_tensor_free(h);
        if (c) dg_tensor_free(c);
        h = dg_keep_in_parent(hn);
        c = cn ? dg_keep_in_parent(cn) : NULL;
        dg_scope_end(s);
        dg_tensor_free(input);
        input = dg_from_data(DG_SHAPE(1, 1), DG_I64, &w);
        if (drawn) drawn[i] = w;
        fprintf(out, "%s%c", dict.words[w], i % 20 == 19 ? '\n' : ' ');
        if (i % log_interval == 0) printf("| Generated %lld/%lld words\n", (long long)i, (long long)words);
    }
    dg_no_grad_end();
    fclose(out);
    if (dump) {
        if (dg_tensor_dict_set(dump, "words", dg_from_data(DG_SHAPE(words), DG_I64, drawn)) || dg_save_safetensors(dump_path, dump))
            return su_die("dump-batches");
        dg_tensor_dict_free(dump);
        free(drawn);
    }
    if (h) dg_tensor_free(h);
    if (c) dg_tensor_free(c);
    dg_tensor_free(input);
    dg_layer_free(model);
    wlm_dict_free(&dict);
    dg_shutdown();
    return 0;
}
