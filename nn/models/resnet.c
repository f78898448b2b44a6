/* nn/models/resnet.c — torchvision's ResNet (BasicBlock: resnet18/34, Bottleneck: resnet50 and
 * deeper) with its exact module tree, parameter/buffer names and order, and its init
 * (kaiming_normal_ fan_out/relu for every conv, BatchNorm weight 1 / bias 0, Linear default).
 * Written on the public layer API like any user model: the blocks are custom layers. */
#include "../nn_internal.h"
#include <dygraph/models.h>

/* ---- helpers ---- */

static const dg_layer_class resnet_class = DG_LAYER_CLASS("ResNet");
const dg_layer_class *dg_resnet_class(void) { return &resnet_class; }
static const dg_layer_class basic_block_class = DG_LAYER_CLASS("BasicBlock");
const dg_layer_class *dg_resnet_basic_block_class(void) { return &basic_block_class; }
static const dg_layer_class bottleneck_class = DG_LAYER_CLASS("Bottleneck");
const dg_layer_class *dg_resnet_bottleneck_class(void) { return &bottleneck_class; }

/* A bias-free Conv2d with torchvision's ResNet init: kaiming_normal_(fan_out, relu). */
static dg_layer *conv_nb(int64_t in, int64_t out, int k, int stride, int padding, dg_dtype dtype) {
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();
    cp.stride = stride;
    cp.padding = padding;
    cp.bias = false;
    cp.dtype = dtype;
    dg_layer *c = dg_nn_conv2d(in, out, k, cp);
    dg_nn_kaiming_params kp = dg_nn_kaiming_default_params();
    kp.mode = DG_FAN_OUT;
    kp.nonlinearity = DG_NONLIN_RELU;
    if (c && dg_nn_init_kaiming_normal_(dg_layer_parameter(c, "weight"), kp)) {
        dg_layer_free(c);
        return NULL;
    }
    return c;
}

/* BatchNorm2d already starts at weight 1, bias 0 (torchvision sets the same constants). */
static dg_layer *bn(int64_t c, dg_dtype dtype) {
    dg_nn_batch_norm_params p = dg_nn_batch_norm_default_params();
    p.dtype = dtype;
    return dg_nn_batch_norm2d(c, p);
}

/* Adds a sublayer unless an earlier step failed; returns the (borrowed) sublayer or NULL. The
 * constructor expression is evaluated only when nothing failed before, so a failure leaks
 * nothing. */
#define ADD(rc, parent, name, ctor, slot)                                                    \
    do {                                                                                     \
        if (!(rc)) {                                                                         \
            dg_layer *sub_ = (ctor);                                                         \
            (rc) = dg_layer_add_sublayer((parent), (name), sub_);                            \
            if (!(rc)) (slot) = sub_;                                                        \
        }                                                                                    \
    } while (0)

/* ---- the blocks ---- */

typedef struct {
    bool bottleneck;
    dg_layer *conv1, *bn1, *conv2, *bn2, *conv3, *bn3, *downsample;   /* borrowed, for construction only */
} block_state;

/* Sublayers are looked up in the tree at each forward rather than kept in the state, so that a
 * replaced one (dg_layer_replace_sublayer: SyncBatchNorm conversion) is the one that runs. */
#define SUB(self, name) dg_layer_sublayer((self), (name))

static dg_tensor *block_forward(dg_layer *self, const dg_tensor *x) {
    block_state *s = dg_layer_user(self);
    char sh[96];
    int64_t in_c = dg_dim(dg_layer_parameter(self, "conv1.weight"), 1);
    if (dg_ndim(x) != 4 || dg_dim(x, 1) != in_c)
        return DG_LAYER_ERROR(self, "input %s must be [N, %lld, H, W]", dg_shape_str(x, sh, sizeof sh), (long long)in_c);
    /* each intermediate is released as soon as the next exists: in inference nothing else holds
     * it, in training the tape keeps what backward needs */
    dg_tensor *out = dg_nn_conv_bn(SUB(self, "conv1"), SUB(self, "bn1"), x, true);
    out = dg_advance(out, dg_nn_conv_bn(SUB(self, "conv2"), SUB(self, "bn2"), out, s->bottleneck));
    if (s->bottleneck) out = dg_advance(out, dg_nn_conv_bn(SUB(self, "conv3"), SUB(self, "bn3"), out, false));
    dg_layer *ds = SUB(self, "downsample");
    dg_tensor *down = ds ? dg_nn_conv_bn(dg_layer_child(ds, 0), dg_layer_child(ds, 1), x, false) : NULL;
    out = dg_advance(out, dg_add_relu(out, down ? down : x));
    dg_tensor_free(down);
    return out;
}

static dg_layer *block_new(bool bottleneck, int64_t inplanes, int64_t planes, int stride, dg_dtype dtype) {
    const dg_layer_class *cls = bottleneck ? &bottleneck_class : &basic_block_class;
    const char *type = cls->name;
    if (inplanes <= 0 || planes <= 0 || stride <= 0 || (dtype != DG_F32 && dtype != DG_F64)) {
        DG_ERR(DG_EINVAL, "%s: need inplanes > 0, planes > 0, stride > 0 and dtype float32/float64, got %lld, %lld, %d, %s",
               type, (long long)inplanes, (long long)planes, stride, dg_dtype_name(dtype));
        return NULL;
    }
    block_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "%s: out of memory", type); return NULL; }
    s->bottleneck = bottleneck;
    dg_layer *l = dg_layer_new(cls, block_forward, s, free);
    if (!l) return NULL;
    int64_t out_c = bottleneck ? planes * 4 : planes;
    dg_layer *relu = NULL;
    int rc = 0;
    if (!bottleneck) {
        ADD(rc, l, "conv1", conv_nb(inplanes, planes, 3, stride, 1, dtype), s->conv1);
        ADD(rc, l, "bn1", bn(planes, dtype), s->bn1);
        ADD(rc, l, "relu", dg_nn_relu(), relu);
        ADD(rc, l, "conv2", conv_nb(planes, planes, 3, 1, 1, dtype), s->conv2);
        ADD(rc, l, "bn2", bn(planes, dtype), s->bn2);
    } else {
        /* torchvision's width = planes for groups 1, base width 64; the stride sits on the 3x3 */
        ADD(rc, l, "conv1", conv_nb(inplanes, planes, 1, 1, 0, dtype), s->conv1);
        ADD(rc, l, "bn1", bn(planes, dtype), s->bn1);
        ADD(rc, l, "conv2", conv_nb(planes, planes, 3, stride, 1, dtype), s->conv2);
        ADD(rc, l, "bn2", bn(planes, dtype), s->bn2);
        ADD(rc, l, "conv3", conv_nb(planes, out_c, 1, 1, 0, dtype), s->conv3);
        ADD(rc, l, "bn3", bn(out_c, dtype), s->bn3);
        ADD(rc, l, "relu", dg_nn_relu(), relu);
    }
    if (stride != 1 || inplanes != out_c)
        ADD(rc, l, "downsample", dg_nn_sequential(2, conv_nb(inplanes, out_c, 1, stride, 0, dtype), bn(out_c, dtype)),
            s->downsample);
    (void)relu;   /* registered for the module tree (as torchvision's self.relu); forward calls dg_relu */
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

dg_layer *dg_resnet_basic_block(int64_t inplanes, int64_t planes, int stride, dg_dtype dtype) {
    return block_new(false, inplanes, planes, stride, dtype);
}
dg_layer *dg_resnet_bottleneck(int64_t inplanes, int64_t planes, int stride, dg_dtype dtype) {
    return block_new(true, inplanes, planes, stride, dtype);
}

/* ---- the network ---- */

typedef struct {
    dg_layer *conv1, *bn1, *maxpool, *layer[4], *avgpool, *fc;   /* borrowed, for construction only */
} resnet_state;

static dg_tensor *resnet_forward(dg_layer *self, const dg_tensor *x) {
    char sh[96];
    if (dg_ndim(x) != 4 || dg_dim(x, 1) != 3)
        return DG_LAYER_ERROR(self, "input %s must be [N, 3, H, W]", dg_shape_str(x, sh, sizeof sh));
    static const char *const stages[4] = { "layer1", "layer2", "layer3", "layer4" };
    dg_tensor *y = dg_nn_conv_bn(SUB(self, "conv1"), SUB(self, "bn1"), x, true);
    y = dg_advance(y, dg_forward(SUB(self, "maxpool"), y));
    for (int i = 0; i < 4; i++) y = dg_advance(y, dg_forward(SUB(self, stages[i]), y));
    y = dg_advance(y, dg_forward(SUB(self, "avgpool"), y));
    y = dg_advance(y, dg_flatten(y, 1, -1));
    return dg_advance(y, dg_forward(SUB(self, "fc"), y));
}

dg_resnet_params dg_resnet_default_params(void) {
    return (dg_resnet_params){ .params_tag = DG_PARAMS_TAG, .num_classes = 1000, .zero_init_residual = false, .dtype = DG_F32 };
}

dg_layer *dg_resnet(dg_resnet_block_kind block, const int layers[4], dg_resnet_params p) {
    DG_CHECK_PARAMS("resnet", p, dg_resnet_default_params);
    int64_t nc = p.num_classes;
    bool bad = (block != DG_RESNET_BASIC && block != DG_RESNET_BOTTLENECK) || !layers || nc < 1 ||
               (p.dtype != DG_F32 && p.dtype != DG_F64);
    for (int i = 0; i < 4 && !bad; i++) bad = layers[i] < 1 || layers[i] > 1024;
    if (bad) {
        DG_ERR(DG_EINVAL, "ResNet: need a block kind (basic/bottleneck), four stage depths in 1..1024, "
                          "num_classes >= 1 and dtype float32/float64; got block %d, layers %s, "
                          "num_classes %lld, dtype %s", (int)block, layers ? "given" : "NULL", (long long)p.num_classes,
               dg_dtype_name(p.dtype));
        return NULL;
    }
    resnet_state *s = calloc(1, sizeof *s);
    if (!s) { DG_ERR(DG_ENOMEM, "ResNet: out of memory"); return NULL; }
    dg_layer *l = dg_layer_new(&resnet_class, resnet_forward, s, free);
    if (!l) return NULL;
    bool bottleneck = block == DG_RESNET_BOTTLENECK;
    int expansion = bottleneck ? 4 : 1;
    dg_layer *relu = NULL;
    int rc = 0;
    ADD(rc, l, "conv1", conv_nb(3, 64, 7, 2, 3, p.dtype), s->conv1);
    ADD(rc, l, "bn1", bn(64, p.dtype), s->bn1);
    ADD(rc, l, "relu", dg_nn_relu(), relu);
    dg_nn_pool2d_params mp = dg_nn_pool2d_default_params();
    mp.stride = 2;
    mp.padding = 1;
    ADD(rc, l, "maxpool", dg_nn_max_pool2d(3, mp), s->maxpool);
    int64_t inplanes = 64;
    for (int st = 0; st < 4 && !rc; st++) {
        int64_t planes = 64LL << st;
        char name[16];
        snprintf(name, sizeof name, "layer%d", st + 1);
        ADD(rc, l, name, dg_nn_sequential(0), s->layer[st]);
        for (int b = 0; b < layers[st] && !rc; b++) {
            rc = dg_nn_sequential_append(s->layer[st], block_new(bottleneck, inplanes, planes, b == 0 && st > 0 ? 2 : 1,
                                                                 p.dtype));
            inplanes = planes * expansion;
            if (!rc && p.zero_init_residual) {
                dg_layer *blk = dg_layer_child(s->layer[st], b);
                rc = dg_nn_init_zeros_(dg_layer_parameter(blk, bottleneck ? "bn3.weight" : "bn2.weight"));
            }
        }
    }
    ADD(rc, l, "avgpool", dg_nn_adaptive_avg_pool2d(1, 1), s->avgpool);
    dg_nn_linear_params lp = dg_nn_linear_default_params();
    lp.dtype = p.dtype;
    ADD(rc, l, "fc", dg_nn_linear_ext(512 * expansion, nc, lp), s->fc);
    (void)relu;
    if (rc) { dg_layer_free(l); return NULL; }
    return l;
}

dg_layer *dg_resnet18(dg_resnet_params p) { return dg_resnet(DG_RESNET_BASIC, (const int[4]){ 2, 2, 2, 2 }, p); }
dg_layer *dg_resnet34(dg_resnet_params p) { return dg_resnet(DG_RESNET_BASIC, (const int[4]){ 3, 4, 6, 3 }, p); }
dg_layer *dg_resnet50(dg_resnet_params p) { return dg_resnet(DG_RESNET_BOTTLENECK, (const int[4]){ 3, 4, 6, 3 }, p); }
