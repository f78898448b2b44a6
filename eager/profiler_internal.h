/* eager/profiler_internal.h — what the profiler's two halves share: the event and buffer layout
 * and the session state that eager/profiler.c (recording, sessions) writes and
 * eager/profiler_report.c (the table, the Chrome trace) reads under dg_prof_lock. */
#ifndef DG_EAGER_PROFILER_INTERNAL_H
#define DG_EAGER_PROFILER_INTERNAL_H

#include "profiler.h"
#include "backend.h"
#include <dygraph/profiler.h>
#include <pthread.h>
#include <stdio.h>

/* ---- events and buffers ---- */
#define NAME_LEN 48
#define MAX_SHAPES 9          /* up to 8 inputs and the output */
#define MAX_IN 8
#define CHUNK_EV 1024
#define CHUNK_DIMS 8192
#define STACK_MAX 64
#define MAX_TRACKS 256
#define TRACK_TID_BASE 2130706432   /* 0x7f000000: track rows, far from real thread ids */

enum { EV_SPAN = 0, EV_COUNTER = 1, EV_DEVICE = 2, EV_DEAD = 3 };   /* EV_DEVICE: a GPU op's events, until stop resolves them */
enum { F_OUT = 1, F_BYTES = 2, F_INDEX = 4, F_TRACK = 8, F_SHAPES = 16 };

typedef struct prof_ev {
    uint64_t t0, dur;         /* ns; a counter's time is t0 */
    int64_t a, b;             /* bytes and index; a counter's allocated and reserved bytes */
    char name[NAME_LEN];
    uint8_t kind, cat, flags, n_shapes;
    uint8_t n_in;             /* inputs the op had (more than MAX_IN are counted, not kept) */
    int8_t dtype;             /* -1: none */
    int8_t dev_type;          /* -1: none */
    uint8_t dev_index;
    int8_t ndim[MAX_SHAPES];  /* -1: a NULL input */
    uint16_t dims_off;        /* into its chunk's dims */
    uint16_t track;
} prof_ev;

typedef struct prof_chunk {
    struct prof_chunk *next;  /* published with release */
    uint32_t n;               /* events published (release) */
    uint32_t ndims;           /* owner only */
    prof_ev ev[CHUNK_EV];
    int64_t dims[CHUNK_DIMS];
} prof_chunk;

typedef struct prof_frame { uint64_t t0; uint8_t cat; char name[NAME_LEN]; } prof_frame;
/* An op on a GPU: its start (host) and the event recorded on the device's stream then. */
typedef struct prof_dframe { uint64_t t0; void *ev; const dg_backend *be; } prof_dframe;

typedef struct prof_thread {
    struct prof_thread *next_all;  /* the global list (dg_prof_lock) */
    uint64_t gen;                  /* the session its events belong to (written by its thread, release) */
    int dead;                      /* its thread has exited (release) */
    int tid;
    char name[32];                 /* dg_prof_lock */
    prof_chunk *head, *tail;       /* head: read by the writer; tail: its thread only */
    int depth, overflow;           /* range_push stack */
    prof_frame stack[STACK_MAX];
    int ddepth;                    /* GPU ops begun and not yet ended (dg_prof_op_begin) */
    prof_dframe dstack[STACK_MAX];
} prof_thread;

/* session state (eager/profiler.c) */
extern pthread_mutex_t dg_prof_lock;
extern prof_thread *dg_prof_threads;          /* every buffer (dg_prof_lock) */
extern uint64_t dg_prof_gen;                  /* session number (release / acquire) */
extern bool dg_prof_started;                  /* some session was started (its events may be read) */
extern uint64_t dg_prof_t_start, dg_prof_t_stop;   /* ns; dg_prof_t_stop 0: still recording */
extern int64_t dg_prof_nevents, dg_prof_dropped;   /* atomics */
extern char dg_prof_tracks[MAX_TRACKS][NAME_LEN];  /* track names (dg_prof_lock) */
extern int dg_prof_ntracks;
extern int64_t dg_prof_max_events;

/* eager/profiler_report.c, with dg_prof_lock held */
void dg_prof_stats_invalidate(void);          /* a new session: the cached table rows are stale */
int dg_prof_table_locked(FILE *f, int rows);
int dg_prof_export_locked(const char *path, char *written, size_t wlen);

#endif
