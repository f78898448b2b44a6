/* dygraph/custom_op.h — writing an op of your own, with its backward rule.
 *
 * Every built-in op is written with this same API. An op computes its output (with other ops
 * inside dg_no_grad, or by filling dg_data() of a fresh tensor), then calls dg_record() to put
 * a node on the tape. The node's backward function receives the gradient of the output and
 * writes one gradient per input (or NULL where dg_node_needs_grad() is false); it runs in
 * no-grad mode and may use any op. Temporaries it makes are freed by the engine.
 *
 * Recording can fail (more inputs or saved tensors than a node holds, a freed input, out of
 * memory): dg_record returns NULL and dg_node_save a negative status, each with a message.
 * An op must then fail too, returning NULL (its output without a node would silently cut the
 * graph); the compiler warns about a dropped result. */
#ifndef DYGRAPH_CUSTOM_OP_H
#define DYGRAPH_CUSTOM_OP_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_MAX_NODE_INPUTS 8
#define DG_MAX_NODE_SAVED 8
#define DG_NODE_ATTR_BYTES 128

#ifndef DG_NODISCARD   /* a result that must be checked */
#if defined(__GNUC__) || defined(__clang__)
#define DG_NODISCARD __attribute__((warn_unused_result))
#else
#define DG_NODISCARD
#endif
#endif

typedef struct dg_node dg_node;
typedef int (*dg_backward_fn)(dg_node *node, const dg_tensor *grad_output, dg_tensor **grad_inputs);

/* True when any input requires grad and grad mode is on: only then is a node worth recording.
 * NULL entries (inputs that are absent, like a missing bias) are skipped. */
DG_API bool dg_needs_record(const dg_tensor *const *inputs, int n_inputs);
/* Attach a node to output (which must be freshly made by the op and have no node yet).
 * Inputs that need no grad may be NULL; at most DG_MAX_NODE_INPUTS. The node keeps
 * references, never changes an input. Returns the node (owned by output) or NULL with an
 * error naming the op; output is then unchanged. */
DG_API DG_NODISCARD dg_node *dg_record(const char *name, dg_tensor *output, const dg_tensor *const *inputs, int n_inputs,
                                       dg_backward_fn backward);
/* Keep a tensor for backward (a reference; values must not change afterwards). At most
 * DG_MAX_NODE_SAVED per node. 0, or a negative dg_status with an error naming the node's op
 * (node NULL, t NULL or freed, too many saved, out of memory). */
DG_API DG_NODISCARD int dg_node_save(dg_node *node, const dg_tensor *t);
DG_API const dg_tensor *dg_node_saved(const dg_node *node, int i);
/* Op attributes (stride, axis, …): DG_NODE_ATTR_BYTES of scratch, zeroed at record time. */
DG_API void *dg_node_attr(dg_node *node);
DG_API bool dg_node_needs_grad(const dg_node *node, int input);
DG_API dg_shape dg_node_input_shape(const dg_node *node, int input);
DG_API dg_dtype dg_node_input_dtype(const dg_node *node, int input);
DG_API const char *dg_node_name(const dg_node *node);

/* Random numbers for an op of your own, from the streams the built-in ops draw from: reserves n
 * 32-bit draws of g (NULL: the calling thread's generator, see dg_generator_use), stores the
 * generator's seed in *seed and returns the first Philox counter of the reservation; the draws
 * are the four words of dg_philox4x32(*seed, counter + k) for k < ceil(n / 4). Threads reserving
 * from one generator at once get disjoint counters. */
DG_API uint64_t dg_generator_reserve(dg_generator *g, uint64_t n, uint64_t *seed);
DG_API void dg_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);

#ifdef __cplusplus
}
#endif
#endif
