/* samples/linear_single.c — seed 001's single-card LinearNet in C, written with the core ops:
 * two Linear layers (10 -> 10 -> 1), MSE loss, Adam (lr 0.001), 20 steps on random batches,
 * printing `step:N\tloss:[X]` like the seed. Until the nn/optim modules exist the layers are
 * parameter tensors and Adam is written out with in-place ops. */
#include <dygraph.h>
#include <math.h>
#include <stdio.h>

typedef struct { dg_tensor *p, *m, *v; } adam_slot;

/* Paddle's Linear init: weight [in, out] Xavier-uniform, bound sqrt(6 / (in + out)); bias 0. */
static dg_tensor *param(dg_shape s, double bound) {
    dg_tensor *t = bound > 0 ? dg_uniform(s, -bound, bound, DG_F32) : dg_zeros(s, DG_F32);
    dg_set_requires_grad(t, true);
    return t;
}

int main(void) {
    if (dg_init(NULL) != 0) { fprintf(stderr, "init: %s\n", dg_last_error()); return 1; }
    dg_manual_seed(2020);
    adam_slot s[4] = {
        { .p = param(DG_SHAPE(10, 10), sqrt(6.0 / 20)) }, { .p = param(DG_SHAPE(10), 0) },
        { .p = param(DG_SHAPE(10, 1), sqrt(6.0 / 11)) }, { .p = param(DG_SHAPE(1), 0) },
    };
    for (int i = 0; i < 4; i++) { s[i].m = dg_zeros_like(s[i].p); s[i].v = dg_zeros_like(s[i].p); }
    const double lr = 0.001, b1 = 0.9, b2 = 0.999, eps = 1e-8;

    for (int step = 0; step < 20; step++) {
        dg_scope *scope = dg_scope_begin();
        dg_tensor *inputs = dg_randn(DG_SHAPE(10, 10), DG_F32);
        dg_tensor *outputs = dg_linear(dg_linear(inputs, s[0].p, s[1].p), s[2].p, s[3].p);
        dg_tensor *labels = dg_randn(DG_SHAPE(10, 1), DG_F32);
        dg_tensor *loss = dg_mse_loss(outputs, labels);
        if (!loss || dg_backward(loss) != 0) { fprintf(stderr, "step %d: %s\n", step, dg_last_error()); return 1; }
        printf("step:%d\tloss:[%.7g]\n", step, dg_item(loss));

        /* Adam: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr_t m / (sqrt(v) + eps_t) */
        dg_no_grad_begin();
        double bc1 = 1 - pow(b1, step + 1), bc2 = 1 - pow(b2, step + 1);
        for (int i = 0; i < 4; i++) {
            dg_tensor *g = dg_grad(s[i].p);
            dg_scale_(s[i].m, b1);
            dg_axpy_(s[i].m, 1 - b1, g);
            dg_scale_(s[i].v, b2);
            dg_axpy_(s[i].v, 1 - b2, dg_mul(g, g));
            dg_tensor *upd = dg_div(s[i].m, dg_add_scalar(dg_sqrt(s[i].v), eps * sqrt(bc2)));
            dg_axpy_(s[i].p, -lr * sqrt(bc2) / bc1, upd);
            dg_clear_grad(s[i].p);
        }
        dg_no_grad_end();
        dg_scope_end(scope);
    }
    for (int i = 0; i < 4; i++) { dg_tensor_free(s[i].p); dg_tensor_free(s[i].m); dg_tensor_free(s[i].v); }
    dg_shutdown();
    return 0;
}
