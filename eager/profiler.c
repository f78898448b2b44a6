/* eager/profiler.c — the profiler (dygraph/profiler.h): per-thread event buffers, memory
 * counters, the Chrome trace-event writer, the key-averages table, and DG_PROFILE.
 *
 * Recording. Each thread that records gets a buffer of its own at its first event: a list of
 * chunks, each an array of fixed events plus a pool for their shapes' dims, appended by that
 * thread only, with no lock: an event is written, then published by a release store of the
 * chunk's count (a full chunk links the next one the same way). The buffer joins a global list
 * under a mutex once. A session has a generation number; a buffer holding an older session's
 * events is emptied by its own thread at its next event, so the writer never races a reset: it
 * reads, under the mutex that dg_profiler_start also takes, only buffers of the current session,
 * each up to the counts it loads with acquire. Buffers of threads that have exited are freed by
 * the next dg_profiler_start.
 *
 * Nesting. Events are recorded when they end, so the writer sorts each thread's events by start
 * (longer first on ties); an event's parent is the innermost earlier event that contains it.
 * Self time is an event's duration less its children's. Work in flight while its thread does
 * other things (a DataParallel bucket's all-reduce) goes to a named track, a row of its own.
 *
 * Memory. At an op's or a span's end, at most once per memory_interval_us (one relaxed load of
 * the next due time when it is not due), the CPU allocator's live and reserved bytes, and those
 * of the op's GPU when it ran on one, are sampled and written as a counter when they changed.
 *
 * Device time. An op begun with dg_prof_op_begin on a GPU input gets an event recorded on that
 * GPU's stream at its start and one at its end (the CUDA module's entries, eager/cuda/profile.c);
 * dg_profiler_stop reads their elapsed times and turns each pair into a "kernel" span on a row per
 * GPU ("gpu:0 stream (device time)"). */
#include "profiler.h"
#include "backend.h"
#include <dygraph/module.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int dg_prof_active;
int dg_prof_env_done;

uint64_t dg_prof_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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
    struct prof_thread *next_all;  /* the global list (g_lock) */
    uint64_t gen;                  /* the session its events belong to (written by its thread, release) */
    int dead;                      /* its thread has exited (release) */
    int tid;
    char name[32];                 /* g_lock */
    prof_chunk *head, *tail;       /* head: read by the writer; tail: its thread only */
    int depth, overflow;           /* range_push stack */
    prof_frame stack[STACK_MAX];
    int ddepth;                    /* GPU ops begun and not yet ended (dg_prof_op_begin) */
    prof_dframe dstack[STACK_MAX];
} prof_thread;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_thread *g_threads;
static uint64_t g_gen;                      /* session number (release / acquire) */
static bool g_started;                      /* some session was started (its events may be read) */
static bool g_env_session;                  /* the running session came from DG_PROFILE */
static char g_trace_path[1024];             /* the running session's params.trace_path */
static dg_profiler_params g_params;
static uint64_t g_t_start, g_t_stop;        /* g_t_stop 0: still recording */
static int64_t g_nevents, g_dropped;        /* atomics */
static char g_tracks[MAX_TRACKS][NAME_LEN]; /* track names (g_lock) */
static int g_ntracks;
/* read on the hot path without the lock: written before the session's generation is published */
static bool g_record_shapes, g_profile_memory;
static uint64_t g_mem_interval_ns;
static int64_t g_max_events;

static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static _Thread_local prof_thread *t_th;
static _Thread_local char t_name[32];

static void thread_gone(void *p) {
    prof_thread *th = p;
    if (t_th == th) t_th = NULL;
    __atomic_store_n(&th->dead, 1, __ATOMIC_RELEASE);
}
static void make_key(void) { pthread_key_create(&g_key, thread_gone); }

static int os_tid(void) { return (int)syscall(SYS_gettid); }

static void default_thread_name(char *buf, size_t len, int tid) {
    if (t_name[0]) snprintf(buf, len, "%s", t_name);
    else if (tid == (int)getpid()) snprintf(buf, len, "main");
    else if (pthread_getname_np(pthread_self(), buf, len) != 0 || !buf[0]) snprintf(buf, len, "thread %d", tid);
}

static prof_chunk *chunk_new(void) {
    prof_chunk *c = malloc(sizeof *c);
    if (c) { c->next = NULL; c->n = 0; c->ndims = 0; }
    return c;
}

/* ---- device time (GPU ops): the CUDA module's event entries (eager/cuda/profile.c), looked
 * up once the module is open ---- */
typedef void *(*dev_mark_fn)(const dg_backend *be);
typedef int (*dev_elapsed_fn)(void *a, void *b, float *ms);
typedef void (*dev_release_fn)(void *ev);
static dev_mark_fn g_dev_mark;
static dev_elapsed_fn g_dev_elapsed;
static dev_release_fn g_dev_release;

static bool dev_entries(void) {
    if (__atomic_load_n(&g_dev_release, __ATOMIC_ACQUIRE)) return true;
    dev_mark_fn m = (dev_mark_fn)dg_module_symbol_if_open("cuda", "dg_cuda_prof_mark");
    dev_elapsed_fn e = (dev_elapsed_fn)dg_module_symbol_if_open("cuda", "dg_cuda_prof_elapsed");
    dev_release_fn r = (dev_release_fn)dg_module_symbol_if_open("cuda", "dg_cuda_prof_release");
    if (!m || !e || !r) return false;
    __atomic_store_n(&g_dev_mark, m, __ATOMIC_RELEASE);
    __atomic_store_n(&g_dev_elapsed, e, __ATOMIC_RELEASE);
    __atomic_store_n(&g_dev_release, r, __ATOMIC_RELEASE);
    return true;
}
/* An event recorded now on be's stream, or NULL; the caller's error state is kept. */
static void *dev_mark(const dg_backend *be) {
    dg_error_saved saved;
    dg_error_save(&saved);
    void *ev = g_dev_mark(be);
    dg_error_restore(&saved);
    return ev;
}
static void dev_release(void *ev) {
    if (ev) g_dev_release(ev);
}
/* Drops th's GPU op frames begun after t0 (their ops never reported an end). */
static void dev_frames_drop(prof_thread *th, uint64_t t0);

/* The calling thread's buffer for session gen: made and registered at its first event, emptied
 * when it still holds an older session's events. NULL when out of memory. */
static prof_thread *thread_attach(uint64_t gen) {
    prof_thread *th = t_th;
    if (!th) {
        th = calloc(1, sizeof *th);
        if (!th) return NULL;
        th->head = th->tail = chunk_new();
        if (!th->head) { free(th); return NULL; }
        th->tid = os_tid();
        default_thread_name(th->name, sizeof th->name, th->tid);
        pthread_once(&g_key_once, make_key);
        pthread_setspecific(g_key, th);
        th->gen = gen;
        pthread_mutex_lock(&g_lock);
        th->next_all = g_threads;
        g_threads = th;
        pthread_mutex_unlock(&g_lock);
        t_th = th;
        return th;
    }
    /* a GPU op that ended after its session stopped kept its events: back to the module */
    for (prof_chunk *c = th->head; c; c = c->next)
        for (uint32_t i = 0; i < c->n; i++)
            if (c->ev[i].kind == EV_DEVICE) {
                dev_release((void *)(intptr_t)c->ev[i].a);
                dev_release((void *)(intptr_t)c->ev[i].b);
                c->ev[i].kind = EV_DEAD;
            }
    for (prof_chunk *c = th->head->next, *nx; c; c = nx) { nx = c->next; free(c); }
    th->head->next = NULL;
    __atomic_store_n(&th->head->n, 0, __ATOMIC_RELAXED);
    th->head->ndims = 0;
    th->tail = th->head;
    th->depth = th->overflow = 0;
    dev_frames_drop(th, 0);
    __atomic_store_n(&th->gen, gen, __ATOMIC_RELEASE);
    return th;
}
static inline prof_thread *thread_buf(void) {
    uint64_t gen = __atomic_load_n(&g_gen, __ATOMIC_ACQUIRE);
    prof_thread *th = t_th;
    return th && th->gen == gen ? th : thread_attach(gen);
}

static void dev_frames_drop(prof_thread *th, uint64_t t0) {
    while (th->ddepth > 0 && th->dstack[th->ddepth - 1].t0 > t0) dev_release(th->dstack[--th->ddepth].ev);
}

/* A slot for one event with ndims dims in th's last chunk (a new chunk when it is full); NULL
 * when the session's event limit is reached (counted as dropped) or out of memory. */
static prof_ev *ev_reserve(prof_thread *th, int ndims, int64_t **dims) {
    if (__atomic_fetch_add(&g_nevents, 1, __ATOMIC_RELAXED) >= g_max_events) {
        __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    prof_chunk *c = th->tail;
    uint32_t n = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
    if (n == CHUNK_EV || c->ndims + (uint32_t)ndims > CHUNK_DIMS) {
        prof_chunk *nc = chunk_new();
        if (!nc) { __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED); return NULL; }
        __atomic_store_n(&c->next, nc, __ATOMIC_RELEASE);
        th->tail = c = nc;
        n = 0;
    }
    prof_ev *e = &c->ev[n];
    e->dims_off = (uint16_t)c->ndims;
    if (dims) *dims = c->dims + c->ndims;
    c->ndims += (uint32_t)ndims;
    return e;
}
static inline void ev_publish(prof_thread *th) {
    prof_chunk *c = th->tail;
    __atomic_store_n(&c->n, __atomic_load_n(&c->n, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
}

static void copy_name(char *dst, const char *name, const char *suffix) {
    snprintf(dst, NAME_LEN, "%s%s", name ? name : "?", suffix ? suffix : "");
}

/* ---- memory counters ---- */
static pthread_mutex_t g_mem_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_mem_next;   /* ns: the next sample is due (relaxed) */
#define MEM_DEVICES 9         /* the CPU and gpu:0..7 */
static struct { bool valid; size_t allocated, reserved; } g_mem_last[MEM_DEVICES];

/* One device's counters into th when they changed since the last ones written (g_mem_lock). */
static void mem_sample(prof_thread *th, uint64_t now, dg_device d) {
    int slot = d.type == DG_CPU ? 0 : 1 + d.index;
    if (slot < 0 || slot >= MEM_DEVICES) return;
    dg_memory_stats st;
    memset(&st, 0, sizeof st);
    if (d.type == DG_CPU) dg_large_stats(&st);
    else {   /* the profiler never changes the caller's error state */
        dg_error_saved saved;
        dg_error_save(&saved);
        int rc = dg_memory_stats_get(d, &st);
        dg_error_restore(&saved);
        if (rc) return;
    }
    if (g_mem_last[slot].valid && g_mem_last[slot].allocated == st.allocated && g_mem_last[slot].reserved == st.reserved) return;
    prof_ev *e = ev_reserve(th, 0, NULL);
    if (!e) return;
    g_mem_last[slot].valid = true;
    g_mem_last[slot].allocated = st.allocated;
    g_mem_last[slot].reserved = st.reserved;
    e->kind = EV_COUNTER;
    e->cat = DG_PROFILER_NUM_CATEGORIES;   /* "memory" */
    e->t0 = now;
    e->dur = 0;
    e->a = (int64_t)st.allocated;
    e->b = (int64_t)st.reserved;
    e->flags = 0;
    e->n_shapes = e->n_in = 0;
    e->dtype = e->dev_type = -1;
    if (d.type == DG_CPU) snprintf(e->name, NAME_LEN, "memory cpu");
    else snprintf(e->name, NAME_LEN, "memory gpu:%d", d.index);
    ev_publish(th);
}

/* At an event's end: a sample when one is due (the CPU, and dev when it is a GPU). */
static void mem_maybe(prof_thread *th, uint64_t now, const dg_device *dev, bool force) {
    if (!g_profile_memory) return;
    if (!force && now < __atomic_load_n(&g_mem_next, __ATOMIC_RELAXED)) return;
    if (force) pthread_mutex_lock(&g_mem_lock);
    else if (pthread_mutex_trylock(&g_mem_lock) != 0) return;   /* another thread is sampling */
    if (force || now >= __atomic_load_n(&g_mem_next, __ATOMIC_RELAXED)) {
        __atomic_store_n(&g_mem_next, now + g_mem_interval_ns, __ATOMIC_RELAXED);
        mem_sample(th, now, dg_cpu());
        if (dev && dev->type != DG_CPU) mem_sample(th, now, *dev);
    }
    pthread_mutex_unlock(&g_mem_lock);
}

/* ---- recording ---- */
uint64_t dg_prof_op_begin(const dg_tensor *const *in, int n_in) {
    if (!dg_profiling()) return 0;
    const dg_tensor *t = NULL;
    for (int i = 0; !t && in && i < n_in; i++) t = in[i];
    if (t && t->storage->device.type != DG_CPU && dev_entries()) {
        prof_thread *th = thread_buf();
        if (th && th->ddepth < STACK_MAX) {
            uint64_t t0 = dg_prof_now();
            void *ev = dev_mark(t->storage->backend);
            if (ev) th->dstack[th->ddepth++] = (prof_dframe){ t0, ev, t->storage->backend };
            return t0;
        }
    }
    return dg_prof_now();
}

/* The op begun at t0 has ended: when dg_prof_op_begin recorded its start on a GPU, an event at
 * its end and both kept until stop resolves them into a "kernel" event on the GPU's row. */
static void dev_op_end(prof_thread *th, uint64_t t0, const char *name, int phase) {
    dev_frames_drop(th, t0);
    if (th->ddepth == 0 || th->dstack[th->ddepth - 1].t0 != t0) return;
    prof_dframe f = th->dstack[--th->ddepth];
    void *end = dev_mark(f.be);
    prof_ev *e = end ? ev_reserve(th, 0, NULL) : NULL;
    if (!e) { dev_release(f.ev); dev_release(end); return; }
    e->kind = EV_DEVICE;
    e->cat = DG_PROFILER_KERNEL;
    e->t0 = t0;
    e->dur = 0;
    e->a = (int64_t)(intptr_t)f.ev;
    e->b = (int64_t)(intptr_t)end;
    copy_name(e->name, name, phase == DG_PROF_BACKWARD ? "_backward" : NULL);
    e->flags = 0;
    e->n_shapes = e->n_in = 0;
    e->dtype = -1;
    e->dev_type = (int8_t)f.be->type;
    e->dev_index = (uint8_t)f.be->index;
    ev_publish(th);
}

void dg_prof_op(const char *name, int phase, uint64_t t0, const dg_tensor *const *in, int n_in, const dg_tensor *out) {
    if (!t0 || !dg_profiling()) return;
    uint64_t t1 = dg_prof_now();
    prof_thread *th = thread_buf();
    if (!th) return;
    int kept = n_in < 0 ? 0 : n_in > MAX_IN ? MAX_IN : n_in, ndims = 0;
    bool shapes = g_record_shapes;
    if (shapes) {
        for (int i = 0; i < kept; i++) if (in && in[i]) ndims += in[i]->ndim;
        if (out) ndims += out->ndim;
    }
    int64_t *dims = NULL;
    prof_ev *e = ev_reserve(th, ndims, &dims);
    const dg_tensor *dev_of = out;
    for (int i = 0; !dev_of && in && i < kept; i++) dev_of = in[i];
    dg_device dev = dev_of ? dev_of->storage->device : dg_cpu();
    if (e) {
        e->kind = EV_SPAN;
        e->cat = phase == DG_PROF_BACKWARD ? DG_PROFILER_OP_BACKWARD : DG_PROFILER_OP;
        e->t0 = t0;
        e->dur = t1 > t0 ? t1 - t0 : 0;
        e->a = e->b = -1;
        copy_name(e->name, name, phase == DG_PROF_BACKWARD ? "_backward" : NULL);
        e->flags = (uint8_t)((out ? F_OUT : 0) | (shapes ? F_SHAPES : 0));
        e->n_in = (uint8_t)(n_in < 0 ? 0 : n_in > 255 ? 255 : n_in);
        e->n_shapes = 0;
        e->dtype = dev_of ? (int8_t)dev_of->dtype : -1;
        e->dev_type = dev_of ? (int8_t)dev.type : -1;
        e->dev_index = (uint8_t)dev.index;
        if (shapes) {
            for (int i = 0; i < kept; i++) {
                const dg_tensor *t = in ? in[i] : NULL;
                e->ndim[e->n_shapes++] = t ? (int8_t)t->ndim : -1;
                if (t) { memcpy(dims, t->shape, sizeof *dims * (size_t)t->ndim); dims += t->ndim; }
            }
            if (out) {
                e->ndim[e->n_shapes++] = (int8_t)out->ndim;
                memcpy(dims, out->shape, sizeof *dims * (size_t)out->ndim);
            }
        }
        ev_publish(th);
    }
    if (th->ddepth) dev_op_end(th, t0, name, phase);
    mem_maybe(th, t1, dev_of ? &dev : NULL, false);
}

static int track_id_locked(const char *track) {
    int k = 0;
    while (k < g_ntracks && strncmp(g_tracks[k], track, NAME_LEN - 1) != 0) k++;
    if (k == g_ntracks && k < MAX_TRACKS) snprintf(g_tracks[g_ntracks++], NAME_LEN, "%s", track);
    return k < MAX_TRACKS ? k : -1;
}
static int track_id(const char *track) {
    pthread_mutex_lock(&g_lock);
    int k = track_id_locked(track);
    pthread_mutex_unlock(&g_lock);
    return k;
}

static void span_record(int track, uint64_t t0, dg_profiler_category cat, const char *name, int64_t bytes, int64_t index) {
    uint64_t t1 = dg_prof_now();
    prof_thread *th = thread_buf();
    if (!th) return;
    prof_ev *e = ev_reserve(th, 0, NULL);
    if (e) {
        e->kind = EV_SPAN;
        e->cat = (uint8_t)((unsigned)cat < DG_PROFILER_NUM_CATEGORIES ? cat : DG_PROFILER_USER);
        e->t0 = t0;
        e->dur = t1 > t0 ? t1 - t0 : 0;
        e->a = bytes;
        e->b = index;
        copy_name(e->name, name, NULL);
        e->flags = (uint8_t)((bytes >= 0 ? F_BYTES : 0) | (index >= 0 ? F_INDEX : 0) | (track >= 0 ? F_TRACK : 0));
        e->track = (uint16_t)(track >= 0 ? track : 0);
        e->n_shapes = e->n_in = 0;
        e->dtype = e->dev_type = -1;
        ev_publish(th);
    }
    mem_maybe(th, t1, NULL, false);
}

uint64_t dg_profiler_span_begin(void) { return dg_profiling() ? dg_prof_now() : 0; }

void dg_profiler_span_end(uint64_t token, dg_profiler_category category, const char *name, int64_t bytes, int64_t index) {
    if (!token || !dg_profiling()) return;
    span_record(-1, token, category, name, bytes, index);
}

void dg_profiler_span_end_on(const char *track, uint64_t token, dg_profiler_category category, const char *name,
                             int64_t bytes, int64_t index) {
    if (!token || !dg_profiling()) return;
    int k = track_id(track ? track : "track");
    if (k < 0) { __atomic_fetch_add(&g_dropped, 1, __ATOMIC_RELAXED); return; }
    span_record(k, token, category, name, bytes, index);
}

void dg_profiler_range_push(dg_profiler_category category, const char *name) {
    if (!dg_profiling()) return;
    prof_thread *th = thread_buf();
    if (!th) return;
    if (th->depth == STACK_MAX || th->overflow) { th->overflow++; return; }
    prof_frame *f = &th->stack[th->depth++];
    f->cat = (uint8_t)((unsigned)category < DG_PROFILER_NUM_CATEGORIES ? category : DG_PROFILER_USER);
    copy_name(f->name, name, NULL);
    f->t0 = dg_prof_now();
}

void dg_profiler_range_pop(void) {
    if (!dg_profiling()) return;
    prof_thread *th = thread_buf();
    if (!th) return;
    if (th->overflow) { th->overflow--; return; }
    if (th->depth == 0) return;   /* pushed before this session started */
    prof_frame *f = &th->stack[--th->depth];
    span_record(-1, f->t0, (dg_profiler_category)f->cat, f->name, -1, -1);
}

void dg_profiler_thread_name(const char *name) {
    snprintf(t_name, sizeof t_name, "%s", name ? name : "");
    prof_thread *th = t_th;
    if (th && name) {
        pthread_mutex_lock(&g_lock);
        snprintf(th->name, sizeof th->name, "%s", name);
        pthread_mutex_unlock(&g_lock);
    }
}

/* ---- sessions ---- */
dg_profiler_params dg_profiler_default_params(void) {
    return (dg_profiler_params){ .params_tag = DG_PARAMS_TAG, .trace_path = NULL, .print_table = false, .table_rows = 20,
                                 .record_shapes = true, .profile_memory = true, .memory_interval_us = 100,
                                 .max_events = 4000000 };
}

static void at_exit(void) {
    if (dg_profiler_enabled()) dg_profiler_stop();
}

static void stats_invalidate(void);

static int start_locked(dg_profiler_params p, bool from_env) {
    if (dg_profiling()) {
        DG_ERR(DG_ESTATE, "profiler_start: a session is already recording (started by %s); dg_profiler_stop it first",
               g_env_session ? "DG_PROFILE" : "dg_profiler_start");
        return DG_ESTATE;
    }
    /* the previous session's buffers: those of threads that have exited go now, the others are
     * emptied by their threads at their next event */
    for (prof_thread **pp = &g_threads; *pp;) {
        prof_thread *th = *pp;
        if (__atomic_load_n(&th->dead, __ATOMIC_ACQUIRE)) {
            *pp = th->next_all;
            for (prof_chunk *c = th->head, *nx; c; c = nx) { nx = c->next; free(c); }
            free(th);
        } else {
            pp = &th->next_all;
        }
    }
    stats_invalidate();
    g_params = p;
    snprintf(g_trace_path, sizeof g_trace_path, "%s", p.trace_path ? p.trace_path : "");
    g_params.trace_path = p.trace_path ? g_trace_path : NULL;
    g_env_session = from_env;
    g_record_shapes = p.record_shapes;
    g_profile_memory = p.profile_memory;
    g_mem_interval_ns = (uint64_t)(p.memory_interval_us * 1000.0);
    g_max_events = p.max_events;
    g_ntracks = 0;
    __atomic_store_n(&g_nevents, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_dropped, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_mem_lock);
    memset(g_mem_last, 0, sizeof g_mem_last);
    __atomic_store_n(&g_mem_next, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g_mem_lock);
    static bool registered;
    if (!registered) registered = atexit(at_exit) == 0;
    g_t_start = dg_prof_now();
    g_t_stop = 0;
    g_started = true;
    __atomic_add_fetch(&g_gen, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&dg_prof_active, 1, __ATOMIC_RELEASE);
    return 0;
}

int dg_profiler_start(dg_profiler_params p) {
    DG_CHECK_PARAMS_INT("profiler_start", p, dg_profiler_default_params);
    DG_CHECK_INT(p.table_rows >= 0, "profiler_start: table_rows must be >= 0 (0: every row), got %d", p.table_rows);
    DG_CHECK_INT(p.memory_interval_us >= 0 && isfinite(p.memory_interval_us),
                 "profiler_start: memory_interval_us must be a finite number >= 0, got %g", p.memory_interval_us);
    DG_CHECK_INT(p.max_events >= 1, "profiler_start: max_events must be >= 1, got %lld", (long long)p.max_events);
    DG_CHECK_INT(!p.trace_path || strlen(p.trace_path) < sizeof g_trace_path - 32, "profiler_start: trace_path is longer than %zu bytes",
                 sizeof g_trace_path - 32);
    pthread_mutex_lock(&g_lock);
    int rc = start_locked(p, false);
    pthread_mutex_unlock(&g_lock);
    if (!rc) {   /* the counters' first values */
        prof_thread *th = thread_buf();
        if (th) mem_maybe(th, dg_prof_now(), NULL, true);
    }
    return rc;
}

bool dg_profiler_enabled(void) { return dg_profiling(); }

static int export_locked(const char *path, char *written, size_t wlen);
static int table_locked(FILE *f, int rows);

/* At stop (g_lock held): each GPU op's two events become a "kernel" span on its GPU's row. Device
 * times map to the host clock through an event recorded now and waited for: an event's time is
 * the host time after that wait less the elapsed time from the event to it, a monotonic map, so
 * spans that nest on the device nest on the row. Events that cannot be read (a runtime torn down
 * at exit) are dropped; every event goes back to the module. */
static void dev_resolve_locked(void) {
    if (!__atomic_load_n(&g_dev_release, __ATOMIC_ACQUIRE)) return;
    uint64_t gen = __atomic_load_n(&g_gen, __ATOMIC_ACQUIRE);
    enum { NDEV = 16 };
    void *now[NDEV] = { 0 };
    uint64_t host[NDEV] = { 0 };
    bool failed[NDEV] = { 0 };
    int track[NDEV];
    for (int d = 0; d < NDEV; d++) track[d] = -1;
    dg_error_saved saved;
    dg_error_save(&saved);
    for (prof_thread *th = g_threads; th; th = th->next_all) {
        if (__atomic_load_n(&th->gen, __ATOMIC_ACQUIRE) != gen) continue;
        for (prof_chunk *c = th->head; c; c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE)) {
            uint32_t n = __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
            for (uint32_t i = 0; i < n; i++) {
                prof_ev *e = &c->ev[i];
                if (e->kind != EV_DEVICE) continue;
                void *a = (void *)(intptr_t)e->a, *b = (void *)(intptr_t)e->b;
                int d = e->dev_index;
                e->kind = EV_DEAD;
                if (d < NDEV && !now[d] && !failed[d]) {
                    const dg_backend *be = dg_backend_for((dg_device){ DG_CUDA, d });
                    float ms;
                    now[d] = be ? g_dev_mark(be) : NULL;
                    failed[d] = !now[d] || g_dev_elapsed(a, now[d], &ms) != 0;
                    host[d] = dg_prof_now();
                    if (!failed[d]) {
                        char name[NAME_LEN];
                        snprintf(name, sizeof name, "gpu:%d stream (device time)", d);
                        track[d] = track_id_locked(name);
                    }
                }
                float to_a, to_b;
                if (d < NDEV && !failed[d] && track[d] >= 0 && g_dev_elapsed(a, now[d], &to_a) == 0 &&
                    g_dev_elapsed(b, now[d], &to_b) == 0) {
                    uint64_t ta = host[d] - (uint64_t)((double)to_a * 1e6), tb = host[d] - (uint64_t)((double)to_b * 1e6);
                    e->kind = EV_SPAN;
                    e->t0 = ta;
                    e->dur = tb > ta ? tb - ta : 0;
                    e->a = e->b = -1;
                    e->flags = F_TRACK;
                    e->track = (uint16_t)track[d];
                }
                g_dev_release(a);
                g_dev_release(b);
            }
        }
    }
    for (int d = 0; d < NDEV; d++) dev_release(now[d]);
    dg_error_restore(&saved);
}

int dg_profiler_stop(void) {
    if (dg_profiling()) {   /* the counters' last values */
        prof_thread *th = thread_buf();
        if (th) mem_maybe(th, dg_prof_now(), NULL, true);
    }
    pthread_mutex_lock(&g_lock);
    if (!dg_profiling()) {
        pthread_mutex_unlock(&g_lock);
        DG_ERR(DG_ESTATE, "profiler_stop: no session is recording");
        return DG_ESTATE;
    }
    __atomic_store_n(&dg_prof_active, 0, __ATOMIC_RELEASE);
    g_t_stop = dg_prof_now();
    dev_resolve_locked();
    int rc = 0;
    char written[1100] = "";
    if (g_params.trace_path) rc = export_locked(g_params.trace_path, written, sizeof written);
    if (g_params.print_table) {
        dg_error_saved saved;   /* the table is a report: a failed write above keeps its message */
        dg_error_save(&saved);
        table_locked(stderr, g_params.table_rows);
        dg_error_restore(&saved);
        if (written[0]) fprintf(stderr, "Trace: %s (open it in ui.perfetto.dev or chrome://tracing)\n", written);
        else if (rc) fprintf(stderr, "dygraph: profiler: %s\n", dg_last_error());
    }
    g_env_session = false;
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void dg_prof_shutdown(void) {
    if (dg_profiling()) dg_profiler_stop();
}

void dg_prof_env_start(void) {
    static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&once);
    if (!__atomic_load_n(&dg_prof_env_done, __ATOMIC_ACQUIRE)) {
        const char *path = getenv("DG_PROFILE");
        if (path && *path) {
            dg_profiler_params p = dg_profiler_default_params();
            p.trace_path = path;
            p.print_table = true;
            pthread_mutex_lock(&g_lock);
            int rc = strlen(path) < sizeof g_trace_path - 32 ? start_locked(p, true) : DG_EINVAL;
            pthread_mutex_unlock(&g_lock);
            if (rc == DG_EINVAL) fprintf(stderr, "dygraph: DG_PROFILE is longer than %zu bytes; not profiling\n", sizeof g_trace_path - 32);
            else if (rc) dg_clear_error();   /* a session the program started is recording already */
        }
        __atomic_store_n(&dg_prof_env_done, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&once);
}

/* ---- reading a session: every span, per row ---- */
typedef struct flat {
    const prof_ev *e;
    const int64_t *dims;
    int row;             /* index into the rows (threads, then tracks) */
    uint64_t child;      /* time of the events nested in it */
} flat;
typedef struct rows_t {
    flat *ev;
    int64_t n;
    int nthreads;
    const prof_thread **threads;
    uint64_t counters;   /* counter events (written as such, not in the table) */
} rows_t;

static int cmp_row_time(const void *a_, const void *b_) {
    const flat *a = a_, *b = b_;
    if (a->row != b->row) return a->row < b->row ? -1 : 1;
    if (a->e->t0 != b->e->t0) return a->e->t0 < b->e->t0 ? -1 : 1;
    if (a->e->dur != b->e->dur) return a->e->dur > b->e->dur ? -1 : 1;
    return a->e < b->e ? -1 : a->e > b->e;
}

/* Every event of the current session (g_lock held), sorted by row and start, with the time of
 * the events nested in each. Counters are included (kind EV_COUNTER) but nest nothing. */
static int collect(rows_t *r) {
    memset(r, 0, sizeof *r);
    uint64_t gen = __atomic_load_n(&g_gen, __ATOMIC_ACQUIRE);
    int64_t cap = 0;
    for (prof_thread *th = g_threads; th; th = th->next_all) {
        if (__atomic_load_n(&th->gen, __ATOMIC_ACQUIRE) != gen) continue;
        r->nthreads++;
        for (prof_chunk *c = th->head; c; c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE)) cap += __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
    }
    r->threads = calloc((size_t)(r->nthreads ? r->nthreads : 1), sizeof *r->threads);
    r->ev = malloc(sizeof *r->ev * (size_t)(cap ? cap : 1));
    if (!r->threads || !r->ev) {
        free(r->threads);
        free(r->ev);
        DG_ERR(DG_ENOMEM, "profiler: out of memory reading %lld events", (long long)cap);
        return DG_ENOMEM;
    }
    int k = 0;
    for (prof_thread *th = g_threads; th; th = th->next_all) {
        if (__atomic_load_n(&th->gen, __ATOMIC_ACQUIRE) != gen) continue;
        r->threads[k] = th;
        for (prof_chunk *c = th->head; c && r->n < cap; c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE)) {
            uint32_t n = __atomic_load_n(&c->n, __ATOMIC_ACQUIRE);
            for (uint32_t i = 0; i < n && r->n < cap; i++) {
                const prof_ev *e = &c->ev[i];
                if (e->kind != EV_SPAN && e->kind != EV_COUNTER) continue;   /* a GPU op's events unresolved or unreadable */
                flat *f = &r->ev[r->n++];
                f->e = e;
                f->dims = c->dims + e->dims_off;
                f->row = e->kind == EV_SPAN && (e->flags & F_TRACK) ? r->nthreads + e->track : k;
                f->child = 0;
                if (e->kind == EV_COUNTER) r->counters++;
            }
        }
        k++;
    }
    qsort(r->ev, (size_t)r->n, sizeof *r->ev, cmp_row_time);
    /* nesting: a stack of the open events of the row */
    int64_t *stack = malloc(sizeof *stack * (size_t)(r->n ? r->n : 1));
    if (!stack) {
        free(r->threads);
        free(r->ev);
        DG_ERR(DG_ENOMEM, "profiler: out of memory reading %lld events", (long long)r->n);
        return DG_ENOMEM;
    }
    int64_t depth = 0;
    int row = -1;
    for (int64_t i = 0; i < r->n; i++) {
        flat *f = &r->ev[i];
        if (f->e->kind != EV_SPAN) continue;
        if (f->row != row) { depth = 0; row = f->row; }
        uint64_t t0 = f->e->t0, t1 = t0 + f->e->dur;
        while (depth > 0) {
            const prof_ev *p = r->ev[stack[depth - 1]].e;
            if (t0 >= p->t0 && t1 <= p->t0 + p->dur) break;
            depth--;
        }
        if (depth > 0) r->ev[stack[depth - 1]].child += f->e->dur;
        stack[depth++] = i;
    }
    free(stack);
    return 0;
}
static void rows_free(rows_t *r) {
    free(r->ev);
    free(r->threads);
}

/* ---- the table ---- */
static const char *const g_cat_names[DG_PROFILER_NUM_CATEGORIES + 1] = {
    "op", "op_backward", "autograd", "optimizer", "dataloader", "collective", "user", "kernel", "memory" };

static dg_profiler_stat *g_stats;   /* the last stopped session's rows (g_lock), NULL: not made yet */
static int g_nstats;
static void stats_invalidate(void) {
    free(g_stats);
    g_stats = NULL;
    g_nstats = 0;
}

static int cmp_key(const void *a_, const void *b_) {
    const flat *a = a_, *b = b_;
    if (a->e->cat != b->e->cat) return a->e->cat < b->e->cat ? -1 : 1;
    return strcmp(a->e->name, b->e->name);
}
static int cmp_total(const void *a_, const void *b_) {
    const dg_profiler_stat *a = a_, *b = b_;
    if (a->total_us != b->total_us) return a->total_us > b->total_us ? -1 : 1;
    int c = strcmp(a->name, b->name);
    return c ? c : (a->category > b->category) - (a->category < b->category);
}

static double wall_ns(void) {
    uint64_t end = g_t_stop ? g_t_stop : dg_prof_now();
    return end > g_t_start ? (double)(end - g_t_start) : 1.0;
}

/* The rows (g_lock held): from the cache when the session has stopped; *out is the caller's
 * to free when *owned. */
static int stats_locked(dg_profiler_stat **out, int *n, bool *owned) {
    *owned = false;
    if (g_stats && g_t_stop) { *out = g_stats; *n = g_nstats; return 0; }
    rows_t r;
    int rc = collect(&r);
    if (rc) return rc;
    int64_t m = 0;
    for (int64_t i = 0; i < r.n; i++)
        if (r.ev[i].e->kind == EV_SPAN) r.ev[m++] = r.ev[i];
    qsort(r.ev, (size_t)m, sizeof *r.ev, cmp_key);
    dg_profiler_stat *s = calloc((size_t)(m ? m : 1), sizeof *s);
    if (!s) { rows_free(&r); DG_ERR(DG_ENOMEM, "profiler: out of memory making the table"); return DG_ENOMEM; }
    int k = -1;
    double wall = wall_ns();
    for (int64_t i = 0; i < m; i++) {
        const flat *f = &r.ev[i];
        if (k < 0 || cmp_key(f, &r.ev[i - 1]) != 0) {
            k++;
            snprintf(s[k].name, sizeof s[k].name, "%s", f->e->name);
            s[k].category = (dg_profiler_category)f->e->cat;
        }
        s[k].calls++;
        s[k].total_us += (double)f->e->dur / 1000.0;
        s[k].self_us += (double)(f->e->dur > f->child ? f->e->dur - f->child : 0) / 1000.0;
    }
    int ns = k + 1;
    for (int i = 0; i < ns; i++) s[i].percent = 100.0 * s[i].total_us * 1000.0 / wall;
    qsort(s, (size_t)ns, sizeof *s, cmp_total);
    rows_free(&r);
    if (g_t_stop) {   /* a stopped session does not change: keep the rows */
        stats_invalidate();
        g_stats = s;
        g_nstats = ns;
    } else {
        *owned = true;
    }
    *out = s;
    *n = ns;
    return 0;
}

int dg_profiler_key_averages(dg_profiler_stat *out, int max) {
    DG_CHECK_INT(max >= 0 && (out || max == 0), "profiler_key_averages: out is NULL with max %d", max);
    pthread_mutex_lock(&g_lock);
    if (!g_started) {
        pthread_mutex_unlock(&g_lock);
        DG_ERR(DG_ESTATE, "profiler_key_averages: no profiler session was started (dg_profiler_start)");
        return DG_ESTATE;
    }
    dg_profiler_stat *s;
    int n;
    bool owned;
    int rc = stats_locked(&s, &n, &owned);
    if (!rc) {
        if (max > 0 && n > 0) memcpy(out, s, sizeof *s * (size_t)(n < max ? n : max));
        if (owned) free(s);
    }
    pthread_mutex_unlock(&g_lock);
    return rc ? rc : n;
}

static void fmt_ms(char *buf, size_t len, double us) {
    if (us >= 1e6) snprintf(buf, len, "%.3f s", us / 1e6);
    else if (us >= 1e3) snprintf(buf, len, "%.3f ms", us / 1e3);
    else snprintf(buf, len, "%.3f us", us);
}

static int table_locked(FILE *f, int rows) {
    dg_profiler_stat *s;
    int n;
    bool owned;
    int rc = stats_locked(&s, &n, &owned);
    if (rc) return rc;
    double wall_us = wall_ns() / 1000.0, self_sum = 0;
    for (int i = 0; i < n; i++) self_sum += s[i].self_us;
    int show = rows > 0 && rows < n ? rows : n;
    static const char rule[] = "------------------------------------------------------------------------------------------------------------------";
    fprintf(f, "%-34s  %-11s  %8s  %12s  %7s  %12s  %7s  %12s\n", "Name", "Category", "Calls", "Self", "Self %", "Total",
            "Total %", "Avg");
    fprintf(f, "%.*s\n", 34 + 2 + 11 + 2 + 8 + 2 + 12 + 2 + 7 + 2 + 12 + 2 + 7 + 2 + 12, rule);
    for (int i = 0; i < show; i++) {
        char self[24], total[24], avg[24];
        fmt_ms(self, sizeof self, s[i].self_us);
        fmt_ms(total, sizeof total, s[i].total_us);
        fmt_ms(avg, sizeof avg, s[i].calls ? s[i].total_us / (double)s[i].calls : 0);
        fprintf(f, "%-34.34s  %-11s  %8lld  %12s  %6.2f%%  %12s  %6.2f%%  %12s\n", s[i].name, g_cat_names[s[i].category],
                (long long)s[i].calls, self, 100.0 * s[i].self_us / wall_us, total, s[i].percent, avg);
    }
    fprintf(f, "%.*s\n", 34 + 2 + 11 + 2 + 8 + 2 + 12 + 2 + 7 + 2 + 12 + 2 + 7 + 2 + 12, rule);
    char wall[24], selfs[24];
    fmt_ms(wall, sizeof wall, wall_us);
    fmt_ms(selfs, sizeof selfs, self_sum);
    int64_t kept = __atomic_load_n(&g_nevents, __ATOMIC_RELAXED), dropped = __atomic_load_n(&g_dropped, __ATOMIC_RELAXED);
    if (kept > g_max_events) kept = g_max_events;
    fprintf(f, "Profiled wall time: %s; self time of all rows: %s; %d of %d rows shown; %lld events%s", wall, selfs, show, n,
            (long long)kept, dropped ? "" : "\n");
    if (dropped) fprintf(f, ", %lld dropped (max_events %lld)\n", (long long)dropped, (long long)g_max_events);
    if (owned) free(s);
    return 0;
}

int dg_profiler_print_table(FILE *f, int rows) {
    DG_CHECK_INT(f, "profiler_print_table: f is NULL");
    DG_CHECK_INT(rows >= 0, "profiler_print_table: rows must be >= 0 (0: every row), got %d", rows);
    pthread_mutex_lock(&g_lock);
    int rc = 0;
    if (!g_started) {
        DG_ERR(DG_ESTATE, "profiler_print_table: no profiler session was started (dg_profiler_start)");
        rc = DG_ESTATE;
    } else {
        rc = table_locked(f, rows);
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

/* ---- the Chrome trace ---- */
/* This process's rank and world size in a job (the launcher's or mpirun's variables), else 0, 1. */
static void job_rank(int *rank, int *world) {
    const char *id = getenv("PADDLE_TRAINER_ID"), *num = getenv("PADDLE_TRAINERS_NUM");
    if (!id || !*id) { id = getenv("OMPI_COMM_WORLD_RANK"); num = getenv("OMPI_COMM_WORLD_SIZE"); }
    *rank = id && *id ? atoi(id) : 0;
    *world = num && *num ? atoi(num) : 1;
    if (*rank < 0) *rank = 0;
    if (*world < 1) *world = 1;
}

/* path with "%r" replaced by the rank; in a job of several ranks a path without it gets
 * ".rank<N>" before its extension. */
static void expand_path(const char *path, char *out, size_t len) {
    int rank, world;
    job_rank(&rank, &world);
    const char *r = strstr(path, "%r");
    if (r) {
        snprintf(out, len, "%.*s%d%s", (int)(r - path), path, rank, r + 2);
        return;
    }
    if (world <= 1) { snprintf(out, len, "%s", path); return; }
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (dot && (!slash || dot > slash + 1)) snprintf(out, len, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
    else snprintf(out, len, "%s.rank%d", path, rank);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}
/* microseconds with the nanoseconds exact: "123.456" */
static void json_us(FILE *f, uint64_t ns) { fprintf(f, "%llu.%03llu", (unsigned long long)(ns / 1000), (unsigned long long)(ns % 1000)); }

static void json_shape(FILE *f, int ndim, const int64_t *d) {
    if (ndim < 0) { fputs("None", f); return; }
    fputc('[', f);
    for (int i = 0; i < ndim; i++) fprintf(f, "%s%lld", i ? ", " : "", (long long)d[i]);
    fputc(']', f);
}

static void json_args(FILE *f, const flat *fl) {
    const prof_ev *e = fl->e;
    bool bw = e->cat == DG_PROFILER_OP_BACKWARD;
    fputs(",\"args\":{", f);
    bool first = true;
    if (e->cat == DG_PROFILER_OP || bw) {
        if (e->flags & F_SHAPES) {
            int n_in_kept = e->n_shapes - ((e->flags & F_OUT) ? 1 : 0);
            const int64_t *d = fl->dims;
            fprintf(f, "\"%s\":\"", bw ? "grad_input_shapes" : "input_shapes");
            for (int i = 0; i < n_in_kept; i++) {
                if (i) fputs(", ", f);
                json_shape(f, e->ndim[i], d);
                if (e->ndim[i] > 0) d += e->ndim[i];
            }
            if (e->n_in > n_in_kept) fprintf(f, ", ...");
            fputc('"', f);
            if (e->flags & F_OUT) {
                fprintf(f, ",\"%s\":\"", bw ? "grad_output_shape" : "output_shape");
                json_shape(f, e->ndim[n_in_kept], d);
                fputc('"', f);
            }
            first = false;
        }
        if (e->dtype >= 0) {
            fprintf(f, "%s\"dtype\":\"%s\"", first ? "" : ",", dg_dtype_name((dg_dtype)e->dtype));
            char dn[32];
            fprintf(f, ",\"device\":\"%s\"", dg_device_name((dg_device){ (dg_device_type)e->dev_type, e->dev_index }, dn, sizeof dn));
            first = false;
        }
        fprintf(f, "%s\"inputs\":%d", first ? "" : ",", e->n_in);
        first = false;
        if (!(e->flags & F_OUT)) fputs(",\"failed\":true", f);
    }
    if (e->flags & F_BYTES) { fprintf(f, "%s\"bytes\":%lld", first ? "" : ",", (long long)e->a); first = false; }
    if (e->flags & F_INDEX) {
        const char *key = e->cat == DG_PROFILER_COLLECTIVE ? "bucket" : e->cat == DG_PROFILER_DATALOADER ? "batch" : "index";
        fprintf(f, "%s\"%s\":%lld", first ? "" : ",", key, (long long)e->b);
    }
    fputc('}', f);
}

static int export_locked(const char *path_in, char *written, size_t wlen) {
    if (!g_started) {
        DG_ERR(DG_ESTATE, "profiler_export_chrome_trace: no profiler session was started (dg_profiler_start)");
        return DG_ESTATE;
    }
    char path[1100];
    expand_path(path_in, path, sizeof path);
    rows_t r;
    int rc = collect(&r);
    if (rc) return rc;
    FILE *f = fopen(path, "w");
    if (!f) {
        int e = errno;
        rows_free(&r);
        DG_ERR(DG_EIO, "profiler: cannot write the trace '%s': %s", path, strerror(e));
        return DG_EIO;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    int rank, world;
    job_rank(&rank, &world);
    int pid = world > 1 ? rank : (int)getpid();
    char comm[64] = "";
    FILE *cf = fopen("/proc/self/comm", "r");
    if (cf) {
        if (fgets(comm, sizeof comm, cf)) comm[strcspn(comm, "\n")] = 0;
        fclose(cf);
    }
    char pname[160];
    if (world > 1) snprintf(pname, sizeof pname, "rank %d of %d (%s, pid %d)", rank, world, comm[0] ? comm : "dygraph", (int)getpid());
    else snprintf(pname, sizeof pname, "%s (pid %d)", comm[0] ? comm : "dygraph", pid);
    fputs("{\"traceEvents\":[\n", f);
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":", pid);
    json_str(f, pname);
    fputs("}}", f);
    fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", pid, rank);
    for (int k = 0; k < r.nthreads; k++) {
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, r.threads[k]->tid);
        json_str(f, r.threads[k]->name);
        fputs("}}", f);
        /* the main thread first, the others in the order they joined */
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid,
                r.threads[k]->tid, r.threads[k]->tid == (int)getpid() ? 0 : r.nthreads - k);
    }
    for (int k = 0; k < g_ntracks; k++) {
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, TRACK_TID_BASE + k);
        json_str(f, g_tracks[k]);
        fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", pid,
                TRACK_TID_BASE + k, 1000 + k);
    }
    for (int64_t i = 0; i < r.n; i++) {
        const flat *fl = &r.ev[i];
        const prof_ev *e = fl->e;
        int tid = fl->row < r.nthreads ? r.threads[fl->row]->tid : TRACK_TID_BASE + (fl->row - r.nthreads);
        if (e->kind == EV_COUNTER) {
            fprintf(f, ",\n{\"ph\":\"C\",\"name\":");
            json_str(f, e->name);
            fprintf(f, ",\"cat\":\"memory\",\"pid\":%d,\"tid\":%d,\"ts\":", pid, tid);
            json_us(f, e->t0);
            fprintf(f, ",\"args\":{\"allocated\":%lld,\"reserved\":%lld}}", (long long)e->a, (long long)e->b);
            continue;
        }
        fputs(",\n{\"ph\":\"X\",\"name\":", f);
        json_str(f, e->name);
        fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":", g_cat_names[e->cat], pid, tid);
        json_us(f, e->t0);
        fputs(",\"dur\":", f);
        json_us(f, e->dur);
        json_args(f, fl);
        fputc('}', f);
    }
    int64_t kept = __atomic_load_n(&g_nevents, __ATOMIC_RELAXED), dropped = __atomic_load_n(&g_dropped, __ATOMIC_RELAXED);
    if (kept > g_max_events) kept = g_max_events;
    fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"profiler\":\"dygraph ", f);
    fputs(dg_version(), f);
    fprintf(f, "\",\"rank\":%d,\"world_size\":%d,\"start_us\":", rank, world);
    json_us(f, g_t_start);
    fputs(",\"stop_us\":", f);
    json_us(f, g_t_stop ? g_t_stop : dg_prof_now());
    fprintf(f, ",\"events\":%lld,\"dropped_events\":%lld}}\n", (long long)kept, (long long)dropped);
    rows_free(&r);
    bool bad = ferror(f) != 0;
    int e = errno;
    if (fclose(f) != 0 || bad) {
        DG_ERR(DG_EIO, "profiler: writing the trace '%s' failed: %s", path, strerror(e ? e : EIO));
        return DG_EIO;
    }
    if (written) snprintf(written, wlen, "%s", path);
    return 0;
}

int dg_profiler_export_chrome_trace(const char *path) {
    DG_CHECK_INT(path && *path, "profiler_export_chrome_trace: path is NULL or empty");
    pthread_mutex_lock(&g_lock);
    int rc = export_locked(path, NULL, 0);
    pthread_mutex_unlock(&g_lock);
    return rc;
}
