/* test/install/custom_op_main.c — appended to README.md's custom op (custom_op.c) by
 * test/install/run.sh: the op's value and gradient (3 x^2) on a few points, called with no
 * scope open as the README says is safe. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* a failed assertion names what disagreed and exits 1, which run.sh reports */
#define INSTALL_ASSERT(cond, ...) do { if (!(cond)) { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } } while (0)

int main(void) {
    dg_tensor *x = dg_from_data(DG_SHAPE(3), DG_F32, (float[]){ 1, -2, 0.5f });
    dg_set_requires_grad(x, true);
    dg_tensor *y = cube(x);
    dg_tensor *loss = dg_sum_all(y);
    INSTALL_ASSERT(loss && dg_backward(loss) == 0, "cube: %s", dg_last_error());
    const float want_y[3] = { 1, -8, 0.125f }, want_g[3] = { 3, 12, 0.75f };
    for (int i = 0; i < 3; i++) {
        double yi = dg_get(y, (int64_t[]){ i }), gi = dg_get(dg_grad(x), (int64_t[]){ i });
        INSTALL_ASSERT(fabs(yi - want_y[i]) <= 1e-6 && fabs(gi - want_g[i]) <= 1e-5, "cube: element %d: y %g (want %g), grad %g (want %g)",
                       i, yi, want_y[i], gi, want_g[i]);
    }
    printf("custom op: cube and its gradient agree\n");
    dg_tensor_free(loss);
    dg_tensor_free(y);
    dg_tensor_free(x);
    return 0;
}
