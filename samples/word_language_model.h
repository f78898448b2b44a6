/* samples/word_language_model.h — what word_language_model.c (training) and
 * word_language_model_generate.c (sampling text) share, as pytorch/examples' word_language_model
 * shares data.py and model.py: the corpus (data.py: whitespace tokens, "<eos>" after every line,
 * one dictionary grown over train, valid and test in that order) and RNNModel (model.py: encoder
 * Embedding -> dropout -> RNN/LSTM/GRU -> dropout -> decoder Linear -> log_softmax, the encoder and
 * decoder weights U(-0.1, 0.1), the decoder bias 0, --tied sharing the encoder's weight with the
 * decoder). State-dict names are model.py's: encoder.weight, rnn.weight_ih_l0, ...,
 * decoder.weight, decoder.bias. */
#ifndef WORD_LANGUAGE_MODEL_H
#define WORD_LANGUAGE_MODEL_H

#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- data.py ---- */

typedef struct {
    char **words;                /* idx2word */
    int64_t n, cap;
    int64_t *slot;               /* open-addressing hash of word -> index + 1 (0 empty) */
    int64_t slots;
} wlm_dict;

static inline uint64_t wlm_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The word's index, added when new (add_word); -1 when out of memory. */
static inline int64_t wlm_dict_add(wlm_dict *d, const char *w) {
    if (d->n * 2 >= d->slots) {   /* grow and rehash at half load */
        int64_t ns = d->slots ? d->slots * 2 : 1 << 16;
        int64_t *slot = calloc((size_t)ns, sizeof *slot);
        if (!slot) return -1;
        for (int64_t i = 0; i < d->n; i++) {
            uint64_t h = wlm_hash(d->words[i]) & (uint64_t)(ns - 1);
            while (slot[h]) h = (h + 1) & (uint64_t)(ns - 1);
            slot[h] = i + 1;
        }
        free(d->slot);
        d->slot = slot;
        d->slots = ns;
    }
    uint64_t h = wlm_hash(w) & (uint64_t)(d->slots - 1);
    while (d->slot[h]) {
        if (!strcmp(d->words[d->slot[h] - 1], w)) return d->slot[h] - 1;
        h = (h + 1) & (uint64_t)(d->slots - 1);
    }
    if (d->n == d->cap) {
        int64_t nc = d->cap ? d->cap * 2 : 4096;
        char **nw = realloc(d->words, sizeof *nw * (size_t)nc);
        if (!nw) return -1;
        d->words = nw;
        d->cap = nc;
    }
    if (!(d->words[d->n] = strdup(w))) return -1;
    d->slot[h] = ++d->n;
    return d->n - 1;
}

static inline void wlm_dict_free(wlm_dict *d) {
    for (int64_t i = 0; i < d->n; i++) free(d->words[i]);
    free(d->words);
    free(d->slot);
}

/* tokenize(path): the file's ids, "<eos>" after each line; *n gets the count. NULL with a
 * message on stderr when the file cannot be read. */
static inline int64_t *wlm_tokenize(wlm_dict *d, const char *path, int64_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "error: cannot open %s (make data builds build/data/fortunes-wlm)\n", path); return NULL; }
    int64_t cap = 1 << 16, len = 0;
    int64_t *ids = malloc(sizeof *ids * (size_t)cap);
    char *line = NULL;
    size_t lcap = 0;
    bool oom = !ids;
    while (!oom && getline(&line, &lcap, f) >= 0) {
        for (char *save = NULL, *w = strtok_r(line, " \t\r\n\v\f", &save);; w = strtok_r(NULL, " \t\r\n\v\f", &save)) {
            int64_t id = wlm_dict_add(d, w ? w : "<eos>");
            if (id < 0) { oom = true; break; }
            if (len == cap) {
                int64_t *ni = realloc(ids, sizeof *ids * (size_t)(cap *= 2));
                if (!ni) { oom = true; break; }
                ids = ni;
            }
            ids[len++] = id;
            if (!w) break;
        }
    }
    free(line);
    fclose(f);
    if (oom) { fprintf(stderr, "error: out of memory reading %s\n", path); free(ids); return NULL; }
    *n = len;
    return ids;
}

/* ---- model.py ---- */

static const dg_layer_class wlm_model_class = DG_LAYER_CLASS("RNNModel");

typedef struct { dg_rnn_mode mode; int64_t ntoken; } wlm_state;

/* --model's spelling to a mode; false for another */
static inline bool wlm_mode(const char *name, dg_rnn_mode *m) {
    static const char *const names[] = { "RNN_TANH", "RNN_RELU", "LSTM", "GRU" };
    for (int i = 0; i < 4; i++) if (!strcmp(name, names[i])) { *m = (dg_rnn_mode)i; return true; }
    return false;
}

/* RNNModel(rnn_type, ntoken, ninp, nhid, nlayers, dropout, tie_weights); NULL with a message (dg_last_error, or on
 * stderr for --tied with nhid != emsize, as the original raises) */
static inline dg_layer *wlm_model_new(dg_rnn_mode mode, int64_t ntoken, int64_t ninp, int64_t nhid, int nlayers, double dropout,
                                      bool tied) {
    if (tied && nhid != ninp) {
        fprintf(stderr, "error: When using the tied flag, nhid must be equal to emsize (nhid %lld, emsize %lld)\n", (long long)nhid,
                (long long)ninp);
        return NULL;
    }
    wlm_state *s = malloc(sizeof *s);
    if (!s) return NULL;
    *s = (wlm_state){ mode, ntoken };
    dg_layer *l = dg_layer_new(&wlm_model_class, NULL, s, free);
    dg_nn_rnn_params rp = dg_nn_rnn_default_params();
    rp.num_layers = nlayers;
    rp.dropout = dropout;
    if (!l || dg_layer_add_sublayer(l, "drop", dg_nn_dropout(dropout)) ||
        dg_layer_add_sublayer(l, "encoder", dg_nn_embedding(ntoken, ninp, dg_nn_embedding_default_params())) ||
        dg_layer_add_sublayer(l, "rnn", dg_nn_rnn(mode, ninp, nhid, rp)) ||
        dg_layer_add_sublayer(l, "decoder", dg_nn_linear(nhid, ntoken))) {
        dg_layer_free(l);
        return NULL;
    }
    dg_tensor *enc = dg_layer_parameter(l, "encoder.weight");
    if ((tied && dg_layer_set_parameter(l, "decoder.weight", dg_tensor_ref(enc))) ||   /* self.decoder.weight = self.encoder.weight */
        dg_nn_init_uniform_(enc, -0.1, 0.1) || dg_nn_init_zeros_(dg_layer_parameter(l, "decoder.bias")) ||
        dg_nn_init_uniform_(dg_layer_parameter(l, "decoder.weight"), -0.1, 0.1)) {
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

/* forward(input, hidden): log-probabilities [T N, ntoken]; *hn, *cn the new hidden state (cn
 * for LSTM only). h0/c0 may be NULL (init_hidden's zeros). */
static inline dg_tensor *wlm_forward(dg_layer *m, const dg_tensor *input, const dg_tensor *h0, const dg_tensor *c0, dg_tensor **hn,
                                     dg_tensor **cn) {
    wlm_state *s = dg_layer_user(m);
    dg_layer *drop = dg_layer_sublayer(m, "drop");
    dg_tensor *emb = dg_forward(drop, dg_forward(dg_layer_sublayer(m, "encoder"), input));
    if (!emb) return NULL;
    dg_rnn_result r;
    if (dg_nn_rnn_forward(dg_layer_sublayer(m, "rnn"), emb, h0, c0, NULL, true, &r)) return NULL;
    *hn = r.h_n;
    *cn = r.c_n;
    dg_tensor *decoded = dg_forward(dg_layer_sublayer(m, "decoder"), dg_forward(drop, r.output));
    return dg_log_softmax(dg_reshape(decoded, DG_SHAPE(-1, s->ntoken)), 1);
}

#endif
