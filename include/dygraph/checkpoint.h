/* dygraph/checkpoint.h — saving and loading a layer's state (parameters + buffers, under the
 * torchvision/Paddle names) and an optimizer's state as safetensors files, readable and
 * writable by PyTorch's `safetensors` package. Saves are atomic (temp file, fsync, rename).
 * Loads validate first and change nothing when they fail. */
#ifndef DYGRAPH_CHECKPOINT_H
#define DYGRAPH_CHECKPOINT_H

#include "io.h"
#include "nn.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch's load_state_dict(strict=True) */
typedef struct dg_load_params {
    bool strict;       /* true (default): any missing/unexpected key or shape/dtype mismatch is an
                          error and nothing is loaded; false: loads every entry that matches and
                          counts the rest in the report */
} dg_load_params;
DG_API dg_load_params dg_load_default_params(void);

typedef struct dg_load_report {
    int loaded, missing, unexpected, mismatched;
} dg_load_report;

/* The layer's state_dict (torch order) as a dict of borrowed-by-reference tensors. */
DG_API dg_tensor_dict *dg_layer_state_to_dict(const dg_layer *layer);
DG_API int dg_layer_save(const dg_layer *layer, const char *path);
/* report may be NULL. The error message lists the offending names. */
DG_API int dg_layer_load_dict(dg_layer *layer, const dg_tensor_dict *state, dg_load_params p, dg_load_report *report);
DG_API int dg_layer_load(dg_layer *layer, const char *path, dg_load_params p, dg_load_report *report);

DG_API int dg_optimizer_save(const dg_optimizer *opt, const char *path);
/* Every entry is checked against the optimizer's kind and parameters before any is loaded. */
DG_API int dg_optimizer_load(dg_optimizer *opt, const char *path);
DG_API int dg_optimizer_load_dict(dg_optimizer *opt, const dg_tensor_dict *state);

#ifdef __cplusplus
}
#endif
#endif
