/* dygraph/nn.h — layers (paddle.nn.Layer / torch.nn.Module in C): parameters, buffers,
 * sublayers with hierarchical names, train/eval mode, the built-in layers, loss layers and
 * parameter initialisers.
 *
 * A layer (dg_layer, opaque) has a forward function, named parameters (leaf tensors that
 * require grad), named buffers (state without grad, e.g. BatchNorm's running statistics) and
 * named sublayers. Names are hierarchical and identical to torchvision/Paddle ("0.weight",
 * "layer1.0.conv1.weight", "bn1.running_mean"), and every built-in layer uses PyTorch's tensor
 * layout (Linear weight [out, in], Conv2d weight [OC, C/groups, KH, KW]), so a torch state dict
 * maps onto a dygraph layer tree with no renaming.
 *
 * Ownership:
 *  - A layer owns its parameters, buffers and sublayers; dg_layer_free releases all of them.
 *  - dg_layer_add_parameter/_buffer/_sublayer take over the reference they are given, on
 *    success and on failure alike (on failure it is freed), so constructors chain without
 *    cleanup code. A constructor that is handed NULL (a failed inner constructor) returns
 *    NULL and keeps that constructor's error message.
 *  - dg_forward returns a tensor owned by the innermost open scope (or by the caller when none
 *    is open), like any op. Every other tensor made during the forward call is freed when it
 *    returns, so a forward function may chain ops freely without freeing temporaries.
 *  - Arrays returned by the iteration functions are one malloc'd block each: free() it. The
 *    tensors in them are borrowed from the layer.
 *
 * Errors: a constructor or forward that fails returns NULL and dg_last_error() names the
 * layer (type, path in its tree, configuration) and the shapes, e.g.
 *   Linear '0' (in_features=4, out_features=3, bias=True): input [2, 5] has 5 features in its
 *   last dim, expected 4 (nn/linear.c:40)
 * Functions that act return 0 or a negative dg_status. The library never exits or aborts. */
#ifndef DYGRAPH_NN_H
#define DYGRAPH_NN_H

#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_layer dg_layer;

/* ======================= the layer base ======================= */

/* A layer's class. Identity is by address: two layers are of one class when they were made
 * with the same dg_layer_class object (dg_layer_is), never by comparing names. Define one per
 * kind of layer with static storage through DG_LAYER_CLASS, e.g.
 *     static const dg_layer_class scaled_mlp_class = DG_LAYER_CLASS("ScaledMLP");
 * it must outlive every layer made with it. The built-in layers' classes come from the
 * dg_nn_*_class() functions below (models.h and dist.h have their models' and DataParallel's).
 * The tag DG_LAYER_CLASS writes is what tells a class from anything else passed where one is
 * expected (a type name string, as in `dg_layer_new("MyLayer", ...)`, or garbage): the layer
 * constructors refuse an object without it. It is read one byte at a time, stopping at the
 * first byte that differs, so a string is never read past its end. */
#define DG_LAYER_CLASS_TAG "\x7f" "dgLC1"   /* 6 bytes, none of them 0, then the 0 */
typedef struct dg_layer_class {
    char tag[8];        /* DG_LAYER_CLASS_TAG (set by DG_LAYER_CLASS) */
    const char *name;   /* the type shown in messages and dg_layer_to_string ("Linear", "MyBlock") */
} dg_layer_class;
#define DG_LAYER_CLASS(type_name) { DG_LAYER_CLASS_TAG, (type_name) }

/* forward(self, x): returns a tensor it made (see Ownership above); NULL with an error on
 * failure. A two-input (loss) forward gets (input, label). */
typedef dg_tensor *(*dg_layer_forward_fn)(dg_layer *self, const dg_tensor *x);
typedef dg_tensor *(*dg_loss_forward_fn)(dg_layer *self, const dg_tensor *input, const dg_tensor *label);
/* forward of a layer with several inputs: in[0..n-1], n the count the layer was made with
 * (checked before the call; every in[i] is a live tensor). Same ownership rule as above. */
typedef dg_tensor *(*dg_layer_forward_multi_fn)(dg_layer *self, const dg_tensor *const *in, int n);

/* A new empty layer of class cls (borrowed; its name must be non-empty) in training mode.
 * `user` is the layer's own state, returned by dg_layer_user and released with free_user (may
 * be NULL) when the layer is freed — also when this call fails. fn may be NULL for a pure
 * container. */
DG_API dg_layer *dg_layer_new(const dg_layer_class *cls, dg_layer_forward_fn fn, void *user, void (*free_user)(void *));
/* The same for a loss-style layer whose forward takes (input, label); see dg_loss_forward. */
DG_API dg_layer *dg_loss_layer_new(const dg_layer_class *cls, dg_loss_forward_fn fn, void *user, void (*free_user)(void *));
/* The same for a layer whose forward takes n_inputs tensors (1..64), run with
 * dg_forward_multi (or dg_forward when n_inputs is 1). fn must not be NULL. */
DG_API dg_layer *dg_layer_new_multi(const dg_layer_class *cls, dg_layer_forward_multi_fn fn, int n_inputs, void *user,
                                    void (*free_user)(void *));
/* How many tensors the layer's forward takes: 1 for dg_layer_new layers, 2 for loss layers
 * (input, label), n_inputs for dg_layer_new_multi layers; 0 for a container without a forward
 * and for NULL. */
DG_API int dg_layer_num_inputs(const dg_layer *layer);

/* Releases the layer's reference: parameters, buffers, sublayers and user state go with the
 * last one. NULL is a no-op. */
DG_API void dg_layer_free(dg_layer *layer);
/* An extra reference, to share one layer under two parents (released by dg_layer_free). */
DG_API dg_layer *dg_layer_ref(dg_layer *layer);

/* Registration. `name` is one component: non-empty, no '.', unique among this layer's
 * parameters, buffers and sublayers. Each call takes over the given reference (see Ownership);
 * a tensor made inside an open scope is taken out of it. Returns 0 or a negative dg_status.
 *  - parameter: a float leaf tensor (not made by an op); it is marked requires_grad. To tie
 *    weights, pass dg_tensor_ref(t) to the second layer (iteration lists it once).
 *  - buffer: any dtype, never requires grad; saved in the state dict (running_mean, ...).
 *  - sublayer: a layer that may not contain `layer` (no cycles). */
DG_API int dg_layer_add_parameter(dg_layer *layer, const char *name, dg_tensor *t);
DG_API int dg_layer_add_buffer(dg_layer *layer, const char *name, dg_tensor *t);
DG_API int dg_layer_add_sublayer(dg_layer *layer, const char *name, dg_layer *sub);
/* Puts sub in the place of the sublayer at `name` (hierarchical: "layer1.0.bn1"; same name, same
 * position in iteration) and releases the tree's reference to the one that was there, as
 * torch's setattr(parent, name, sub). Takes over sub's reference like dg_layer_add_sublayer, on
 * success and on failure alike; handing over the layer already there changes nothing. Errors:
 * no sublayer at name, or sub contains its new parent (a cycle). A parent whose forward kept
 * a pointer to the old sublayer in its own state would keep using it: the built-in layers
 * reach their sublayers through the tree (dg_layer_sublayer, dg_layer_child) at every forward,
 * and a custom layer meant to have sublayers replaced must do the same. */
DG_API int dg_layer_replace_sublayer(dg_layer *layer, const char *name, dg_layer *sub);
/* torch's `decoder.weight = encoder.weight` (weight tying): the parameter at `name`
 * (hierarchical) becomes t, which must be a float leaf of the old one's dtype and shape; takes
 * over t's reference (pass dg_tensor_ref(w) to share w) and releases the old one. The built-in
 * layers read their parameters through the tree at every forward, so they use t from then on;
 * iteration lists a tied tensor once, the state dict under both names (torch's). */
DG_API int dg_layer_set_parameter(dg_layer *layer, const char *name, dg_tensor *t);

/* Lookup by hierarchical name ("0.weight", "layer1.0.bn1.running_mean", "layer1.0").
 * Borrowed; NULL if absent (not an error: dg_last_error is untouched). */
DG_API dg_tensor *dg_layer_parameter(const dg_layer *layer, const char *name);
DG_API dg_tensor *dg_layer_buffer(const dg_layer *layer, const char *name);
DG_API dg_layer *dg_layer_sublayer(const dg_layer *layer, const char *name);

/* Direct children in registration order ("0", "1", ... for Sequential). */
DG_API int dg_layer_num_children(const dg_layer *layer);
DG_API dg_layer *dg_layer_child(const dg_layer *layer, int i);               /* borrowed; NULL if out of range */
DG_API const char *dg_layer_child_name(const dg_layer *layer, int i);

/* Identity. */
DG_API const dg_layer_class *dg_layer_class_of(const dg_layer *layer);       /* NULL for NULL */
/* Whether layer was made with cls (false for NULL). A forward or helper that reads
 * dg_layer_user as a given struct checks this first. */
DG_API bool dg_layer_is(const dg_layer *layer, const dg_layer_class *cls);
DG_API const char *dg_layer_type(const dg_layer *layer);                     /* the class name, for printing: "Linear" */
DG_API void *dg_layer_user(const dg_layer *layer);
/* Path from the root of the tree the layer was first added to ("layer1.0.conv1"; "" for a
 * root). Writes into buf (always NUL-terminated) and returns buf. */
DG_API const char *dg_layer_full_name(const dg_layer *layer, char *buf, size_t len);
/* Text shown after the type, as torch's extra_repr ("in_features=4, out_features=3, bias=True"). */
DG_API int dg_layer_set_extra_repr(dg_layer *layer, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The tree as torch prints a module; malloc'd, free() it. dg_layer_print writes it to stdout. */
DG_API char *dg_layer_to_string(const dg_layer *layer);
DG_API int dg_layer_print(const dg_layer *layer);

/* Errors from a forward or constructor: records "<Type> '<path>' (<extra_repr>): <message>
 * (file:line)" as a new failure (it replaces any earlier message) and returns NULL so that a
 * forward may `return DG_LAYER_ERROR(self, "input %s ...", ...)`. A forward that only passes on
 * the failure of an op it called returns NULL: the op's message stands. */
DG_API dg_tensor *dg_layer_error_at(const dg_layer *layer, int status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define DG_LAYER_ERROR(layer, ...) dg_layer_error_at((layer), DG_EINVAL, __FILE__, __LINE__, __VA_ARGS__)

/* ---- running a layer ----
 * All three follow the ownership rule above: the result belongs to the caller's scope (or to
 * the caller), every other tensor the forward made is freed before they return. */
DG_API dg_tensor *dg_forward(dg_layer *layer, const dg_tensor *x);
DG_API dg_tensor *dg_loss_forward(dg_layer *loss, const dg_tensor *input, const dg_tensor *label);
/* Runs any layer on n inputs: n must be dg_layer_num_inputs(layer) (so a single-input layer
 * takes n = 1 and a loss layer (input, label)); another count is an error naming the layer
 * and both counts. A NULL in[i] (a failed op's result) is reported as input i. */
DG_API dg_tensor *dg_forward_multi(dg_layer *layer, const dg_tensor *const *in, int n);
/* A forward with several results (an LSTM's output, h_n and c_n): runs fn(layer, ctx, outs) as a
 * forward of layer runs (ops inside name the layer in their errors; every tensor fn makes is
 * freed when it returns except outs[0..n-1], which go to the caller's scope, as dg_forward's
 * result does). fn returns 0 or a negative status with a message; outs are NULL on failure. */
DG_API int dg_layer_run(dg_layer *layer, int (*fn)(dg_layer *self, void *ctx, dg_tensor **outs), void *ctx, dg_tensor **outs,
                        int n);

/* ---- device: torch's module.to(device) ----
 * Moves every parameter and buffer of the layer and its sublayers (and the parameters'
 * gradients) to `device`, in place: each keeps its dg_tensor handle (so pointers held by the
 * layer, by dg_layer_parameters arrays and by optimizers stay valid) and gets new storage on
 * the device. Tensors already there are left as they are (cpu -> cpu changes nothing). All
 * copies are made before any tensor changes, so on failure (no such device, the CUDA module
 * missing, out of memory) the layer is as it was and the error names the device.
 * An optimizer made before the move keeps working as long as it has no state yet (SGD always;
 * Momentum/Adam before their first step); state it already holds (Adagrad's sum from
 * construction, buffers after a step) stays on the old device and its next step is an error,
 * so make optimizers, and wrap in DataParallel, after moving. Views of a parameter made before
 * the move keep the old storage. */
DG_API int dg_layer_to(dg_layer *layer, dg_device device);

/* ---- dtype: torch's module.to(dtype) / .half() / .bfloat16() ----
 * Every float parameter and buffer of the layer and its sublayers gets its values in `dtype`
 * (a float type) in place: handles stay, gradients are dropped, integer buffers stay. With
 * keep_norm_f32, BatchNorm1d/2d, LayerNorm and GroupNorm keep float32 (mixed precision O2, as
 * Paddle's amp.decorate(level='O2')); the optimizer then steps f32 master copies of the half
 * parameters (optim.h). Not atomic on out-of-memory: the error names the failing tensor. */
DG_API int dg_layer_to_dtype(dg_layer *layer, dg_dtype dtype, bool keep_norm_f32);

/* ---- mode: train/eval set this layer and every sublayer (torch .train()/.eval()) ---- */
DG_API int dg_layer_train(dg_layer *layer);
DG_API int dg_layer_eval(dg_layer *layer);
DG_API bool dg_layer_is_training(const dg_layer *layer);

/* ---- recompute (Paddle's fleet recompute, torch.utils.checkpoint) ----
 * A layer marked here runs its forward through dg_recompute (autograd.h): none of its
 * intermediate tensors are kept, only its input, and backward runs its forward again to get
 * them. Mark the blocks of a deep network (ResNet's BasicBlock/Bottleneck, a Sequential
 * segment) to trade about one more forward for their activations' memory; gradients are the
 * same. BatchNorm inside updates its running statistics once per step. Only layers whose
 * forward takes one tensor. */
DG_API int dg_layer_set_recompute(dg_layer *layer, bool on);
DG_API bool dg_layer_recompute(const dg_layer *layer);

/* ---- iteration ----
 * Order is torch's: each layer's own entries in registration order, then its sublayers', depth
 * first. Parameters and buffers that appear under two names (tied or shared) are listed once,
 * as torch's parameters()/named_parameters() do. */
typedef struct dg_named_tensor { const char *name; dg_tensor *tensor; } dg_named_tensor;
/* Array of n borrowed parameters plus a NULL terminator; *n may be NULL. free() the array. */
DG_API dg_tensor **dg_layer_parameters(const dg_layer *layer, int *n);
DG_API dg_named_tensor *dg_layer_named_parameters(const dg_layer *layer, int *n);
DG_API dg_named_tensor *dg_layer_named_buffers(const dg_layer *layer, int *n);
/* Parameters and buffers in torch's state_dict() order: per layer its parameters then its
 * buffers, then its sublayers; not deduplicated (torch keeps tied entries under both names). */
DG_API dg_named_tensor *dg_layer_state_dict(const dg_layer *layer, int *n);
/* Total number of scalars in the parameters: sum(p.numel() for p in model.parameters()).
 * -1 for a NULL layer. */
DG_API int64_t dg_layer_num_parameters(const dg_layer *layer);
/* Drops the gradient of every parameter (Paddle's clear_gradients / torch's zero_grad(set_to_none)). */
DG_API int dg_layer_clear_gradients(dg_layer *layer);
/* Calls fn on every sublayer (depth first, children before parents) and then on the layer, as
 * torch's Module.apply; stops at the first nonzero return and returns it. Use it to
 * re-initialise: check dg_layer_is(layer, dg_nn_linear_class()) and call a dg_nn_init_*
 * function on its parameters. */
DG_API int dg_layer_apply(dg_layer *layer, int (*fn)(dg_layer *layer, void *user), void *user);

/* ======================= built-in layers =======================
 * Each is a dg_layer; its class name and parameter/buffer names follow PyTorch. Parameters
 * are made on the current device in the params' dtype (DG_F32 unless set; DG_F64 for gradient
 * checks). Default initialisation is PyTorch's, drawn from dygraph's seeded Philox stream. */

/* Their classes, for dg_layer_is (the name in parentheses). */
DG_API const dg_layer_class *dg_nn_linear_class(void);               /* "Linear" */
DG_API const dg_layer_class *dg_nn_conv2d_class(void);               /* "Conv2d" */
DG_API const dg_layer_class *dg_nn_max_pool2d_class(void);           /* "MaxPool2d" */
DG_API const dg_layer_class *dg_nn_avg_pool2d_class(void);           /* "AvgPool2d" */
DG_API const dg_layer_class *dg_nn_adaptive_avg_pool2d_class(void);  /* "AdaptiveAvgPool2d" */
DG_API const dg_layer_class *dg_nn_batch_norm1d_class(void);         /* "BatchNorm1d" */
DG_API const dg_layer_class *dg_nn_batch_norm2d_class(void);         /* "BatchNorm2d" */
DG_API const dg_layer_class *dg_nn_dropout_class(void);              /* "Dropout" */
DG_API const dg_layer_class *dg_nn_dropout2d_class(void);            /* "Dropout2d" */
DG_API const dg_layer_class *dg_nn_relu_class(void);                 /* "ReLU" */
DG_API const dg_layer_class *dg_nn_leaky_relu_class(void);           /* "LeakyReLU" */
DG_API const dg_layer_class *dg_nn_sigmoid_class(void);              /* "Sigmoid" */
DG_API const dg_layer_class *dg_nn_tanh_class(void);                 /* "Tanh" */
DG_API const dg_layer_class *dg_nn_gelu_class(void);                 /* "GELU" */
DG_API const dg_layer_class *dg_nn_softmax_class(void);              /* "Softmax" */
DG_API const dg_layer_class *dg_nn_flatten_class(void);              /* "Flatten" */
DG_API const dg_layer_class *dg_nn_identity_class(void);             /* "Identity" */
DG_API const dg_layer_class *dg_nn_sequential_class(void);           /* "Sequential" */
DG_API const dg_layer_class *dg_nn_mse_loss_class(void);             /* "MSELoss" */
DG_API const dg_layer_class *dg_nn_l1_loss_class(void);              /* "L1Loss" */
DG_API const dg_layer_class *dg_nn_cross_entropy_loss_class(void);   /* "CrossEntropyLoss" */
DG_API const dg_layer_class *dg_nn_bce_with_logits_loss_class(void); /* "BCEWithLogitsLoss" */

/* Linear: y = x @ weight^T + bias; x [..., in_features] -> [..., out_features].
 * weight [out_features, in_features], bias [out_features] (torch layout: transpose of
 * Paddle's). Init: weight kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)); bias the
 * same bound. */
typedef struct dg_nn_linear_params {
    bool bias;         /* learnable bias; default true (torch's) */
    dg_dtype dtype;    /* default DG_F32 */
    uint32_t params_tag;     /* set by dg_nn_linear_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_linear_params;
DG_API dg_nn_linear_params dg_nn_linear_default_params(void);
DG_API dg_layer *dg_nn_linear(int64_t in_features, int64_t out_features);   /* with the default params */
DG_API dg_layer *dg_nn_linear_ext(int64_t in_features, int64_t out_features, dg_nn_linear_params p);

/* Conv2d (type "Conv2d"): x [N, in_channels, H, W] -> [N, out_channels, OH, OW]; square kernel.
 * weight [out_channels, in_channels/groups, k, k], bias [out_channels].
 * Init: weight kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with
 * fan_in = in_channels/groups * k * k; bias the same bound. */
typedef struct dg_nn_conv2d_params {   /* defaults are torch's */
    int stride;        /* >= 1; default 1 */
    int padding;       /* zero padding on each side, >= 0; default 0 */
    int dilation;      /* >= 1; default 1 */
    int groups;        /* >= 1, must divide in_channels and out_channels; default 1 */
    bool bias;         /* learnable bias; default true */
    dg_dtype dtype;    /* default DG_F32 */
    uint32_t params_tag;     /* set by dg_nn_conv2d_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_conv2d_params;
DG_API dg_nn_conv2d_params dg_nn_conv2d_default_params(void);
DG_API dg_layer *dg_nn_conv2d(int64_t in_channels, int64_t out_channels, int kernel_size, dg_nn_conv2d_params p);

/* Pools (types "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d"), x [N, C, H, W], no parameters. */
typedef struct dg_nn_pool2d_params {
    int stride;               /* >= 1; DG_STRIDE_KERNEL (default, torch's and Paddle's stride=None): kernel_size */
    int padding;              /* >= 0, at most half the kernel; default 0 */
    bool ceil_mode;           /* default false */
    bool count_include_pad;   /* avg pool: default false = Paddle's exclusive=True (torch's default is true) */
    int dilation;             /* max pool only (average pooling: 1); >= 1; default 1 */
    int divisor_override;     /* avg pool only; > 0 divides every window's sum by it; default 0 (none) */
    uint32_t params_tag;     /* set by dg_nn_pool2d_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_pool2d_params;
DG_API dg_nn_pool2d_params dg_nn_pool2d_default_params(void);
DG_API dg_layer *dg_nn_max_pool2d(int kernel_size, dg_nn_pool2d_params p);
DG_API dg_layer *dg_nn_avg_pool2d(int kernel_size, dg_nn_pool2d_params p);
DG_API dg_layer *dg_nn_adaptive_avg_pool2d(int out_h, int out_w);

/* ---- conv/pool parity layers (torch's names, layouts and defaults) ---- */
DG_API const dg_layer_class *dg_nn_conv1d_class(void);               /* "Conv1d" */
DG_API const dg_layer_class *dg_nn_conv_transpose2d_class(void);     /* "ConvTranspose2d" */
DG_API const dg_layer_class *dg_nn_max_pool1d_class(void);           /* "MaxPool1d" */
DG_API const dg_layer_class *dg_nn_avg_pool1d_class(void);           /* "AvgPool1d" */
DG_API const dg_layer_class *dg_nn_adaptive_max_pool2d_class(void);  /* "AdaptiveMaxPool2d" */
/* Conv1d: x [N, in, L]; weight [out, in/groups, k], bias [out]; Conv2d's params and init. */
DG_API dg_layer *dg_nn_conv1d(int64_t in_channels, int64_t out_channels, int kernel_size, dg_nn_conv2d_params p);
/* ConvTranspose2d: x [N, in, H, W]; weight [in, out/groups, k, k], bias [out]; init as torch
 * (kaiming_uniform(a=sqrt(5)) with fan_in = out/groups * k * k). */
typedef struct dg_nn_conv_transpose2d_params {   /* defaults are torch's */
    int stride, padding, output_padding, dilation, groups;   /* 1, 0, 0, 1, 1 */
    bool bias;                                               /* default true */
    dg_dtype dtype;                                          /* default DG_F32 */
    uint32_t params_tag;     /* set by dg_nn_conv_transpose2d_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_conv_transpose2d_params;
DG_API dg_nn_conv_transpose2d_params dg_nn_conv_transpose2d_default_params(void);
DG_API dg_layer *dg_nn_conv_transpose2d(int64_t in_channels, int64_t out_channels, int kernel_size,
                                        dg_nn_conv_transpose2d_params p);
/* MaxPool1d / AvgPool1d: x [N, C, L]; dg_pool1d_default_params() holds torch's defaults */
DG_API dg_layer *dg_nn_max_pool1d(dg_pool1d_params p);
DG_API dg_layer *dg_nn_avg_pool1d(dg_pool1d_params p);
DG_API dg_layer *dg_nn_adaptive_max_pool2d(int out_h, int out_w);   /* x [N, C, H, W] */

/* BatchNorm1d (x [N, C] or [N, C, L]) and BatchNorm2d (x [N, C, H, W]).
 * Parameters weight [C] (init 1), bias [C] (init 0) when affine. Buffers, when
 * track_running_stats: running_mean [C] (0), running_var [C] (1), num_batches_tracked (i64
 * scalar, 0), exactly as torch. Training mode normalises with batch statistics and updates the
 * running ones (running = (1-momentum)*running + momentum*batch, unbiased batch variance) and
 * counts num_batches_tracked; eval mode uses the running statistics. Without running stats
 * both modes use batch statistics (as torch). */
typedef struct dg_nn_batch_norm_params {   /* defaults are torch's */
    double momentum;          /* in [0, 1]; default 0.1 (0 keeps the running statistics as they are) */
    double eps;               /* > 0; default 1e-5 */
    bool cumulative_average;  /* torch's momentum=None: momentum = 1/num_batches_tracked; default false */
    bool affine;              /* learnable weight and bias; default true */
    bool track_running_stats; /* default true */
    dg_dtype dtype;           /* default DG_F32 (num_batches_tracked is always i64) */
    uint32_t params_tag;     /* set by dg_nn_batch_norm_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_batch_norm_params;
DG_API dg_nn_batch_norm_params dg_nn_batch_norm_default_params(void);
DG_API dg_layer *dg_nn_batch_norm1d(int64_t num_features, dg_nn_batch_norm_params p);
DG_API dg_layer *dg_nn_batch_norm2d(int64_t num_features, dg_nn_batch_norm_params p);
/* The settings a BatchNorm1d/2d was made with (the params, num_features in *num_features when
 * not NULL): for tools that rebuild a layer, such as dg_nn_convert_sync_batch_norm. An error
 * for another kind of layer. */
DG_API int dg_nn_batch_norm_settings(const dg_layer *bn, dg_nn_batch_norm_params *p, int64_t *num_features);

/* Embedding, LayerNorm, GroupNorm (types "Embedding", "LayerNorm", "GroupNorm"): torch's
 * parameters, names and init. */
DG_API const dg_layer_class *dg_nn_embedding_class(void);
DG_API const dg_layer_class *dg_nn_layer_norm_class(void);
DG_API const dg_layer_class *dg_nn_group_norm_class(void);
/* Embedding: ids (int64/int32, any shape) -> [..., embedding_dim] rows of weight
 * [num_embeddings, embedding_dim], init N(0, 1) with the padding row zeroed (torch's). */
typedef struct dg_nn_embedding_params {   /* defaults are torch's */
    int64_t padding_idx;   /* DG_NO_PADDING_IDX (default) or a row (negative counts from the end) */
    double max_norm;       /* 0 (default): off; see dg_embedding_params */
    double norm_type;      /* default 2 */
    bool sparse;           /* weight's gradient as rows (dg_sparse_grad); default false */
    dg_dtype dtype;        /* default DG_F32 */
    uint32_t params_tag;     /* set by dg_nn_embedding_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_embedding_params;
DG_API dg_nn_embedding_params dg_nn_embedding_default_params(void);
DG_API dg_layer *dg_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, dg_nn_embedding_params p);
/* LayerNorm over the trailing normalized_shape; weight (ones) and bias (zeros) of that shape when
 * elementwise_affine. */
typedef struct dg_nn_layer_norm_params {  /* defaults are torch's */
    double eps;               /* >= 0; default 1e-5 */
    bool elementwise_affine;  /* default true */
    dg_dtype dtype;           /* default DG_F32 */
    uint32_t params_tag;     /* set by dg_nn_layer_norm_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_layer_norm_params;
DG_API dg_nn_layer_norm_params dg_nn_layer_norm_default_params(void);
DG_API dg_layer *dg_nn_layer_norm(dg_shape normalized_shape, dg_nn_layer_norm_params p);
/* GroupNorm: x [N, num_channels, ...] in num_groups groups; weight (ones) and bias (zeros)
 * [num_channels] when affine (its eps and dtype as LayerNorm's params; affine from
 * elementwise_affine). */
DG_API dg_layer *dg_nn_group_norm(int64_t num_groups, int64_t num_channels, dg_nn_layer_norm_params p);

/* Dropout: in training zeroes each element with probability p and scales the rest by
 * 1/(1-p) (mask from the calling thread's generator); identity (a copy) in eval. p in [0, 1]. */
DG_API dg_layer *dg_nn_dropout(double p);
typedef struct dg_nn_dropout_params {
    double p;
    dg_generator *generator;   /* NULL: the generator of the thread that runs forward; else it
                                  must outlive the layer */
    uint32_t params_tag;     /* set by dg_nn_dropout_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_dropout_params;
DG_API dg_nn_dropout_params dg_nn_dropout_default_params(void);   /* p 0.5 (torch's), the thread's generator */
DG_API dg_layer *dg_nn_dropout_ext(dg_nn_dropout_params p);
/* Dropout2d (torch.nn.Dropout2d, torch 1.13): dg_dropout2d in training, one draw per (N, C)
 * channel of [N, C, H, W] (3-D input is [N, C, L], as 1.13 reads it; see dg_dropout2d); a copy
 * in eval. Same params as Dropout. */
DG_API dg_layer *dg_nn_dropout2d(double p);
DG_API dg_layer *dg_nn_dropout2d_ext(dg_nn_dropout_params p);

/* Activations and shape layers (no parameters). */
DG_API dg_layer *dg_nn_relu(void);
DG_API dg_layer *dg_nn_leaky_relu(double negative_slope);    /* torch's default is 0.01 */
DG_API dg_layer *dg_nn_sigmoid(void);
DG_API dg_layer *dg_nn_tanh(void);
DG_API dg_layer *dg_nn_gelu(bool approximate_tanh);           /* false: exact erf form (torch's default) */
DG_API dg_layer *dg_nn_softmax(int axis);                     /* Paddle's default axis is -1 */
DG_API dg_layer *dg_nn_flatten(int start_axis, int stop_axis);/* torch/Paddle defaults: 1, -1 */
DG_API dg_layer *dg_nn_identity(void);

/* Sequential: children named "0", "1", ... run in order, each on the previous one's output, so
 * every child must take one input (dg_layer_num_inputs 1; a multi-input or loss layer is
 * refused with an error naming it). Takes over the n layers given; if any is NULL the others
 * are freed and NULL is returned (keeping the failed constructor's message). */
DG_API dg_layer *dg_nn_sequential(int n, ...);
DG_API dg_layer *dg_nn_sequential_array(int n, dg_layer *const *layers);
/* Appends a child named by its index; takes over `layer`. */
DG_API int dg_nn_sequential_append(dg_layer *seq, dg_layer *layer);

/* ======================= loss layers =======================
 * Run with dg_loss_forward(loss, input, label); dg_forward refuses them. */
DG_API dg_layer *dg_nn_mse_loss(dg_reduction reduction);                      /* "MSELoss" */
DG_API dg_layer *dg_nn_l1_loss(dg_reduction reduction);                       /* "L1Loss" */
DG_API dg_layer *dg_nn_cross_entropy_loss(dg_cross_entropy_params p);         /* "CrossEntropyLoss"; see ops.h */
DG_API dg_layer *dg_nn_bce_with_logits_loss(dg_reduction reduction);          /* "BCEWithLogitsLoss" */

/* ======================= initialisers (torch.nn.init) =======================
 * In place on a float tensor, under no_grad (so they work on parameters); 0 or a negative
 * dg_status. Random draws come from the calling thread's generator (dg_generator_use; the
 * kaiming ones also take one in their params). Fans follow torch: for a tensor
 * of ndim >= 2, fan_in = size(1) * receptive field, fan_out = size(0) * receptive field,
 * receptive field = product of dims 2.. (so Linear [out, in] has fan_in = in). */
typedef enum dg_nonlinearity {
    DG_NONLIN_LEAKY_RELU = 0,  /* gain sqrt(2 / (1 + a^2)); the kaiming default, a = 0 -> sqrt(2) */
    DG_NONLIN_RELU,            /* sqrt(2) */
    DG_NONLIN_LINEAR,          /* 1 (also conv and sigmoid) */
    DG_NONLIN_SIGMOID,         /* 1 */
    DG_NONLIN_TANH,            /* 5/3 */
    DG_NONLIN_SELU,            /* 3/4 */
} dg_nonlinearity;
typedef enum dg_fan_mode { DG_FAN_IN = 0, DG_FAN_OUT = 1 } dg_fan_mode;

typedef struct dg_nn_kaiming_params {   /* defaults are torch's */
    double a;                     /* negative slope for leaky_relu; default 0 */
    dg_fan_mode mode;             /* default DG_FAN_IN */
    dg_nonlinearity nonlinearity; /* default DG_NONLIN_LEAKY_RELU */
    dg_generator *generator;      /* NULL: the calling thread's generator */
    uint32_t params_tag;     /* set by dg_nn_kaiming_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_nn_kaiming_params;
DG_API dg_nn_kaiming_params dg_nn_kaiming_default_params(void);

DG_API double dg_nn_init_calculate_gain(dg_nonlinearity nonlinearity, double param);
DG_API int dg_nn_init_calculate_fans(const dg_tensor *t, int64_t *fan_in, int64_t *fan_out);
DG_API int dg_nn_init_constant_(dg_tensor *t, double value);
DG_API int dg_nn_init_zeros_(dg_tensor *t);
DG_API int dg_nn_init_ones_(dg_tensor *t);
DG_API int dg_nn_init_uniform_(dg_tensor *t, double low, double high);
DG_API int dg_nn_init_normal_(dg_tensor *t, double mean, double std);
/* U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)); gain >= 0 (torch's default is 1). */
DG_API int dg_nn_init_xavier_uniform_(dg_tensor *t, double gain);
/* N(0, gain * sqrt(2 / (fan_in + fan_out))); gain >= 0 (torch's default is 1). */
DG_API int dg_nn_init_xavier_normal_(dg_tensor *t, double gain);
/* U(-b, b), b = gain * sqrt(3 / fan) with gain from nonlinearity and a. */
DG_API int dg_nn_init_kaiming_uniform_(dg_tensor *t, dg_nn_kaiming_params p);
/* N(0, gain / sqrt(fan)). */
DG_API int dg_nn_init_kaiming_normal_(dg_tensor *t, dg_nn_kaiming_params p);

#ifdef __cplusplus
}
#endif
#endif
