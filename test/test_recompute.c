/* test/test_recompute.c — recompute (dg_recompute, dg_layer_set_recompute): gradients,
 * running statistics and the random stream bit-identical to the same steps without recompute
 * (MNIST CNN, a net with dropout, ResNet18, under autocast), grad-ready hooks firing from the
 * second run, memory actually not kept, nested and frozen segments, and the errors. */
#include "test_util.h"

/* ---------------- helpers ---------------- */

static int mark_class(dg_layer *l, void *cls) {
    return dg_layer_is(l, (const dg_layer_class *)cls) ? dg_layer_set_recompute(l, true) : 0;
}

/* Every named float tensor of a and b (parameters' gradients, then buffers) identical bit for bit. */
static void assert_same_grads_and_buffers(dg_layer *a, dg_layer *b, const char *what) {
    int na = 0, nb = 0;
    dg_named_tensor *pa = dg_layer_named_parameters(a, &na), *pb = dg_layer_named_parameters(b, &nb);
    cr_assert_eq(na, nb);
    int compared = 0;
    for (int i = 0; i < na; i++) {
        dg_tensor *ga = dg_grad(pa[i].tensor), *gb = dg_grad(pb[i].tensor);
        cr_assert(ga && gb, "%s: %s has no gradient (%p %p)", what, pa[i].name, (void *)ga, (void *)gb);
        cr_assert(dg_numel(ga) == dg_numel(gb));
        cr_assert(memcmp(dg_data(ga), dg_data(gb), (size_t)dg_numel(ga) * dg_dtype_size(dg_dtype_of(ga))) == 0,
                  "%s: gradient of %s differs with recompute", what, pa[i].name);
        compared++;
    }
    free(pa);
    free(pb);
    dg_named_tensor *ba = dg_layer_named_buffers(a, &na), *bb = dg_layer_named_buffers(b, &nb);
    cr_assert_eq(na, nb);
    for (int i = 0; i < na; i++)
        cr_assert(memcmp(dg_data(ba[i].tensor), dg_data(bb[i].tensor),
                         (size_t)dg_numel(ba[i].tensor) * dg_dtype_size(dg_dtype_of(ba[i].tensor))) == 0,
                  "%s: buffer %s differs with recompute", what, ba[i].name);
    free(ba);
    free(bb);
    cr_assert(compared > 0);
}

static dg_tensor *labels(int64_t n, int classes, int salt) {
    int64_t v[64];
    for (int64_t i = 0; i < n && i < 64; i++) v[i] = (i * 7 + salt * 3) % classes;
    return dg_from_data((dg_shape){ 1, { n } }, DG_I64, v);
}

/* `steps` SGD steps of net on x (seeded batches), cross-entropy against labels; the gradients of
 * the last step are left in place (not cleared) for comparison. */
static void train(dg_layer *net, dg_shape xs, int classes, int steps, uint64_t data_seed) {
    int np = 0;
    dg_tensor **ps = dg_layer_parameters(net, &np);
    dg_sgd_params sp = dg_sgd_default_params();
    sp.lr = 0.05;
    dg_optimizer *opt = dg_sgd(ps, np, sp);
    free(ps);
    cr_assert(opt);
    dg_generator *data = dg_generator_new(data_seed);
    for (int s = 0; s < steps; s++) {
        dg_scope *sc = dg_scope_begin();
        dg_generator *prev = dg_generator_use(data);
        dg_tensor *x = dg_randn(xs, DG_F32);
        dg_tensor *lab = labels(xs.d[0], classes, s);
        dg_generator_use(prev);
        dg_tensor *loss = dg_cross_entropy(dg_forward(net, x), lab);
        cr_assert(loss, "%s", dg_last_error());
        if (s + 1 < steps) dg_optimizer_clear_grad(opt);
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        if (s + 1 < steps) cr_assert_eq(dg_optimizer_step(opt), 0);
        dg_scope_end(sc);
    }
    dg_generator_free(data);
    dg_optimizer_free(opt);
}

/* Builds the same net twice (seeded), marks the second's `cls` layers (or the layers mark()
 * picks), trains both identically and compares; also that the default generator ends at the
 * same position (the replayed draws are given back). */
static void compare(dg_layer *(*make)(void), const dg_layer_class *cls, dg_shape xs, int classes, int steps, const char *what) {
    /* a fixed thread count: the library otherwise follows the machine's load, and sums split
     * over another number of threads round differently whatever recompute does */
    dg_set_num_threads(2);
    dg_manual_seed(7);
    dg_layer *a = make();
    dg_manual_seed(7);
    dg_layer *b = make();
    cr_assert(a && b, "%s", dg_last_error());
    cr_assert_eq(dg_layer_apply(b, mark_class, (void *)cls), 0, "%s", dg_last_error());
    dg_manual_seed(99);
    train(a, xs, classes, steps, 5);
    dg_generator_state ga, gb;
    dg_generator_get_state(dg_default_generator(), &ga);
    dg_manual_seed(99);
    train(b, xs, classes, steps, 5);
    dg_generator_get_state(dg_default_generator(), &gb);
    cr_assert_eq(ga.offset, gb.offset, "%s: the random stream ends at %llu with recompute, %llu without", what,
                 (unsigned long long)gb.offset, (unsigned long long)ga.offset);
    assert_same_grads_and_buffers(a, b, what);
    dg_layer_free(a);
    dg_layer_free(b);
}

/* ---------------- nets ---------------- */

static dg_layer *make_mnist(void) { return dg_mnist_cnn(); }

/* a conv segment with dropout and batch norm inside, checkpointed as one Sequential */
static const dg_layer_class *g_seq_class;
static dg_layer *make_dropout_net(void) {
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.padding = 1;
    dg_layer *seg = dg_nn_sequential(5, dg_nn_conv2d(3, 8, 3, cp), dg_nn_relu(), dg_nn_dropout(0.3),
                                     dg_nn_conv2d(8, 8, 3, cp), dg_nn_batch_norm2d(8, dg_nn_batch_norm_default_params()));
    g_seq_class = dg_layer_class_of(seg);
    return dg_nn_sequential(5, seg, dg_nn_relu(), dg_nn_flatten(1, -1), dg_nn_dropout(0.2), dg_nn_linear(8 * 8 * 8, 5));
}

static dg_layer *make_resnet18(void) {
    dg_resnet_params p = dg_resnet_default_params();
    p.num_classes = 10;
    return dg_resnet18(p);
}

/* ---------------- tests ---------------- */

Test(recompute, mnist_cnn_gradients_are_bit_identical) {
    /* each conv and the classifier recomputed: a segment whose input is data (conv1) needs its
     * node for its parameters' sake alone */
    compare(make_mnist, dg_nn_conv2d_class(), (dg_shape){ 4, { 8, 1, 28, 28 } }, 10, 3, "MNIST CNN");
}

Test(recompute, dropout_masks_are_replayed) {
    dg_manual_seed(1);
    dg_layer *probe = make_dropout_net();
    dg_layer_free(probe);
    compare(make_dropout_net, g_seq_class, (dg_shape){ 4, { 4, 3, 8, 8 } }, 5, 3, "conv net with dropout");
}

Test(recompute, resnet18_gradients_and_running_stats_are_bit_identical) {
    compare(make_resnet18, dg_resnet_basic_block_class(), (dg_shape){ 4, { 2, 3, 32, 32 } }, 10, 2, "ResNet18");
}

Test(recompute, under_autocast) {
    dg_set_num_threads(2);
    dg_manual_seed(3);
    dg_layer *a = make_resnet18();
    dg_manual_seed(3);
    dg_layer *b = make_resnet18();
    cr_assert_eq(dg_layer_apply(b, mark_class, (void *)dg_resnet_basic_block_class()), 0);
    dg_layer *nets[2] = { a, b };
    dg_manual_seed(11);
    dg_tensor *x = dg_randn((dg_shape){ 4, { 2, 3, 32, 32 } }, DG_F32);
    dg_tensor *lab = labels(2, 10, 1);
    for (int k = 0; k < 2; k++) {
        dg_scope *sc = dg_scope_begin();
        cr_assert_eq(dg_autocast_begin(DG_BF16), 0);
        dg_tensor *out = dg_forward(nets[k], x);
        cr_assert_eq(dg_autocast_end(), 0);
        /* backward outside the region, as the tutorials write it: the second run must still cast */
        dg_tensor *loss = dg_cross_entropy(dg_cast(out, DG_F32), lab);
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        dg_scope_end(sc);
    }
    assert_same_grads_and_buffers(a, b, "ResNet18 under bf16 autocast");
    dg_tensor_free(x);
    dg_tensor_free(lab);
    dg_layer_free(a);
    dg_layer_free(b);
}

static void count_hook(dg_tensor *leaf, void *user) { (*(int *)user)++; }

Test(recompute, grad_ready_hooks_fire_once_from_the_second_run) {
    dg_manual_seed(2);
    dg_layer *net = make_resnet18();
    cr_assert_eq(dg_layer_apply(net, mark_class, (void *)dg_resnet_basic_block_class()), 0);
    int n = 0;
    dg_tensor **ps = dg_layer_parameters(net, &n);
    int *fired = calloc((size_t)n, sizeof *fired);
    for (int i = 0; i < n; i++) cr_assert_eq(dg_register_grad_hook(ps[i], count_hook, &fired[i]), 0);
    dg_scope *sc = dg_scope_begin();
    dg_tensor *loss = dg_mean_all(dg_forward(net, dg_randn((dg_shape){ 4, { 2, 3, 32, 32 } }, DG_F32)));
    /* nothing fired during forward, then each parameter's hook exactly once */
    for (int i = 0; i < n; i++) cr_assert_eq(fired[i], 0);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    for (int i = 0; i < n; i++) cr_assert_eq(fired[i], 1, "parameter %d's hook fired %d times", i, fired[i]);
    dg_scope_end(sc);
    free(fired);
    free(ps);
    dg_layer_free(net);
}

/* Bytes the library holds after a forward: recompute keeps a block's input only. */
static int64_t bytes_held_after_forward(bool recompute) {
    dg_manual_seed(4);
    dg_layer *blocks[6];
    for (int i = 0; i < 6; i++) {
        blocks[i] = dg_resnet_basic_block(16, 16, 1, DG_F32);
        if (recompute) dg_layer_set_recompute(blocks[i], true);
    }
    dg_layer *net = dg_nn_sequential_array(6, blocks);
    dg_tensor *x = dg_randn((dg_shape){ 4, { 8, 16, 32, 32 } }, DG_F32);
    dg_memory_stats before, after;
    dg_device cpu = { DG_CPU, 0 };
    dg_memory_stats_get(cpu, &before);
    dg_scope *sc = dg_scope_begin();
    dg_tensor *loss = dg_mean_all(dg_forward(net, x));
    cr_assert(loss);
    dg_memory_stats_get(cpu, &after);
    cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
    dg_scope_end(sc);
    dg_tensor_free(x);
    dg_layer_free(net);
    return (int64_t)after.allocated - (int64_t)before.allocated;
}

Test(recompute, keeps_only_the_inputs_of_recomputed_blocks) {
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("under AddressSanitizer every block goes to the system and the pool keeps no statistics");
#endif
    int64_t plain = bytes_held_after_forward(false), rec = bytes_held_after_forward(true);
    int64_t act = 8 * 16 * 32 * 32 * 4;   /* one block's input */
    /* six blocks' inputs and the output at most, against about eight activations per block */
    cr_assert(rec <= 8 * act, "recompute holds %lld bytes after forward (a block's input is %lld)", (long long)rec, (long long)act);
    cr_assert(plain > 3 * rec, "without recompute %lld bytes, with %lld", (long long)plain, (long long)rec);
}

static dg_tensor *twice(void *ctx, const dg_tensor *x) { return dg_mul_scalar(dg_tanh(x), 2.0); }
static dg_tensor *outer_fn(void *ctx, const dg_tensor *x) {
    return dg_recompute("inner", twice, NULL, dg_exp(dg_recompute("inner", twice, NULL, x)));
}

Test(recompute, nested_segments_and_function_form) {
    dg_tensor *x = dg_randn((dg_shape){ 1, { 16 } }, DG_F32);
    dg_set_requires_grad(x, true);
    dg_tensor *y = dg_sum_all(dg_recompute("outer", outer_fn, NULL, x));
    cr_assert(y);
    cr_assert_eq(dg_backward(y), 0, "%s", dg_last_error());
    dg_tensor *g1 = dg_clone(dg_grad(x));
    dg_clear_grad(x);
    /* the same function written out with no recompute at all */
    dg_tensor *z = dg_sum_all(dg_mul_scalar(dg_tanh(dg_exp(dg_mul_scalar(dg_tanh(x), 2.0))), 2.0));
    cr_assert_eq(dg_backward(z), 0);
    dg_tensor *g2 = dg_grad(x);
    cr_assert(memcmp(dg_data(g1), dg_data(g2), 16 * sizeof(float)) == 0, "nested recompute's gradient differs from the plain one");
    dg_tensor_free(g1);
    dg_tensor_free(y);
    dg_tensor_free(z);
    dg_tensor_free(x);
}

/* backward called inside an autocast region: a forward that first ran outside every region runs
 * again outside them (else its second run would be bf16 and its gradients rounded) */
static dg_tensor *linear_tanh(void *ctx, const dg_tensor *x) { return dg_tanh(dg_forward((dg_layer *)ctx, x)); }
Test(recompute, backward_inside_a_region_replays_the_forwards_own) {
    dg_set_num_threads(2);
    dg_manual_seed(9);
    dg_layer *lin = dg_nn_linear(8, 8);
    dg_tensor *x = dg_randn((dg_shape){ 2, { 4, 8 } }, DG_F32);
    dg_set_requires_grad(x, true);
    dg_tensor *grads[2];
    for (int k = 0; k < 2; k++) {
        dg_tensor *y = k ? dg_recompute("seg", linear_tanh, lin, x) : linear_tanh(lin, x);
        dg_tensor *l = dg_sum_all(y);
        cr_assert_eq(dg_autocast_begin(DG_BF16), 0);
        cr_assert_eq(dg_backward(l), 0, "%s", dg_last_error());
        cr_assert_eq(dg_autocast_end(), 0);
        grads[k] = dg_clone(dg_grad(x));
        dg_clear_grad(x);
        dg_tensor_free(l);
        dg_tensor_free(y);
    }
    cr_assert(memcmp(dg_data(grads[0]), dg_data(grads[1]), 32 * sizeof(float)) == 0,
              "the recomputed forward ran under the region backward was called in");
    dg_tensor_free(grads[0]);
    dg_tensor_free(grads[1]);
    dg_tensor_free(x);
    dg_layer_free(lin);
}

/* no scope open, every result freed: recompute leaves no tensor behind (its log of random
 * generators included), also when the forward returns a view of its input */
static dg_tensor *double_it(void *ctx, const dg_tensor *x) { return dg_mul_scalar(x, 2.0); }
static dg_tensor *view_of(void *ctx, const dg_tensor *x) { return dg_reshape(x, dg_shape_of(x)); }
Test(recompute, leaves_no_tensor_behind) {
    dg_tensor *x = dg_randn((dg_shape){ 1, { 8 } }, DG_F32);
    dg_set_requires_grad(x, true);
    size_t live = dg_live_tensors();
    for (int i = 0; i < 20; i++) {
        dg_tensor *y = dg_recompute("r", i % 2 ? view_of : double_it, NULL, x);
        cr_assert(y, "%s", dg_last_error());
        dg_tensor *l = dg_sum_all(y);
        cr_assert_eq(dg_backward(l), 0, "%s", dg_last_error());
        dg_tensor_free(l);
        dg_tensor_free(y);
    }
    dg_clear_grad(x);
    cr_assert_eq(dg_live_tensors(), live, "%zu tensors left behind by 20 recomputes", dg_live_tensors() - live);
    dg_tensor_free(x);
}

Test(recompute, frozen_segment_records_nothing) {
    dg_layer *lin = dg_nn_linear(4, 3);
    dg_layer_set_recompute(lin, true);
    dg_set_requires_grad(dg_layer_parameter(lin, "weight"), false);
    dg_set_requires_grad(dg_layer_parameter(lin, "bias"), false);
    dg_tensor *x = dg_randn((dg_shape){ 2, { 2, 4 } }, DG_F32);
    dg_tensor *y = dg_forward(lin, x);
    cr_assert(y && !dg_requires_grad(y), "nothing needs a gradient, so nothing is recorded");
    dg_set_requires_grad(dg_layer_parameter(lin, "bias"), true);
    dg_tensor *y2 = dg_forward(lin, x);
    cr_assert(y2 && dg_requires_grad(y2));
    cr_assert_str_eq(dg_grad_fn_name(y2), "recompute");
    dg_tensor *l = dg_sum_all(y2);
    cr_assert_eq(dg_backward(l), 0, "%s", dg_last_error());
    cr_assert(dg_grad(dg_layer_parameter(lin, "bias")) && !dg_grad(dg_layer_parameter(lin, "weight")));
    dg_tensor_free(l);
    dg_tensor_free(y);
    dg_tensor_free(y2);
    dg_tensor_free(x);
    dg_layer_free(lin);
}

static dg_tensor *returns_input_view(void *ctx, const dg_tensor *x) { return dg_reshape(x, dg_shape_of(x)); }
static int g_calls;
static dg_tensor *shape_changes(void *ctx, const dg_tensor *x) {
    return ++g_calls == 1 ? dg_mul_scalar(x, 2.0) : dg_sum_all(dg_mul_scalar(x, 2.0));
}

Test(recompute, errors) {
    dg_tensor *x = dg_randn((dg_shape){ 1, { 4 } }, DG_F32);
    dg_set_requires_grad(x, true);
    cr_assert_null(dg_recompute("r", NULL, NULL, x));
    cr_assert(strstr(dg_last_error(), "fn is NULL"), "%s", dg_last_error());
    /* a view of the input is given a node of its own; the input stays a leaf */
    dg_tensor *v = dg_recompute("view", returns_input_view, NULL, x);
    cr_assert(v && dg_is_leaf(x) && dg_grad_fn_name(v));
    /* a forward that changes between the runs is caught */
    g_calls = 0;
    dg_tensor *y = dg_recompute("changing", shape_changes, NULL, x);
    cr_assert(y);
    dg_tensor *s = dg_sum_all(y);
    cr_assert_neq(dg_backward(s), 0);
    cr_assert(strstr(dg_last_error(), "must be deterministic"), "%s", dg_last_error());
    dg_layer *ce = dg_nn_cross_entropy_loss(dg_cross_entropy_default_params());
    cr_assert_neq(dg_layer_set_recompute(ce, true), 0);
    cr_assert(strstr(dg_last_error(), "one tensor"), "%s", dg_last_error());
    cr_assert_neq(dg_layer_set_recompute(NULL, true), 0);
    dg_layer_free(ce);
    dg_tensor_free(s);
    dg_tensor_free(y);
    dg_tensor_free(v);
    dg_tensor_free(x);
}
