/* dygraph/onnx.h — exporting a layer to an ONNX model (paddle.onnx.export, torch.onnx.export):
 * the file ONNX Runtime, TensorRT or OpenVINO serve from.
 *
 * dg_onnx_export runs the layer's forward once on an example input, in eval mode (the layer's
 * own train/eval settings are put back afterwards), with the tape tracing every op, and writes
 * the graph those ops form. Parameters and buffers become initializers named as in the state
 * dict ("conv1.weight", "layer1.0.bn1.running_mean"); Dropout disappears (identity in eval);
 * BatchNorm becomes BatchNormalization, or is folded into the convolution before it when asked.
 * Only what the example run did is exported: branches a forward takes on values (not shapes)
 * are fixed by that run, as in torch.onnx's tracing exporter.
 *
 * An op without an ONNX form, a custom op (dg_record from user code), or a value the trace
 * cannot see (a tensor built inside the forward from data, a view of an integer value) is an
 * error naming it: the file is then not written, never a different graph. Masks and indices made
 * by ops (greater, equal, argmax, topk, argsort, casts, zeros_like) are graph ops. Float32 only
 * (the example input float32, or int64/int32 ids for an embedding model); the output float32,
 * or int64 indices (topk's, argmax's). */
#ifndef DYGRAPH_ONNX_H
#define DYGRAPH_ONNX_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_ONNX_OPSET_MIN 13
#define DG_ONNX_OPSET_MAX 17   /* what Debian's onnx 1.12 checker knows; LayerNormalization needs 17 */

typedef struct dg_onnx_export_params {
    int opset;                 /* 13..17; default 17. Below 17 LayerNorm is written as its arithmetic */
    bool dynamic_batch;        /* axis 0 of the input and output is "N" (any batch); default true */
    const char *input_name;    /* default "input" */
    const char *output_name;   /* default "output" */
    bool fold_batch_norm;      /* BatchNorm after a Conv folded into its weight and bias; default false */
    const char *producer;      /* producer_name in the file; default "dygraph" */
    uint32_t params_tag;     /* set by dg_onnx_export_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_onnx_export_params;
DG_API dg_onnx_export_params dg_onnx_export_default_params(void);

/* Writes layer's forward on example_input as an ONNX model at path (a temporary beside it,
 * renamed when complete). 0, or a negative dg_status with a message naming the op, the layer
 * or the path. The layer's parameters, buffers and modes are unchanged afterwards. */
DG_API int dg_onnx_export(dg_layer *layer, const dg_tensor *example_input, const char *path, dg_onnx_export_params params);

#ifdef __cplusplus
}
#endif
#endif
