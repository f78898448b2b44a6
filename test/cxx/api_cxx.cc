// test/cxx/api_cxx.cc — the public headers from C++ (11 and 17, g++ and clang++; `make test-cxx`):
// shapes with runtime dims (DG_SHAPE(n, ...)), the scalar shape, params structs from their
// default functions and by designated initialisers (every field given: fields are taken
// literally), and a few Adam steps of a linear layer whose loss must fall. Exits non-zero on failure.
#include <dygraph.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(cond, what)                                                           \
    do {                                                                            \
        if (!(cond)) {                                                              \
            std::fprintf(stderr, "api_cxx: %s failed: %s\n", what, dg_last_error()); \
            return 1;                                                               \
        }                                                                           \
    } while (0)

int main(int argc, char **) {
    CHECK(dg_init(nullptr) == 0, "dg_init");
    const int n = 8 + argc;   // a runtime batch size
    dg_manual_seed(5);
    dg_tensor *x = dg_randn(DG_SHAPE(n, 4), DG_F32);
    dg_tensor *w_true = dg_randn(DG_SHAPE(4, 1), DG_F32);
    dg_tensor *y = dg_matmul(x, w_true);
    dg_tensor *s = dg_full(DG_SCALAR_SHAPE, 2.0, DG_F32);
    CHECK(x && y && s && dg_ndim(s) == 0 && dg_dim(x, 0) == n, "tensors with runtime shapes");

    // a literal is refused (core.h, DG_PARAMS_TAG): the params start from their default function
    dg_layer *refused = dg_nn_linear_ext(4, 1, dg_nn_linear_params{});
    CHECK(!refused && std::strstr(dg_last_error(), "dg_nn_linear_default_params"), "a params literal is refused");
    dg_nn_linear_params lp = dg_nn_linear_default_params();
    lp.bias = true;
    dg_layer *lin = dg_nn_linear_ext(4, 1, lp);
    int np = 0;
    dg_tensor **ps = dg_layer_parameters(lin, &np);
    dg_adam_params ap = dg_adam_default_params();   // PyTorch's betas and eps
    ap.lr = 0.05;
    dg_optimizer *opt = dg_adam(ps, np, ap);
    std::free(ps);
    CHECK(lin && opt, "linear layer and Adam");
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        dg_scope *sc = dg_scope_begin();
        dg_tensor *loss = dg_mse_loss(dg_forward(lin, x), y);
        CHECK(loss && dg_backward(loss) == 0 && dg_optimizer_step(opt) == 0, "training step");
        dg_optimizer_clear_grad(opt);
        last = dg_item(loss);
        if (step == 0) first = last;
        dg_scope_end(sc);
    }
    CHECK(last < first * 0.5, "loss falling");
    std::printf("api_cxx (C++%ld): batch %d, loss %.4f -> %.4f\n", (long)__cplusplus / 100 % 100, n, first, last);
    // dygraph/onnx.h: a by-value params struct, a refusal reported through the error API
    dg_onnx_export_params op = dg_onnx_export_default_params();
    op.opset = 11;
    CHECK(op.dynamic_batch && dg_onnx_export(lin, x, "/tmp/never.onnx", op) != 0, "onnx export refuses opset 11");
    dg_clear_error();
    dg_optimizer_free(opt);
    dg_layer_free(lin);
    dg_tensor_free(x);
    dg_tensor_free(w_true);
    dg_tensor_free(y);
    dg_tensor_free(s);
    return 0;
}
