/* dygraph/profiler.h — the profiler (torch.profiler, Paddle's profiler): a timeline of what each
 * thread ran, written as Chrome trace-event JSON (Perfetto, ui.perfetto.dev, and chrome://tracing
 * open it), and a table of the time each op took, sorted by total time.
 *
 * What it records while on:
 *   - every op's forward ("matmul", with its inputs' shapes, dtype, device and output shape) and
 *     each backward rule of dg_backward's walk ("matmul_backward"), nested as they ran: a
 *     composite op's range holds the ops it is made of; "backward" holds the whole walk;
 *   - the optimizer's step and clear_grad ("adam.step");
 *   - the DataLoader: the time the training loop waits for and receives each batch
 *     ("dataloader.next"), and each worker thread's loading of a batch ("dataloader.load") on
 *     that worker's own row;
 *   - collectives (all_reduce, broadcast, all_gather, barrier, with their bytes) and each
 *     DataParallel bucket's all-reduce from its start to its completion (bucket index, bytes) on a
 *     row of its own ("DataParallel bucket 3"), where it overlaps backward;
 *   - on a GPU, each op's device time: an event pair recorded on the device's compute stream
 *     around the op (as torch's profiler times kernels without CUPTI), read when the session
 *     stops, as "kernel" events on the row "gpu:0 stream (device time)";
 *   - memory: the allocated and reserved bytes of the CPU's allocator and of a GPU's caching
 *     allocator as counters over time ("memory cpu", "memory gpu:0"), sampled at op ends at most
 *     once per memory_interval_us and written when they changed;
 *   - ranges of your own (dg_profiler_range_push / pop, or dg_profiler_span_begin / end).
 *
 * Start and stop it in the program:
 *     dg_profiler_params p = dg_profiler_default_params();
 *     p.trace_path = "trace.json";   // written by dg_profiler_stop
 *     p.print_table = true;          // the table on stderr at dg_profiler_stop
 *     dg_profiler_start(p);
 *     ... train ...
 *     dg_profiler_stop();
 * or from the environment, with no change to the program: DG_PROFILE=trace.json starts it at the
 * first use of the library (dg_init or the first tensor), and it stops at dg_shutdown or at exit,
 * writing the file and printing the table on stderr. In a job of several ranks (PADDLE_TRAINER_ID
 * / OMPI_COMM_WORLD_RANK set, world size > 1) each rank writes its own file: "%r" in a path is
 * replaced by the rank, and a path without it gets ".rank<N>" before its extension
 * (trace.json -> trace.rank1.json); the trace's pid is then the rank.
 *
 * Timestamps are CLOCK_MONOTONIC microseconds, so the files of several processes on one machine
 * line up. A session's events stay readable (export, table, key averages) after dg_profiler_stop
 * until the next dg_profiler_start.
 *
 * Cost: off, each hook is one relaxed load of a flag. On, an event is a few hundred nanoseconds
 * (a clock read, a copy of the name and the shapes into the thread's own buffer: no lock). */
#ifndef DYGRAPH_PROFILER_H
#define DYGRAPH_PROFILER_H

#include <stdio.h>
#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an event is; its "cat" in the trace is the name in parentheses. */
typedef enum dg_profiler_category {
    DG_PROFILER_OP = 0,           /* an op's forward ("op") */
    DG_PROFILER_OP_BACKWARD = 1,  /* an op's backward rule in dg_backward ("op_backward") */
    DG_PROFILER_AUTOGRAD = 2,     /* dg_backward as a whole ("autograd") */
    DG_PROFILER_OPTIMIZER = 3,    /* optimizer step and clear_grad ("optimizer") */
    DG_PROFILER_DATALOADER = 4,   /* a batch waited for, or loaded by a worker ("dataloader") */
    DG_PROFILER_COLLECTIVE = 5,   /* a collective, a DataParallel bucket ("collective") */
    DG_PROFILER_USER = 6,         /* ranges of the program's own ("user") */
    DG_PROFILER_KERNEL = 7,       /* device time of kernels ("kernel") */
    DG_PROFILER_NUM_CATEGORIES = 8
} dg_profiler_category;

typedef struct dg_profiler_params {
    const char *trace_path;    /* dg_profiler_stop writes the trace here ("%r": the rank, see above);
                                  NULL (default): no file (dg_profiler_export_chrome_trace writes one) */
    bool print_table;          /* dg_profiler_stop prints the table on stderr; default false */
    int table_rows;            /* its rows, >= 0 (0: every row); default 20 */
    bool record_shapes;        /* op events carry their inputs' shapes, dtype, device and output shape;
                                  default true (torch's is false; the trace is what this is for) */
    bool profile_memory;       /* memory counters; default true */
    double memory_interval_us; /* at most one memory sample per this many microseconds, >= 0; default 100 */
    int64_t max_events;        /* events kept, >= 1; later ones are counted as dropped (the table and the
                                  trace say how many); default 4,000,000 (about 400 MB) */
    uint32_t params_tag;       /* set by dg_profiler_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_profiler_params;
DG_API dg_profiler_params dg_profiler_default_params(void);

/* Starts recording on every thread (the previous session's events are dropped). DG_ESTATE when
 * a session is already recording. */
DG_API int dg_profiler_start(dg_profiler_params params);
/* Stops recording; writes params.trace_path and prints the table when the params asked. 0, the
 * status of a failed write (DG_EIO, with the path), or DG_ESTATE when none was recording. */
DG_API int dg_profiler_stop(void);
/* Whether a session is recording now. */
DG_API bool dg_profiler_enabled(void);

/* The last (or the running) session's events as Chrome trace-event JSON: "X" complete events
 * (name, cat, ts and dur in microseconds, pid, tid, args), "C" memory counters and "M" process
 * and thread names. path takes "%r" as trace_path does. 0, DG_EIO (with the path), DG_ESTATE
 * when no session was started. */
DG_API int dg_profiler_export_chrome_trace(const char *path);
/* The table (torch's key_averages().table()): one row per event name and category, sorted by
 * total time: calls, self time (total less the time of the events nested in it on the same
 * thread), total time, their share of the profiled wall time, the mean per call. rows: the
 * first rows (0: all). 0, DG_EINVAL for a NULL f, DG_ESTATE when no session was started. */
DG_API int dg_profiler_print_table(FILE *f, int rows);

/* One row of the table. */
typedef struct dg_profiler_stat {
    char name[48];
    dg_profiler_category category;
    int64_t calls;
    double total_us;   /* summed over the calls */
    double self_us;    /* total less the events nested in them */
    double percent;    /* total_us as a share of the profiled wall time (several threads: can pass 100) */
} dg_profiler_stat;
/* The table's rows, sorted by total time: writes at most max into out and returns how many rows
 * there are (call with max 0 to count), or DG_ESTATE when no session was started. */
DG_API int dg_profiler_key_averages(dg_profiler_stat *out, int max);

/* ---- ranges of your own (nn/, optim/, data/, dist/ use these too) ----
 * Off, each is one relaxed load. */
/* A range on the calling thread, closed by the matching pop (NVTX's push/pop); ranges nest. */
DG_API void dg_profiler_range_push(dg_profiler_category category, const char *name);
DG_API void dg_profiler_range_pop(void);
/* For a range with arguments: begin returns a token (0 while the profiler is off) that end
 * takes; end records nothing for a token of 0. bytes (-1: none) and index (-1: none) go into
 * the event's args: index is "bucket" for a collective, "batch" for the DataLoader, else "index". */
DG_API uint64_t dg_profiler_span_begin(void);
DG_API void dg_profiler_span_end(uint64_t token, dg_profiler_category category, const char *name, int64_t bytes,
                                 int64_t index);
/* The same on a row of its own named track instead of the calling thread's, for work that is
 * in flight while the thread does other things (a bucket's all-reduce during backward). */
DG_API void dg_profiler_span_end_on(const char *track, uint64_t token, dg_profiler_category category, const char *name,
                                    int64_t bytes, int64_t index);
/* The calling thread's row name in traces ("dataloader worker"); by default "main" for the
 * process's first thread, else the thread's system name. */
DG_API void dg_profiler_thread_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
