/* test/test_optim_rows.c — optimizers on a sparse embedding's row gradient (dg_sparse_grad):
 * SGD and Adagrad without weight decay step only those rows, and must land where the dense step
 * over the whole table does. */
#include "test_util.h"

/* A sparse embedding's row gradient: SGD and Adagrad (no weight decay) step only its rows, and the
 * result is the dense step's bit for bit (the same parameters stepped after dg_grad folded the
 * rows into a dense gradient); with weight decay every row moves, through the dense step. */
static void rows_vs_dense(int kind, double wd) {
    const int64_t V = 50, D = 4;
    dg_tensor *w[2];
    dg_optimizer *o[2];
    for (int k = 0; k < 2; k++) {
        dg_manual_seed(3);
        w[k] = dg_keep(dg_randn(DG_SHAPE(V, D), DG_F32));
        dg_set_requires_grad(w[k], true);
        if (kind == 0) {
            dg_sgd_params p = dg_sgd_default_params();
            p.lr = 0.3, p.weight_decay = wd;
            o[k] = dg_sgd(&w[k], 1, p);
        } else {
            dg_adagrad_params p = dg_adagrad_default_params();
            p.lr = 0.3, p.weight_decay = wd, p.lr_decay = 0.01;
            o[k] = dg_adagrad(&w[k], 1, p);
        }
    }
    dg_embedding_params ep = dg_embedding_default_params();
    ep.sparse = true;
    for (int step = 0; step < 4; step++) {
        int64_t ids[6] = { 3, 7, 3, 40 + step, 11, 7 };
        for (int k = 0; k < 2; k++) {
            dg_scope *sc = dg_scope_begin();
            dg_tensor *e = dg_embedding(dg_from_data(DG_SHAPE(6), DG_I64, ids), w[k], ep);
            dg_tensor *loss = dg_sum(dg_mul(e, e), NULL, 0, false);
            cr_assert(loss && dg_backward(loss) == 0, "%s", dg_last_error());
            cr_assert(dg_grad_is_rows(w[k]), "the embedding's gradient is rows");
            if (k == 1) cr_assert(dg_grad(w[1]), "folded to dense");
            cr_assert(!dg_grad_is_rows(w[1]));
            cr_assert_eq(dg_optimizer_step(o[k]), 0, "%s", dg_last_error());
            dg_optimizer_clear_grad(o[k]);
            dg_scope_end(sc);
        }
    }
    cr_expect(memcmp(dg_data(w[0]), dg_data(w[1]), (size_t)(V * D) * sizeof(float)) == 0,
              "%s wd %g: the row step differs from the dense one", kind ? "adagrad" : "sgd", wd);
    for (int k = 0; k < 2; k++) {
        dg_optimizer_free(o[k]);
        dg_tensor_free(w[k]);
    }
}
Test(optim, sparse_rows_step_equals_dense_step) {
    rows_vs_dense(0, 0);
    rows_vs_dense(1, 0);
    rows_vs_dense(0, 0.1);
    rows_vs_dense(1, 0.1);
}
