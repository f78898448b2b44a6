/* test/gpu/gpu_compare.h — the CPU-vs-GPU comparison harness of dygraph_gpu_tests: case tables
 * (an op or a layer, its inputs, a tolerance per comparison), the runners that build the inputs
 * on the CPU with a fixed seed, copy them to gpu:0 with dg_to_device, run forward and backward on
 * both devices and compare values and gradients, and the comparison itself, which names the op,
 * the max abs/rel error and the worst element. Implemented in gpu_compare.c. */
#ifndef DG_GPU_COMPARE_H
#define DG_GPU_COMPARE_H

#include <dygraph.h>
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GT_MAX_IN 6

/* Brace initialisers (usable in static tables, unlike DG_SHAPE's compound literal). */
#define GT_SHAPE(...) { .ndim = DG_NARGS(__VA_ARGS__), .d = { __VA_ARGS__ } }
#define GT_SCALAR { .ndim = 0 }

/* |gpu - cpu| <= atol' + rtol * |cpu| per element, where atol' = atol, or atol * max|cpu| with
 * atol_of_max (for long chains such as a whole network, whose small entries come from
 * cancellation and carry the absolute error of the big ones). */
typedef struct gt_tol { double rtol, atol; bool atol_of_max; } gt_tol;
/* Why these: f32 has 6e-8 relative rounding; a kernel that rounds once per element (CUDA's
 * expf/logf/powf are within 2-4 ulp) stays under 1e-6, so 1e-5 is loose enough for any correct
 * implementation and still tight enough that a wrong formula or index cannot pass. A reduction,
 * GEMM or convolution sums tens to thousands of terms in another order (cuBLAS/cuDNN/tree
 * reductions versus oneDNN/sequential loops): its error grows with the term count, so 1e-4. */
#define GT_EXACT { 0, 0, false }
#define GT_EW { 1e-5, 1e-6, false }
/* Kernels that compute each element with the CPU's own arithmetic (elementwise ops and their
 * gradients, copies, gathers, pooling windows): within 2 ulp of the CPU's f32 result, which leaves
 * room for a GPU math library's last bit in exp/log/tanh/erf and nothing more. */
#define GT_ULP2 { 2.4e-7, 0, false }
#define GT_ULP2_F64 { 4.5e-16, 0, false }
#define GT_RED { 1e-4, 1e-5, false }
#define GT_RED_LOOSE { 1e-4, 1e-4, false }

typedef enum gt_kind {
    GT_GRAD = 0,   /* f32 uniform in [lo, hi) (lo = hi = 0: [-1, 1)), requires grad */
    GT_CONST,      /* f32 uniform in [lo, hi), no grad */
    GT_LABELS,     /* i64 integers uniform in [0, hi) */
    GT_LABELS32,   /* i32 integers uniform in [0, hi) */
    GT_INTF,       /* f32 holding integers in [lo, hi), no grad (equal values for dg_equal) */
    GT_MASK,       /* bool, true with probability 1/2 */
    GT_GRAD64,     /* f64 uniform in [lo, hi), requires grad */
    GT_SOFT,       /* f32 rows summing to 1 along the last axis (soft labels), no grad */
} gt_kind;

typedef struct gt_input { gt_kind kind; dg_shape shape; double lo, hi; } gt_input;

/* ---- op cases: fn runs once on CPU inputs and once on their gpu:0 copies ----
 * fn is called with the current device set to the inputs' device (so tensors it makes itself,
 * such as labels or running statistics, land there too) and the RNG reseeded identically. */
typedef dg_tensor *(*gt_op_fn)(dg_tensor *const *in);
typedef struct gt_op_case {
    const char *name;
    gt_op_fn fn;
    int n_in;
    gt_input in[GT_MAX_IN];
    gt_tol fwd, grad;
} gt_op_case;

/* ---- layer cases: make() runs once with the CPU current and once with gpu:0 current ---- */
typedef struct gt_layer_case {
    const char *name;
    dg_layer *(*make)(void);
    gt_input in, label;   /* label is used by loss layers (loss = true) */
    bool loss;
    bool eval;            /* compare in eval mode, after a training-mode forward fed the running stats */
    gt_tol init, fwd, grad;
} gt_layer_case;

/* ---- runners and helpers ---- */

/* The device under test: gpu:0, or the CPU when DG_GPU_TESTS_ON_CPU=1 asks for a self-check of
 * the harness and the tables on a machine without a GPU (every comparison is then CPU against
 * CPU and must pass exactly; it proves nothing about the CUDA backend). */
dg_device gt_dut(void);
const char *gt_dut_name(void);   /* "gpu:0" or "cpu" */
bool gt_on_cpu_selfcheck(void);

/* Every test starts here: the device under test must be usable (main() skipped the suite
 * otherwise), TF32 must be off, and the CPU is left current. */
void gt_gpu_begin(void);
/* Makes `name` ("cpu", "gpu:0" or gt_dut_name()) the current device or fails the test. */
void gt_use(const char *name);
/* A CPU tensor as described (with the RNG in its current state). */
dg_tensor *gt_make_input(const gt_input *in, const char *op, int i);
/* Copy of a CPU tensor on the device under test as a fresh leaf (requires grad when `grad`). */
dg_tensor *gt_to_gpu(const dg_tensor *cpu, bool grad, const char *op);
/* The values of t (any device, dtype and strides) as host doubles; free() them. */
double *gt_host_f64(const dg_tensor *t, const char *op, const char *what);
/* Compares a GPU result with the CPU's; on a mismatch the test fails (and goes on) with the op,
 * what was compared, max abs and rel error and the worst element's index and values. Returns
 * whether they matched. DG_TEST_VERBOSE=1 prints every comparison. */
bool gt_compare(const char *op, const char *what, const dg_tensor *cpu, const dg_tensor *gpu, gt_tol tol);
/* Fails the test unless t lives on the device under test (an op must not fall back to the host
 * silently). */
void gt_expect_on_gpu(const char *op, const char *what, const dg_tensor *t);

/* Run one table row on the CPU and on gpu:0 and fail the test where values or gradients differ
 * beyond the row's tolerances. */
void gt_expect_op_matches_cpu(const gt_op_case *c, uint64_t seed);
void gt_expect_layer_matches_cpu(const gt_layer_case *c, uint64_t seed);

/* Layer helpers shared with the model tests: compare the state dicts of two same-structure
 * layers; copy the CPU layer's state into the GPU layer (bit-exact, through the host); compare
 * the gradients of their parameters. */
void gt_compare_state(const char *op, const char *what, const dg_layer *cpu, const dg_layer *gpu, gt_tol tol);
void gt_copy_state(const char *op, const dg_layer *cpu, dg_layer *gpu);
void gt_compare_param_grads(const char *op, const dg_layer *cpu, const dg_layer *gpu, gt_tol tol);

/* One Criterion parameterized test per table row: each row runs in its own worker process, so a
 * crash or failure in one case leaves the others reporting. The parameter is the row's index
 * (plain ints: pointers would not survive the worker's fresh address space). */
#define GT_TABLE_TESTS(suite, table, runner, seed_base)                                        \
    ParameterizedTestParameters(suite, table) {                                                \
        static int idx_[sizeof table / sizeof table[0]];                                       \
        for (size_t i_ = 0; i_ < sizeof table / sizeof table[0]; i_++) idx_[i_] = (int)i_;     \
        return cr_make_param_array(int, idx_, sizeof table / sizeof table[0]);                 \
    }                                                                                          \
    ParameterizedTest(int *row, suite, table) { runner(&table[*row], (uint64_t)(seed_base) + (uint64_t)*row * 16); }

#endif
