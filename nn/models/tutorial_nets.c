/* nn/models/tutorial_nets.c — the Paddle tutorials' networks: Paddle's multi-GPU MNIST tutorial's MNIST CNN, Paddle's Fleet collective tutorial's CIFAR-10 MyNet
 * and face-keypoint FaceNet (a resnet18 backbone with two Linear heads). Sublayer names are the
 * the Paddle tutorials' attribute names, so parameters are "conv1.weight", "linear1.bias", "backbone.fc.weight",
 * "outLayer1.0.weight", ... Weights use torch's layout (Linear [out, in]). */
#include "../nn_internal.h"
#include <dygraph/models.h>

static const dg_layer_class mnist_class = DG_LAYER_CLASS("MNIST");
const dg_layer_class *dg_mnist_cnn_class(void) { return &mnist_class; }
static const dg_layer_class mynet_class = DG_LAYER_CLASS("MyNet");
const dg_layer_class *dg_cifar_mynet_class(void) { return &mynet_class; }
static const dg_layer_class facenet_class = DG_LAYER_CLASS("FaceNet");
const dg_layer_class *dg_facenet_class(void) { return &facenet_class; }

#define ADD(rc, parent, name, ctor, slot)                                                    \
    do {                                                                                     \
        if (!(rc)) {                                                                         \
            dg_layer *sub_ = (ctor);                                                         \
            (rc) = dg_layer_add_sublayer((parent), (name), sub_);                            \
            if (!(rc)) (slot) = sub_;                                                        \
        }                                                                                    \
    } while (0)

static dg_layer *conv(int64_t in, int64_t out, int k, int padding) {
    dg_nn_conv2d_params p = dg_nn_conv2d_default_params();
    p.padding = padding;
    return dg_nn_conv2d(in, out, k, p);
}
static dg_layer *pool2(void) {
    dg_nn_pool2d_params p = dg_nn_pool2d_default_params();
    p.stride = 2;
    return dg_nn_max_pool2d(2, p);
}

/* The tutorials' relu -> max pool, computed as max pool -> relu: the two commute (relu is monotonic
 * and keeps NaN), and the gradient reaches the same input either way (the window's first
 * maximum when it is positive, no input otherwise), so values and gradients are the seeds'
 * while the ReLU and its gradient touch a quarter of the values. */
/* Sublayers are looked up in the tree at each forward rather than kept in the state, so that a
 * replaced one (dg_layer_replace_sublayer) is the one that runs; the states' pointers serve
 * construction only. */
#define SUB(self, name) dg_layer_sublayer((self), (name))

static dg_tensor *relu_then_pool(dg_layer *pool, const dg_tensor *x) { return dg_relu(dg_forward(pool, x)); }

/* Checks x is [N, c, h, w] (h, w < 0: any) and names the model in the message. */
static bool check_input(dg_layer *self, const dg_tensor *x, int64_t c, int64_t h, int64_t w) {
    char sh[96];
    if (dg_ndim(x) == 4 && dg_dim(x, 1) == c && (h < 0 || dg_dim(x, 2) == h) && (w < 0 || dg_dim(x, 3) == w)) return true;
    if (h < 0) DG_LAYER_ERROR(self, "input %s must be [N, %lld, H, W]", dg_shape_str(x, sh, sizeof sh), (long long)c);
    else DG_LAYER_ERROR(self, "input %s must be [N, %lld, %lld, %lld]", dg_shape_str(x, sh, sizeof sh), (long long)c,
                        (long long)h, (long long)w);
    return false;
}

/* ---- Paddle's multi-GPU MNIST tutorial: MNIST ---- */

typedef struct { dg_layer *conv1, *pool1, *conv2, *pool2, *fc; } mnist_state;

static dg_tensor *mnist_forward(dg_layer *self, const dg_tensor *x) {
    if (!check_input(self, x, 1, 28, 28)) return NULL;
    dg_tensor *y = relu_then_pool(SUB(self, "pool1"), dg_forward(SUB(self, "conv1"), x));
    y = relu_then_pool(SUB(self, "pool2"), dg_forward(SUB(self, "conv2"), y));
    return dg_forward(SUB(self, "fc"), dg_flatten(y, 1, -1));   /* logits: the tutorial's softmax goes into the loss */
}

dg_layer *dg_mnist_cnn(void) {
    mnist_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "MNIST: out of memory"); return NULL; }
    dg_layer *l = dg_layer_new(&mnist_class, mnist_forward, s, free);
    if (!l) return NULL;
    int rc = 0;
    ADD(rc, l, "conv1", conv(1, 20, 5, 2), s->conv1);
    ADD(rc, l, "pool1", pool2(), s->pool1);
    ADD(rc, l, "conv2", conv(20, 20, 5, 2), s->conv2);
    ADD(rc, l, "pool2", pool2(), s->pool2);
    ADD(rc, l, "fc", dg_nn_linear(20 * 7 * 7, 10), s->fc);
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

/* ---- Paddle's Fleet collective tutorial: CIFAR-10 MyNet ---- */

typedef struct { dg_layer *conv1, *pool1, *conv2, *pool2, *conv3, *flatten, *linear1, *linear2; } mynet_state;

static dg_tensor *mynet_forward(dg_layer *self, const dg_tensor *x) {
    if (!check_input(self, x, 3, 32, 32)) return NULL;
    dg_tensor *y = relu_then_pool(SUB(self, "pool1"), dg_forward(SUB(self, "conv1"), x));
    y = relu_then_pool(SUB(self, "pool2"), dg_forward(SUB(self, "conv2"), y));
    y = dg_relu(dg_forward(SUB(self, "conv3"), y));
    y = dg_relu(dg_forward(SUB(self, "linear1"), dg_forward(SUB(self, "flatten"), y)));
    return dg_forward(SUB(self, "linear2"), y);
}

dg_layer *dg_cifar_mynet(int64_t num_classes) {
    if (num_classes < 1) {
        DG_ERR(DG_EINVAL, "MyNet: num_classes must be >= 1, got %lld", (long long)num_classes);
        return NULL;
    }
    mynet_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "MyNet: out of memory"); return NULL; }
    dg_layer *l = dg_layer_new(&mynet_class, mynet_forward, s, free);
    if (!l) return NULL;
    int rc = 0;
    ADD(rc, l, "conv1", conv(3, 32, 3, 0), s->conv1);
    ADD(rc, l, "pool1", pool2(), s->pool1);
    ADD(rc, l, "conv2", conv(32, 64, 3, 0), s->conv2);
    ADD(rc, l, "pool2", pool2(), s->pool2);
    ADD(rc, l, "conv3", conv(64, 64, 3, 0), s->conv3);
    ADD(rc, l, "flatten", dg_nn_flatten(1, -1), s->flatten);
    ADD(rc, l, "linear1", dg_nn_linear(1024, 64), s->linear1);
    ADD(rc, l, "linear2", dg_nn_linear(64, num_classes), s->linear2);
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

/* ---- Paddle's Fleet collective tutorial: FaceNet ---- */

typedef struct { dg_layer *backbone, *out1, *out2; } facenet_state;

static dg_tensor *facenet_forward(dg_layer *self, const dg_tensor *x) {
    if (!check_input(self, x, 3, -1, -1)) return NULL;
    return dg_forward(SUB(self, "outLayer2"), dg_forward(SUB(self, "outLayer1"), dg_forward(SUB(self, "backbone"), x)));
}

dg_layer *dg_facenet(int64_t num_keypoints) {
    if (num_keypoints < 1 || num_keypoints > (INT64_C(1) << 40)) {
        DG_ERR(DG_EINVAL, "FaceNet: num_keypoints must be >= 1, got %lld", (long long)num_keypoints);
        return NULL;
    }
    facenet_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "FaceNet: out of memory"); return NULL; }
    dg_layer *l = dg_layer_new(&facenet_class, facenet_forward, s, free);
    if (!l) return NULL;
    int rc = 0;
    ADD(rc, l, "backbone", dg_resnet18(dg_resnet_default_params()), s->backbone);   /* 1000 classes */
    ADD(rc, l, "outLayer1", dg_nn_sequential(3, dg_nn_linear(1000, 512), dg_nn_relu(), dg_nn_dropout(0.1)), s->out1);
    ADD(rc, l, "outLayer2", dg_nn_linear(512, num_keypoints * 2), s->out2);
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}
