/* test/onnx/op_models.h — the small one-purpose test models of test/onnx/op_models.c (TopK and
 * sort, argmax, masks and where, cumsum and scatter, 1-d convolution and pooling, GroupNorm,
 * ceil-mode pooling), which export_models.c exports and records like the big ones. */
#ifndef DG_TEST_ONNX_OP_MODELS_H
#define DG_TEST_ONNX_OP_MODELS_H

#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>

/* The assertion of the export programs: a failed check names the program, what failed and the
 * library's last error, and ends the process with exit 1, which fails make test-onnx. */
#define ONNX_ASSERT(cond, what)                                                                        \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "%s: %s failed: %s (%s:%d)\n", ONNX_PROGRAM, what, dg_last_error(), __FILE__, __LINE__); \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

typedef struct op_model {
    const char *name;                       /* the file's name, and check.py's key */
    dg_layer *(*make)(void);
    dg_tensor *(*input)(int64_t batch);
    int64_t fixed_batch;                    /* 0: exported at batch 1 with a dynamic batch axis, run at 1 and 7;
                                               else exported and run at this batch only */
} op_model;

extern const op_model op_models[];
extern const int n_op_models;

#endif
