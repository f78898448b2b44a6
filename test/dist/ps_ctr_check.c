/* test/dist/ps_ctr_check.c — a small CTR model, dense and sparse parameters, trained either as
 * a parameter-server worker (run by dgrun --server_num S --worker_num W; the embedding table on
 * the servers through dg_fleet_sparse_embedding) or in one process (a local sparse Embedding
 * whose rows start as the servers' rows do, dg_fleet_sparse_initial_row). Every step of the
 * one-process run takes the W workers' batches together, so the two must end with the same
 * parameters: test/dist/ps_jobs.sh runs both and compares the files (the assertions live there).
 *
 * Model: 3 slots of 2 ids each in [0, 200), embedding 4, sum-pooled per slot, with 2 dense
 * features -> Linear 14->8 -> ReLU -> Linear 8->2 -> cross-entropy; SGD lr 0.1 (or Adagrad).
 * Data: a fixed function of (step, example). Usage: ps_ctr_check OUT.safetensors STEPS BATCH
 * [adagrad]. Writes fc1/fc2 weight and bias and "emb" = the rows of ids 0..199 after training.
 * In a job, PS_CHECK_SAVE=DIR saves the servers' tables there after training
 * (dg_fleet_save_persistables), and PS_CHECK_LOAD=DIR starts the servers from such a save
 * (dg_fleet_init_server(DIR)); STEPS may then be 0. PS_CHECK_FIRST_STEP=K numbers the steps from
 * K (the data of a resumed run goes on where the saved one stopped). PS_CHECK_STALL=1 makes every
 * worker wait (2 minutes) after its last step, for a test to kill the job there. PS_CHECK_GEO=K
 * runs the job in geo mode with k_steps K (with one worker it must then equal one process too);
 * PS_CHECK_ASYNC=1 in async mode (the communicator thread, merged pushes and prefetched rows: with
 * one worker and SGD, equal to one process as well). */
#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VOCAB 200
#define DIM 4
#define SLOTS 3
#define PER_SLOT 2

static uint32_t mix(uint64_t x) {
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33, x *= 0xc4ceb9fe1a85ec53ull, x ^= x >> 33;
    return (uint32_t)x;
}

/* example e of step s: its ids, dense features and label (a planted rule on them) */
static void example(int64_t s, int64_t e, int64_t *ids, float *dense, int64_t *label) {
    uint64_t k = (uint64_t)s * 1000003u + (uint64_t)e;
    int hot = 0;
    for (int j = 0; j < SLOTS * PER_SLOT; j++) {
        ids[j] = mix(k * 16 + (uint64_t)j) % VOCAB;
        hot += ids[j] < 60;
    }
    dense[0] = (float)(mix(k * 16 + 14) % 1000) / 1000.0f;
    dense[1] = (float)(mix(k * 16 + 15) % 1000) / 1000.0f;
    *label = (hot + (dense[0] > 0.5f)) >= 2;
}

static int die(const char *what) {
    fprintf(stderr, "ps_ctr_check: %s: %s\n", what, dg_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: %s OUT.safetensors STEPS BATCH [adagrad]\n", argv[0]);
        return 2;
    }
    const char *out = argv[1];
    int64_t steps = atoll(argv[2]), batch = atoll(argv[3]);
    bool adagrad = argc == 5 && strcmp(argv[4], "adagrad") == 0;
    if (steps < 0 || batch < 1 || batch > 256 || (argc == 5 && !adagrad)) {
        fprintf(stderr, "usage: %s OUT.safetensors STEPS BATCH(1..256) [adagrad]\n", argv[0]);
        return 2;
    }
    dg_init_params ip = dg_init_default_params();
    ip.num_threads = 1;
    if (dg_init(&ip) != 0) return die("init");
    bool ps = getenv("TRAINING_ROLE") || getenv("PADDLE_TRAINING_ROLE");
    dg_fleet_sparse_params sp = dg_fleet_sparse_default_params();
    sp.seed = 7;
    sp.init_range = 0.5;
    if (ps) {
        dg_fleet_strategy st = dg_fleet_default_strategy();
        if (getenv("PS_CHECK_GEO")) {   /* geo mode, k_steps = its value */
            st.sync_mode = false;
            st.k_steps = atoi(getenv("PS_CHECK_GEO"));
        }
        if (getenv("PS_CHECK_ASYNC")) st.sync_mode = false;
        if (dg_fleet_init(false, &st) != 0) return die("fleet init");
        if (dg_fleet_is_server()) {
            if (dg_fleet_init_server(getenv("PS_CHECK_LOAD")) != 0 || dg_fleet_run_server() != 0) return die("server");
            dg_fleet_shutdown();
            dg_shutdown();
            return 0;
        }
        if (dg_fleet_init_worker() != 0) return die("init_worker");
    }
    int worker = ps ? dg_fleet_worker_index() : 0, workers = ps ? dg_fleet_worker_num() : 1;

    dg_manual_seed(11);
    dg_layer *fc1 = dg_nn_linear(SLOTS * DIM + 2, 8), *fc2 = dg_nn_linear(8, 2), *emb = NULL;
    if (ps) {
        emb = dg_fleet_sparse_embedding(DIM, sp);
    } else {
        dg_nn_embedding_params ep = dg_nn_embedding_default_params();
        ep.sparse = true;
        emb = dg_nn_embedding(VOCAB, DIM, ep);
        float rows[VOCAB * DIM];
        for (int64_t id = 0; id < VOCAB; id++) dg_fleet_sparse_initial_row(sp.seed, sp.init_range, id, DIM, rows + id * DIM);
        dg_tensor *w = dg_layer_parameter(emb, "weight");
        dg_no_grad_begin();
        int rc = w ? dg_copy_(w, dg_from_data(DG_SHAPE(VOCAB, DIM), DG_F32, rows)) : -1;
        dg_no_grad_end();
        if (rc) return die("embedding rows");
    }
    if (!fc1 || !fc2 || !emb) return die("model");
    dg_tensor *params[5];
    int np = 0;
    const dg_layer *owners[3] = { fc1, fc2, ps ? NULL : emb };
    for (int l = 0; l < 3; l++) {
        if (!owners[l]) continue;
        int n;
        dg_tensor **ps_ = dg_layer_parameters(owners[l], &n);
        for (int i = 0; i < n; i++) params[np++] = ps_[i];
        free(ps_);
    }
    dg_optimizer *opt;
    if (adagrad) {
        dg_adagrad_params ap = dg_adagrad_default_params();
        ap.lr = 0.1;
        opt = dg_adagrad(params, np, ap);
    } else {
        dg_sgd_params p = dg_sgd_default_params();
        p.lr = 0.1;
        opt = dg_sgd(params, np, p);
    }
    if (!opt) return die("optimizer");
    if (ps && !(opt = dg_fleet_distributed_optimizer(opt))) return die("distributed_optimizer");

    int64_t first = getenv("PS_CHECK_FIRST_STEP") ? atoll(getenv("PS_CHECK_FIRST_STEP")) : 0;
    for (int64_t s = first; s < first + steps; s++) {
        int64_t ids[256 * SLOTS * PER_SLOT], labels[256];
        float dense[256 * 2];
        for (int64_t i = 0; i < batch; i++)
            example(s, worker * batch + i, ids + i * SLOTS * PER_SLOT, dense + i * 2, labels + i);
        dg_scope *sc = dg_scope_begin();
        dg_tensor *e = dg_forward(emb, dg_from_data(DG_SHAPE(batch, SLOTS, PER_SLOT), DG_I64, ids));   /* [B, 3, 2, 4] */
        if (ps && e && s + 1 < first + steps) {   /* async: the next step's rows on their way (else a no-op) */
            int64_t next[256 * SLOTS * PER_SLOT];
            float nd[256 * 2];
            int64_t nl[256];
            for (int64_t i = 0; i < batch; i++) example(s + 1, worker * batch + i, next + i * SLOTS * PER_SLOT, nd + i * 2, nl + i);
            if (dg_fleet_sparse_prefetch(emb, dg_from_data(DG_SHAPE(batch, SLOTS, PER_SLOT), DG_I64, next))) return die("prefetch");
        }
        dg_tensor *pooled = e ? dg_reshape(dg_sum(e, (int[]){ 2 }, 1, false), DG_SHAPE(batch, SLOTS * DIM)) : NULL;
        dg_tensor *x = pooled ? dg_concat((dg_tensor *[]){ pooled, dg_from_data(DG_SHAPE(batch, 2), DG_F32, dense) }, 2, 1) : NULL;
        dg_tensor *logits = x ? dg_forward(fc2, dg_relu(dg_forward(fc1, x))) : NULL;
        dg_tensor *loss = logits ? dg_cross_entropy(logits, dg_from_data(DG_SHAPE(batch), DG_I64, labels)) : NULL;
        if (!loss || dg_backward(loss) || dg_optimizer_step(opt)) return die("step");
        dg_optimizer_clear_grad(opt);
        if (s == first || s == first + steps - 1) printf("worker %d of %d step %lld loss %.6f\n", worker, workers, (long long)s, dg_item(loss));
        dg_scope_end(sc);
    }

    if (ps && getenv("PS_CHECK_SAVE") && dg_fleet_save_persistables(getenv("PS_CHECK_SAVE")) != 0) return die("save_persistables");
    /* the parameters: worker 0 writes them (rows of every id: pulled from the servers, or the
     * local table) */
    if (worker == 0) {
        dg_scope *sc = dg_scope_begin();
        int64_t all[VOCAB];
        for (int i = 0; i < VOCAB; i++) all[i] = i;
        dg_tensor *rows;
        if (ps) {
            dg_no_grad_begin();
            rows = dg_forward(emb, dg_from_data(DG_SHAPE(VOCAB), DG_I64, all));
            dg_no_grad_end();
        } else {
            rows = dg_layer_parameter(emb, "weight");
        }
        dg_tensor_dict *d = dg_tensor_dict_new();
        const char *names[4] = { "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias" };
        int rc = rows ? dg_tensor_dict_set(d, "emb", (dg_tensor *)rows) : -1;
        for (int i = 0; i < 4 && !rc; i++) rc = dg_tensor_dict_set(d, names[i], params[i]);
        if (!rc) rc = dg_save_safetensors(out, d);
        dg_tensor_dict_free(d);
        dg_scope_end(sc);
        if (rc) return die("save");
    }
    if (getenv("PS_CHECK_STALL")) {
        fflush(stdout);
        sleep(120);
    }
    if (ps && dg_fleet_stop_worker() != 0) return die("stop_worker");
    dg_optimizer_free(opt);
    dg_layer_free(fc1);
    dg_layer_free(fc2);
    dg_layer_free(emb);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
