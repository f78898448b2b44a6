/* dygraph/models.h — the model zoo: torchvision's ResNets and the networks of Paddle's tutorials, built on
 * the layer API of nn.h.
 *
 * Every model is an ordinary dg_layer: run it with dg_forward, list its parameters with
 * dg_layer_parameters / dg_layer_named_parameters, switch modes with dg_layer_train/_eval,
 * release it with dg_layer_free. Names, order and shapes of parameters and buffers are those of
 * the PyTorch module the comment names (state_dict() entry for entry), and every weight uses
 * PyTorch's layout (Linear [out, in], Conv2d [OC, C, KH, KW]), so a torch state dict maps onto
 * the model with no renaming. A Paddle checkpoint maps too, except that Paddle stores Linear
 * weights transposed ([in, out]): transpose them when loading one.
 *
 * Random initialisation is drawn from dygraph's seeded Philox stream (dg_manual_seed): the
 * distributions are PyTorch's, the values are not (a different generator).
 *
 * Constructors return NULL with a message (dg_last_error) on a bad configuration or when
 * memory runs out; nothing is leaked then. */
#ifndef DYGRAPH_MODELS_H
#define DYGRAPH_MODELS_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ======================= ResNet (torchvision.models.resnet) =======================
 * Structure, names and init exactly as torchvision 0.14:
 *   conv1 (7x7, stride 2, padding 3, no bias), bn1, relu, maxpool (3, stride 2, padding 1),
 *   layer1..layer4 (Sequential of blocks "0", "1", ...; layer2..4 start with stride 2),
 *   avgpool (adaptive to 1x1), flatten, fc (Linear(512 * expansion, num_classes)).
 * A block holds conv1, bn1, relu, conv2, bn2 (BasicBlock) or conv1, bn1, conv2, bn2, conv3,
 * bn3, relu (Bottleneck, stride on the 3x3 conv: "ResNet v1.5"), and "downsample" =
 * Sequential(Conv2d 1x1 with the block's stride and no bias, BatchNorm2d) when the stride is
 * not 1 or the channel count changes. Its forward is
 *   out = relu(bn_last(...relu(bn1(conv1(x)))...) + (downsample ? downsample(x) : x)).
 * Init: every Conv2d kaiming_normal_(mode fan_out, relu); every BatchNorm2d weight 1, bias 0;
 * fc keeps Linear's default (kaiming_uniform a=sqrt(5), bias U(+-1/sqrt(in))).
 * Input [N, 3, H, W] gives [N, num_classes] logits for any H, W >= 32 thanks to the adaptive
 * pool (224x224 is ImageNet's, Paddle's face-keypoint example uses 96x96); in training mode BatchNorm
 * needs more than one value per channel, so N * ceil(H/32) * ceil(W/32) must exceed 1.
 * Classes (dg_layer_is): dg_resnet_class() "ResNet", dg_resnet_basic_block_class() "BasicBlock",
 * dg_resnet_bottleneck_class() "Bottleneck".
 * resnet18 with 1000 classes has 11,689,512 parameters, resnet34 21,797,672, resnet50
 * 25,557,032 (as torchvision). */
typedef struct dg_resnet_params {
    int64_t num_classes;       /* >= 1; default 1000 (torchvision's) */
    bool zero_init_residual;   /* torchvision's option: the last BN weight of each block starts at 0; default false */
    dg_dtype dtype;            /* default DG_F32; DG_F64 for gradient checks */
    uint32_t params_tag;     /* set by dg_resnet_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_resnet_params;
DG_API dg_resnet_params dg_resnet_default_params(void);

typedef enum dg_resnet_block_kind {
    DG_RESNET_BASIC = 0,       /* BasicBlock, expansion 1 (resnet18/34) */
    DG_RESNET_BOTTLENECK = 1,  /* Bottleneck, expansion 4 (resnet50/101/152) */
} dg_resnet_block_kind;

DG_API const dg_layer_class *dg_resnet_class(void);
DG_API const dg_layer_class *dg_resnet_basic_block_class(void);
DG_API const dg_layer_class *dg_resnet_bottleneck_class(void);

DG_API dg_layer *dg_resnet18(dg_resnet_params p);   /* BasicBlock, [2, 2, 2, 2] */
DG_API dg_layer *dg_resnet34(dg_resnet_params p);   /* BasicBlock, [3, 4, 6, 3] */
DG_API dg_layer *dg_resnet50(dg_resnet_params p);   /* Bottleneck, [3, 4, 6, 3] (the model of Paddle's collective FleetAPI guide) */
/* Any depth: torchvision's ResNet(block, layers, num_classes); layers[i] >= 1 blocks per stage
 * (resnet101 is Bottleneck [3, 4, 23, 3], resnet152 Bottleneck [3, 8, 36, 3]). */
DG_API dg_layer *dg_resnet(dg_resnet_block_kind block, const int layers[4], dg_resnet_params p);

/* One residual block as torchvision builds it inside _make_layer: output channels
 * planes * expansion; a "downsample" branch is added when stride != 1 or inplanes differs from
 * planes * expansion. Init as in the full model (kaiming_normal_ fan_out for convs, BN 1/0).
 * dtype DG_F32 or DG_F64. */
DG_API dg_layer *dg_resnet_basic_block(int64_t inplanes, int64_t planes, int stride, dg_dtype dtype);
DG_API dg_layer *dg_resnet_bottleneck(int64_t inplanes, int64_t planes, int stride, dg_dtype dtype);

/* ======================= the networks of Paddle's tutorials ======================= */

/* The MNIST network of Paddle's multi-GPU tutorial (class dg_mnist_cnn_class(), "MNIST"):
 * x [N, 1, 28, 28] -> [N, 10] LOGITS.
 *   conv1  Conv2d(1, 20, 5, stride 1, padding 2), then ReLU
 *   pool1  MaxPool2d(2, stride 2)
 *   conv2  Conv2d(20, 20, 5, stride 1, padding 2), then ReLU
 *   pool2  MaxPool2d(2, stride 2)
 *   fc     Linear(980, 10) on the input flattened from axis 1 (20 * 7 * 7 = 980)
 * Paddle's FC there applies softmax (act='softmax'); this model returns the logits instead and the
 * softmax belongs in the loss: dg_cross_entropy(logits, label) equals the tutorial's
 * cross_entropy(softmax(...)) and is numerically safer. Apply dg_softmax(out, -1) for the
 * probabilities. fc.weight is [10, 980] (torch layout; Paddle's FC stores [980, 10]).
 * Default init is PyTorch's for Conv2d/Linear (not fluid's). */
DG_API dg_layer *dg_mnist_cnn(void);
DG_API const dg_layer_class *dg_mnist_cnn_class(void);

/* MyNet, the CIFAR-10 network of Paddle's Fleet collective-training tutorial (class
 * dg_cifar_mynet_class(), "MyNet"): x [N, 3, 32, 32] -> [N, num_classes].
 *   conv1 Conv2d(3, 32, 3) + ReLU, pool1 MaxPool2d(2, 2), conv2 Conv2d(32, 64, 3) + ReLU,
 *   pool2 MaxPool2d(2, 2), conv3 Conv2d(64, 64, 3) + ReLU, flatten (axes 1..-1),
 *   linear1 Linear(1024, 64) + ReLU, linear2 Linear(64, num_classes)
 * (no padding: 32 -> 30 -> 15 -> 13 -> 6 -> 4, and 64 * 4 * 4 = 1024). The sublayer names are
 * the tutorial's. Paddle's Linear stores its weight as [in, out]; ours follow torch's [out, in]
 * (linear1.weight is [64, 1024]). num_classes must be >= 1 (the tutorial trains with 10). */
DG_API dg_layer *dg_cifar_mynet(int64_t num_classes);
DG_API const dg_layer_class *dg_cifar_mynet_class(void);

/* FaceNet, the face-keypoint network of the same tutorial (class dg_facenet_class(), "FaceNet"): x [N, 3, H, W] (the
 * tutorial uses 96x96) -> [N, num_keypoints * 2] (there: 15 keypoints -> 30 coordinates).
 *   backbone  = dg_resnet18 with 1000 classes ("backbone.conv1.weight", ...)
 *   outLayer1 = Sequential(Linear(1000, 512), ReLU, Dropout(0.1))  ("outLayer1.0.weight", ...)
 *   outLayer2 = Linear(512, num_keypoints * 2)
 * The tutorial's pretrained=False is the only variant: load pretrained weights into "backbone.*"
 * from a checkpoint instead. num_keypoints must be >= 1. */
DG_API dg_layer *dg_facenet(int64_t num_keypoints);
DG_API const dg_layer_class *dg_facenet_class(void);

#ifdef __cplusplus
}
#endif
#endif
