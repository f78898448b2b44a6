/* eager/profiler.c — the profiler's recording half (dygraph/profiler.h): per-thread event
 * buffers, memory counters, GPU device time, sessions and DG_PROFILE. The table and the Chrome
 * trace-event writer are eager/profiler_report.c; what both read is eager/profiler_internal.h.
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
#include "profiler_internal.h"
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

pthread_mutex_t dg_prof_lock = PTHREAD_MUTEX_INITIALIZER;
prof_thread *dg_prof_threads;
uint64_t dg_prof_gen;                      /* session number (release / acquire) */
bool dg_prof_started;                      /* some session was started (its events may be read) */
static bool g_env_session;                  /* the running session came from DG_PROFILE */
static char g_trace_path[1024];             /* the running session's params.trace_path */
static dg_profiler_params g_params;
uint64_t dg_prof_t_start, dg_prof_t_stop;        /* dg_prof_t_stop 0: still recording */
int64_t dg_prof_nevents, dg_prof_dropped;        /* atomics */
char dg_prof_tracks[MAX_TRACKS][NAME_LEN]; /* track names (dg_prof_lock) */
int dg_prof_ntracks;
/* read on the hot path without the lock: written before the session's generation is published */
static bool g_record_shapes, g_profile_memory;
static uint64_t g_mem_interval_ns;
int64_t dg_prof_max_events;

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
        pthread_mutex_lock(&dg_prof_lock);
        th->next_all = dg_prof_threads;
        dg_prof_threads = th;
        pthread_mutex_unlock(&dg_prof_lock);
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
    uint64_t gen = __atomic_load_n(&dg_prof_gen, __ATOMIC_ACQUIRE);
    prof_thread *th = t_th;
    return th && th->gen == gen ? th : thread_attach(gen);
}

static void dev_frames_drop(prof_thread *th, uint64_t t0) {
    while (th->ddepth > 0 && th->dstack[th->ddepth - 1].t0 > t0) dev_release(th->dstack[--th->ddepth].ev);
}

/* A slot for one event with ndims dims in th's last chunk (a new chunk when it is full); NULL
 * when the session's event limit is reached (counted as dropped) or out of memory. */
static prof_ev *ev_reserve(prof_thread *th, int ndims, int64_t **dims) {
    if (__atomic_fetch_add(&dg_prof_nevents, 1, __ATOMIC_RELAXED) >= dg_prof_max_events) {
        __atomic_fetch_add(&dg_prof_dropped, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    prof_chunk *c = th->tail;
    uint32_t n = __atomic_load_n(&c->n, __ATOMIC_RELAXED);
    if (n == CHUNK_EV || c->ndims + (uint32_t)ndims > CHUNK_DIMS) {
        prof_chunk *nc = chunk_new();
        if (!nc) { __atomic_fetch_add(&dg_prof_dropped, 1, __ATOMIC_RELAXED); return NULL; }
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
    while (k < dg_prof_ntracks && strncmp(dg_prof_tracks[k], track, NAME_LEN - 1) != 0) k++;
    if (k == dg_prof_ntracks && k < MAX_TRACKS) snprintf(dg_prof_tracks[dg_prof_ntracks++], NAME_LEN, "%s", track);
    return k < MAX_TRACKS ? k : -1;
}
int track_id(const char *track) {
    pthread_mutex_lock(&dg_prof_lock);
    int k = track_id_locked(track);
    pthread_mutex_unlock(&dg_prof_lock);
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
    if (k < 0) { __atomic_fetch_add(&dg_prof_dropped, 1, __ATOMIC_RELAXED); return; }
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
        pthread_mutex_lock(&dg_prof_lock);
        snprintf(th->name, sizeof th->name, "%s", name);
        pthread_mutex_unlock(&dg_prof_lock);
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


static int start_locked(dg_profiler_params p, bool from_env) {
    if (dg_profiling()) {
        DG_ERR(DG_ESTATE, "profiler_start: a session is already recording (started by %s); dg_profiler_stop it first",
               g_env_session ? "DG_PROFILE" : "dg_profiler_start");
        return DG_ESTATE;
    }
    /* the previous session's buffers: those of threads that have exited go now, the others are
     * emptied by their threads at their next event */
    for (prof_thread **pp = &dg_prof_threads; *pp;) {
        prof_thread *th = *pp;
        if (__atomic_load_n(&th->dead, __ATOMIC_ACQUIRE)) {
            *pp = th->next_all;
            for (prof_chunk *c = th->head, *nx; c; c = nx) { nx = c->next; free(c); }
            free(th);
        } else {
            pp = &th->next_all;
        }
    }
    dg_prof_stats_invalidate();
    g_params = p;
    snprintf(g_trace_path, sizeof g_trace_path, "%s", p.trace_path ? p.trace_path : "");
    g_params.trace_path = p.trace_path ? g_trace_path : NULL;
    g_env_session = from_env;
    g_record_shapes = p.record_shapes;
    g_profile_memory = p.profile_memory;
    g_mem_interval_ns = (uint64_t)(p.memory_interval_us * 1000.0);
    dg_prof_max_events = p.max_events;
    dg_prof_ntracks = 0;
    __atomic_store_n(&dg_prof_nevents, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&dg_prof_dropped, 0, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_mem_lock);
    memset(g_mem_last, 0, sizeof g_mem_last);
    __atomic_store_n(&g_mem_next, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g_mem_lock);
    static bool registered;
    if (!registered) registered = atexit(at_exit) == 0;
    dg_prof_t_start = dg_prof_now();
    dg_prof_t_stop = 0;
    dg_prof_started = true;
    __atomic_add_fetch(&dg_prof_gen, 1, __ATOMIC_RELEASE);
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
    pthread_mutex_lock(&dg_prof_lock);
    int rc = start_locked(p, false);
    pthread_mutex_unlock(&dg_prof_lock);
    if (!rc) {   /* the counters' first values */
        prof_thread *th = thread_buf();
        if (th) mem_maybe(th, dg_prof_now(), NULL, true);
    }
    return rc;
}

bool dg_profiler_enabled(void) { return dg_profiling(); }


/* At stop (dg_prof_lock held): each GPU op's two events become a "kernel" span on its GPU's row. Device
 * times map to the host clock through an event recorded now and waited for: an event's time is
 * the host time after that wait less the elapsed time from the event to it, a monotonic map, so
 * spans that nest on the device nest on the row. Events that cannot be read (a runtime torn down
 * at exit) are dropped; every event goes back to the module. */
static void dev_resolve_locked(void) {
    if (!__atomic_load_n(&g_dev_release, __ATOMIC_ACQUIRE)) return;
    uint64_t gen = __atomic_load_n(&dg_prof_gen, __ATOMIC_ACQUIRE);
    enum { NDEV = 16 };
    void *now[NDEV] = { 0 };
    uint64_t host[NDEV] = { 0 };
    bool failed[NDEV] = { 0 };
    int track[NDEV];
    for (int d = 0; d < NDEV; d++) track[d] = -1;
    dg_error_saved saved;
    dg_error_save(&saved);
    for (prof_thread *th = dg_prof_threads; th; th = th->next_all) {
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
    pthread_mutex_lock(&dg_prof_lock);
    if (!dg_profiling()) {
        pthread_mutex_unlock(&dg_prof_lock);
        DG_ERR(DG_ESTATE, "profiler_stop: no session is recording");
        return DG_ESTATE;
    }
    __atomic_store_n(&dg_prof_active, 0, __ATOMIC_RELEASE);
    dg_prof_t_stop = dg_prof_now();
    dev_resolve_locked();
    int rc = 0;
    char written[1100] = "";
    if (g_params.trace_path) rc = dg_prof_export_locked(g_params.trace_path, written, sizeof written);
    if (g_params.print_table) {
        dg_error_saved saved;   /* the table is a report: a failed write above keeps its message */
        dg_error_save(&saved);
        dg_prof_table_locked(stderr, g_params.table_rows);
        dg_error_restore(&saved);
        if (written[0]) fprintf(stderr, "Trace: %s (open it in ui.perfetto.dev or chrome://tracing)\n", written);
        else if (rc) fprintf(stderr, "dygraph: profiler: %s\n", dg_last_error());
    }
    g_env_session = false;
    pthread_mutex_unlock(&dg_prof_lock);
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
            pthread_mutex_lock(&dg_prof_lock);
            int rc = strlen(path) < sizeof g_trace_path - 32 ? start_locked(p, true) : DG_EINVAL;
            pthread_mutex_unlock(&dg_prof_lock);
            if (rc == DG_EINVAL) fprintf(stderr, "dygraph: DG_PROFILE is longer than %zu bytes; not profiling\n", sizeof g_trace_path - 32);
            else if (rc) dg_clear_error();   /* a session the program started is recording already */
        }
        __atomic_store_n(&dg_prof_env_done, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&once);
}

