/* eager/profiler.h — the profiler's hooks inside eager/ (the public side is
 * include/dygraph/profiler.h). The op entry path (eager/ops/op_entry.c) and the backward walk
 * call dg_prof_op for every op they run while a profiler records; with none recording each
 * hook costs one load of dg_prof_active. */
#ifndef DG_EAGER_PROFILER_H
#define DG_EAGER_PROFILER_H

#include "internal.h"

/* nonzero while a profiler records (any thread) */
extern int dg_prof_active;
static inline bool dg_profiling(void) { return __atomic_load_n(&dg_prof_active, __ATOMIC_RELAXED) != 0; }

/* monotonic clock, nanoseconds */
uint64_t dg_prof_now(void);

enum { DG_PROF_FORWARD = 0, DG_PROF_BACKWARD = 1 };
/* One op ran on this thread from t0 (dg_prof_now) to now: its name, phase, inputs (NULL
 * entries allowed) and output (NULL when it failed). Ops nest: a composite's range holds the
 * ranges of the ops it is made of. */
void dg_prof_op(const char *name, int phase, uint64_t t0, const dg_tensor *const *in, int n_in, const dg_tensor *out);

#endif
