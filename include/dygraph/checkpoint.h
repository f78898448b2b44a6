/* dygraph/checkpoint.h — saving and loading a layer's state (parameters + buffers, under the
 * torchvision/Paddle names) and an optimizer's state as safetensors files, readable and
 * writable by PyTorch's `safetensors` package. Saves are atomic (temp file, fsync, rename).
 * Loads validate first and change nothing when they fail. */
#ifndef DYGRAPH_CHECKPOINT_H
#define DYGRAPH_CHECKPOINT_H

#include "io.h"
#include "nn.h"
#include "optim.h"
#include "amp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch's load_state_dict(strict=True) */
typedef struct dg_load_params {
    bool strict;       /* true (default): any missing/unexpected key or shape/dtype mismatch is an
                          error and nothing is loaded; false: loads every entry that matches and
                          counts the rest in the report */
    uint32_t params_tag;     /* set by dg_load_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
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

/* Everything a resume needs, saved and loaded as one file (one atomic rename: a reader sees
 * the previous checkpoint or the new one, never a mix of the two): the model's state, the
 * optimizer's, the LR scheduler's state (its epoch; ReduceLROnPlateau's best value and counters
 * too: dg_lr_scheduler_state_*), the position of a random generator (dropout, random
 * initialisers), the loss scaler's state (dygraph/amp.h: scale and counters) and the progress
 * counters. The DataLoader's position is (epoch, batch): its order is a function of (seed, epoch,
 * index), so dg_dataloader_start_epoch_at(dl, epoch, batch) continues an epoch where the saved run
 * was. A load checks every part before it changes anything; a file of another kind, or one that
 * does not fit the model, optimizer, scheduler and scaler, is refused naming what disagrees. */
typedef struct dg_train_state {
    dg_layer *model;              /* required */
    dg_optimizer *optimizer;      /* NULL: none saved; on load, the file must then hold none */
    dg_lr_scheduler *scheduler;   /* NULL: none saved; on load, the file must then hold none */
    dg_generator *generator;      /* NULL: the default generator */
    int64_t epoch;                /* progress, the caller's to define: epochs done, */
    int64_t step;                 /* optimizer steps taken (a metrics log continues from it), */
    int64_t batch;                /* batches done in the current epoch */
    dg_amp_scaler *scaler;        /* loss scaler; NULL: none saved; on load, the file must then hold none */
} dg_train_state;
DG_API int dg_train_checkpoint_save(const char *path, const dg_train_state *state);
/* Loads into state->model, ->optimizer, ->scheduler, ->generator and ->scaler, and sets the three
 * counters. */
DG_API int dg_train_checkpoint_load(const char *path, dg_train_state *state);

#ifdef __cplusplus
}
#endif
#endif
