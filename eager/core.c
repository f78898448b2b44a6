/* eager/core.c — library lifetime (dg_init, dg_shutdown and the session they delimit), checked
 * mode, the current device, thread count and the one-line notice.
 *
 * Lifetime: dg_init is optional; without it the library starts on first use with its defaults.
 * dg_shutdown ends a session: it releases what the library holds (this thread's open scopes and
 * their tensors, each started backend's state through its `shutdown` entry, the checked-mode
 * quarantine, every thread's block caches, the large-block reservation) and resets the RNG,
 * device and math flags. Until dg_init is called again, making or using a tensor is a
 * DG_ESTATE error ("called after dg_shutdown; call dg_init first"). Tensors the program still
 * holds stay allocated and may still be freed, but they belong to the ended session: an op
 * handed one, before or after the next dg_init, fails naming it (their tensor's `session`
 * differs from dg_session). */
#include "backend.h"
#include <dygraph/module.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static dg_device g_device = { DG_CPU, 0 };
static bool g_allow_tf32 = false;
static bool g_cpu_bf16 = false;
uint32_t dg_session = 1;
bool dg_shut_down = false;

/* ---- checked mode ---- */
int dg_checked_mode = -1;
bool dg_checked(void) {
    if (dg_checked_mode < 0) {
        const char *e = getenv("DG_CHECKED");
        dg_checked_mode = e && atoi(e) > 0;
    }
    return dg_checked_mode > 0;
}
void dg_set_checked(bool on) { dg_checked_mode = on; }
bool dg_get_checked(void) { return dg_checked(); }

dg_device dg_cpu(void) { return (dg_device){ DG_CPU, 0 }; }
dg_device dg_current_device(void) { return g_device; }
dg_device dg_get_device(void) { return g_device; }

const char *dg_version(void) { return "0.1.0"; }

const char *dg_device_name(dg_device d, char *buf, size_t len) {
    if (d.type == DG_CPU) snprintf(buf, len, "cpu");
    else snprintf(buf, len, "gpu:%d", d.index);
    return buf;
}

int dg_set_device(const char *name) {
    DG_CHECK_INT(name, "set_device: name is NULL");
    dg_device d = { DG_CPU, 0 };
    if (strcmp(name, "cpu") == 0) {
        g_device = d;
        return 0;
    }
    if (strncmp(name, "gpu", 3) == 0 || strncmp(name, "cuda", 4) == 0) {
        const char *colon = strchr(name, ':');
        d.type = DG_CUDA;
        d.index = colon ? atoi(colon + 1) : 0;
        uint64_t errs = dg_error_count();
        if (!dg_backend_for(d)) {
            if (!dg_error_since(errs)) {
                DG_ERR(DG_EDEVICE, "set_device: '%s' requested but this build has no usable GPU backend", name);
                return DG_EDEVICE;
            }
            /* the backend said why (no driver, too few GPUs, ...): that, under this call's name,
             * with the backend's location */
            char msg[DG_ERROR_MSG_LEN];
            snprintf(msg, sizeof msg, "%s", dg_last_error());
            const char *file = __FILE__;
            int line = __LINE__;
            dg_error_split_location(msg, &file, &line);
            char dn[32];   /* the device asked for, spelled out when the name was short ("gpu") */
            dg_device_name(d, dn, sizeof dn);
            if (strcmp(dn, name) != 0) dg_set_error_at(DG_EDEVICE, file, line, "set_device('%s' = %s): %s", name, dn, msg);
            else dg_set_error_at(DG_EDEVICE, file, line, "set_device('%s'): %s", name, msg);
            return DG_EDEVICE;
        }
        g_device = d;
        return 0;
    }
    DG_ERR(DG_EINVAL, "set_device: unknown device '%s' (expected cpu, gpu or gpu:N)", name);
    return DG_EINVAL;
}

/* ---- threads ----
 * An explicit count (dg_set_num_threads, dg_init's num_threads, DG_NUM_THREADS, OMP_NUM_THREADS)
 * is used as given. Without one the count is automatic: every CPU this process may run on, less
 * the CPUs that other processes keep busy, measured every LOAD_PERIOD_NS from /proc/stat.
 *
 * Why: libgomp's idle workers spin (GOMP_SPINCOUNT, 300,000 pauses, milliseconds) before they
 * sleep, and oneDNN's kernels run on the same pool. When another process holds one of the cores,
 * a worker that shares it burns its time slices spinning between the many short parallel
 * regions of a training step, and every region then waits a scheduler slice for it: on a 2-CPU
 * machine the MNIST CNN ran 1.8x slower at two threads than at one beside one busy-loop process,
 * and 7-15x slower when other work shared the machine too (bench/RESULTS.md). The wait policy cannot be changed from here: libgomp reads OMP_WAIT_POLICY
 * and GOMP_SPINCOUNT once, in its own constructor, which runs before any constructor of ours or
 * of the program (a setenv there was measured to change nothing), and it offers no call to change
 * them later; omp_set_dynamic only follows the 15-minute load average, which counts our own
 * threads. Fewer threads is what can be done, so that is what the automatic count does.
 *
 * OpenMP's thread count is a per-thread setting, so dg_threads() also brings the calling
 * thread's setting in line (it runs for every CPU tensor an op makes): a program whose ops run on
 * several threads gets the count on each of them, and oneDNN's GEMM reads the same setting. */
#define LOAD_FIRST_NS 50000000LL    /* the first look comes soon: a busy machine costs one step */
#define LOAD_PERIOD_NS 250000000LL

static int g_explicit;                 /* > 0: the count asked for; 0: automatic */
static int g_auto;                     /* the automatic count now */
static int g_ncpu;                     /* CPUs this process may run on */
static pthread_once_t g_threads_once = PTHREAD_ONCE_INIT;
static _Thread_local int t_applied;    /* what this thread's OpenMP setting was last set to */
static _Thread_local unsigned t_calls;

static int clamp_threads(int n) {
    /* more threads than 4 per core only adds switching; libgomp dies making tens of thousands */
    int most = 4 * g_ncpu;
    return n < 1 ? 1 : n > most ? most : n;
}

static void threads_init(void) {
    g_ncpu = omp_get_num_procs();
    if (g_ncpu < 1) g_ncpu = 1;
    g_auto = g_ncpu;
    /* OMP_NUM_THREADS is the user's explicit choice; libgomp has already parsed it */
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && *e) g_explicit = clamp_threads(omp_get_max_threads());
}

int dg_threads_for_load(int ncpu, double others) {
    if (ncpu < 1) ncpu = 1;
    if (!(others > 0)) others = 0;   /* also NaN: tick rounding can make it slightly negative */
    /* 0.3: a thread only for a CPU that is at least 70% free; a worker on a shared CPU costs
     * more in waiting than its share of the work saves */
    double n = floor((double)ncpu - others + 0.3);
    return n < 1 ? 1 : n > ncpu ? ncpu : (int)n;
}

bool dg_proc_stat_busy(FILE *f, const cpu_set_t *mask, uint64_t *busy, int *ncpu) {
    char line[512];
    uint64_t sum = 0;
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "cpu", 3) != 0) break;   /* the per-CPU lines come first */
        if (line[3] < '0' || line[3] > '9') continue;   /* the "cpu " total */
        int cpu;
        unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
        int got = sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user, &nice, &sys, &idle,
                         &iowait, &irq, &softirq, &steal);
        if (got < 5) continue;
        if (mask && (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, mask))) continue;
        /* steal: time the hypervisor gave this virtual CPU to someone else, as good as busy */
        sum += user + nice + sys + irq + softirq + steal;
        n++;
    }
    *busy = sum;
    if (ncpu) *ncpu = n;
    return n > 0;
}

static int64_t ns_of(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Load measurement: the previous snapshot, and when the next is due (INT64_MAX: /proc/stat
 * cannot be read here, keep every CPU). */
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_load_due;
static struct { bool ok; uint64_t busy; int64_t self_ns, wall_ns; } g_prev;

static void load_sample(int64_t now) {
    cpu_set_t mask;
    bool have_mask = sched_getaffinity(0, sizeof mask, &mask) == 0;
    FILE *f = fopen("/proc/stat", "r");
    uint64_t busy = 0;
    bool ok = f && dg_proc_stat_busy(f, have_mask ? &mask : NULL, &busy, NULL);
    if (f) fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    if (!ok || hz <= 0) {
        __atomic_store_n(&g_load_due, INT64_MAX, __ATOMIC_RELAXED);
        return;
    }
    int64_t self = ns_of(CLOCK_PROCESS_CPUTIME_ID), wall = ns_of(CLOCK_MONOTONIC);
    bool first = !g_prev.ok;
    if (!first && wall > g_prev.wall_ns) {
        double secs = (double)(wall - g_prev.wall_ns) * 1e-9;
        /* our own threads, spinning ones included, are not load: what is left is other processes */
        double others = ((double)(busy - g_prev.busy) / (double)hz - (double)(self - g_prev.self_ns) * 1e-9) / secs;
        __atomic_store_n(&g_auto, dg_threads_for_load(g_ncpu, others), __ATOMIC_RELAXED);
    }
    g_prev.ok = true;
    g_prev.busy = busy;
    g_prev.self_ns = self;
    g_prev.wall_ns = wall;
    __atomic_store_n(&g_load_due, now + (first ? LOAD_FIRST_NS : LOAD_PERIOD_NS), __ATOMIC_RELAXED);
}

static int auto_threads(void) {
    /* the clock only every 8th call: tiny ops make thousands of tensors a second */
    if ((t_calls++ & 7) == 0) {
        int64_t now = ns_of(CLOCK_MONOTONIC_COARSE);
        if (now >= __atomic_load_n(&g_load_due, __ATOMIC_RELAXED) && pthread_mutex_trylock(&g_load_lock) == 0) {
            if (now >= __atomic_load_n(&g_load_due, __ATOMIC_RELAXED)) load_sample(now);
            pthread_mutex_unlock(&g_load_lock);
        }
    }
    return __atomic_load_n(&g_auto, __ATOMIC_RELAXED);
}

int dg_threads(void) {
    pthread_once(&g_threads_once, threads_init);
    int n = __atomic_load_n(&g_explicit, __ATOMIC_RELAXED);
    if (!n) n = auto_threads();
    if (n != t_applied) {
        omp_set_num_threads(n);
        t_applied = n;
    }
    return n;
}

void dg_set_num_threads(int n) {
    pthread_once(&g_threads_once, threads_init);
    if (n < 1) {   /* back to automatic: measure afresh, not over the time the count was fixed */
        pthread_mutex_lock(&g_load_lock);
        g_prev.ok = false;
        __atomic_store_n(&g_load_due, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&g_load_lock);
    }
    __atomic_store_n(&g_explicit, n < 1 ? 0 : clamp_threads(n), __ATOMIC_RELAXED);
    dg_threads();   /* the caller's own OpenMP setting follows at once */
}
int dg_get_num_threads(void) { return dg_threads(); }

/* The device as the program, $DG_DEVICE or the launcher's FLAGS_selected_gpus asks. */
static int init_device(const dg_init_params *d) {
    const char *dev = d->device;
    if (!dev) dev = getenv("DG_DEVICE");
    char buf[32];
    if (!dev && getenv("FLAGS_selected_gpus") && *getenv("FLAGS_selected_gpus")) {
        snprintf(buf, sizeof buf, "gpu:%d", atoi(getenv("FLAGS_selected_gpus")));
        dev = buf;
    }
    if (!dev) {
        /* a CUDA build on a machine without a GPU says once that it runs on the CPU. Only the
         * device nodes are looked at: starting the CUDA runtime just to ask would map ~150 MB
         * of libraries into a CPU-only process. */
        if (!d->quiet && dg_module_present("cuda") && access("/dev/nvidiactl", F_OK) != 0)
            fprintf(stderr, "dygraph: no NVIDIA GPU here (no /dev/nvidiactl): running on the CPU backend\n");
        return 0;
    }
    dg_error_saved before;
    dg_error_save(&before);
    int rc = dg_set_device(dev);
    if (rc && dev == buf) {
        /* FLAGS_selected_gpus comes from a launcher, not from the program: fall back to the
         * CPU with a one-line notice instead of failing (the notice is the whole report) */
        if (!d->quiet) fprintf(stderr, "dygraph: FLAGS_selected_gpus=%s but %s; running on the CPU backend\n",
                               getenv("FLAGS_selected_gpus"), dg_last_error());
        dg_error_restore(&before);
        return 0;
    }
    return rc;
}

dg_init_params dg_init_default_params(void) {
    return (dg_init_params){ .device = NULL, .num_threads = DG_FROM_ENV, .seed = DG_DEFAULT_SEED };
}

int dg_init(const dg_init_params *p) {
    dg_init_params d = p ? *p : dg_init_default_params();
    if (d.num_threads < 1 && d.num_threads != DG_FROM_ENV) {
        DG_ERR(DG_EINVAL, "init: num_threads must be >= 1 or DG_FROM_ENV, got %d (dg_init_default_params() has the defaults)",
               d.num_threads);
        return DG_EINVAL;
    }
    dg_shut_down = false;     /* a new session: dg_shutdown already moved dg_session on */
    if (d.checked) dg_checked_mode = 1;
    int threads = d.num_threads;
    if (threads == DG_FROM_ENV) threads = getenv("DG_NUM_THREADS") ? atoi(getenv("DG_NUM_THREADS")) : 0;
    if (threads > 0) dg_set_num_threads(threads);   /* else OpenMP's own choice */
    dg_manual_seed(d.seed);
    int rc = init_device(&d);
    if (rc) return rc;
    /* bf16 last, so a CPU without it never keeps the device from being set. Asked by the
     * program: an error; by the environment: a notice, and f32 */
    const char *bf = getenv("DG_CPU_BF16");
    if (d.cpu_bf16) return dg_set_cpu_bf16(true);
    dg_error_saved before;
    dg_error_save(&before);
    if (bf && atoi(bf) && dg_set_cpu_bf16(true) != 0) {
        if (!d.quiet) fprintf(stderr, "dygraph: DG_CPU_BF16=%s but %s\n", bf, dg_last_error());
        dg_error_restore(&before);   /* the notice is the whole report: f32 is a fine answer */
    }
    return 0;
}

void dg_shutdown(void) {
    if (dg_shut_down) return;
    dg_scope_release_thread();
    /* a device backend first: its queued work may still read host memory */
    const dg_backend *be[8];
    for (int i = dg_backends_started(be, 8) - 1; i >= 0; i--)
        if (be[i]->shutdown) be[i]->shutdown(be[i]);
    dg_quarantine_release();
    dg_block_cache_release_all();
    dg_rng_reset();
    dg_grad_mode_reset();
    g_device = dg_cpu();
    g_allow_tf32 = false;
    g_cpu_bf16 = false;
    dg_checked_mode = -1;
    dg_session++;
    dg_shut_down = true;
}

/* The backend these memory calls act on. After dg_shutdown one that is not running is not
 * started again just to be asked (it holds nothing): NULL with *idle set. */
static const dg_backend *backend_for_memory(dg_device d, bool *idle) {
    *idle = false;
    if (!dg_shut_down) return dg_backend_for(d);
    const dg_backend *be[8];
    int n = dg_backends_started(be, 8);
    for (int i = 0; i < n; i++)
        if (be[i]->type == d.type && be[i]->index == d.index) return be[i];
    *idle = true;
    return NULL;
}

int dg_memory_stats_get(dg_device d, dg_memory_stats *out) {
    DG_CHECK_INT(out, "memory_stats: out is NULL");
    memset(out, 0, sizeof *out);
    bool idle;
    const dg_backend *be = backend_for_memory(d, &idle);
    if (!be) return idle ? 0 : DG_EDEVICE;
    return be->memory_stats ? be->memory_stats(be, out) : 0;
}
int dg_empty_cache(dg_device d) {
    bool idle;
    const dg_backend *be = backend_for_memory(d, &idle);
    if (!be) return idle ? 0 : DG_EDEVICE;
    return be->empty_cache ? be->empty_cache(be) : 0;
}
void *dg_device_stream(dg_device d) {
    const dg_backend *be = dg_backend_for(d);
    return be && be->stream ? be->stream(be) : NULL;
}

int dg_synchronize(dg_device d) {
    bool idle;
    const dg_backend *be = backend_for_memory(d, &idle);
    if (!be) return idle ? 0 : DG_EDEVICE;
    return be->synchronize(be);
}

/* Pinned buffers carry a 64-byte header naming the backend that made them, so a free works
 * whatever the current device is by then (batches can outlive a dg_set_device). */
#define PIN_HEADER 64
void *dg_pinned_alloc(size_t bytes, void *user) {
    (void)user;
    const dg_backend *be = g_device.type == DG_CPU ? NULL : dg_backend_for(g_device);
    char *p = be && be->host_alloc ? be->host_alloc(be, bytes + PIN_HEADER) : NULL;
    if (!p) {
        if (be && be->host_alloc) return NULL;   /* the backend said why */
        be = NULL;
        p = aligned_alloc(PIN_HEADER, (bytes + 2 * PIN_HEADER - 1) / PIN_HEADER * PIN_HEADER);
        if (!p) { DG_ERR(DG_ENOMEM, "pinned_alloc: %zu bytes: out of host memory", bytes); return NULL; }
    }
    memcpy(p, &be, sizeof be);
    return p + PIN_HEADER;
}
void dg_pinned_free(void *q, void *user) {
    (void)user;
    if (!q) return;
    char *p = (char *)q - PIN_HEADER;
    const dg_backend *be;
    memcpy(&be, p, sizeof be);
    if (be) be->host_free(be, p);
    else free(p);
}

void dg_set_allow_tf32(bool allow) { g_allow_tf32 = allow; }
bool dg_get_allow_tf32(void) { return g_allow_tf32; }

int dg_set_cpu_bf16(bool on) {
    if (on && !dg_cpu_has_bf16()) {
        DG_ERR(DG_EUNSUPPORTED, "set_cpu_bf16: this CPU has no bf16 instructions (AVX512-BF16 or AMX); convolutions stay f32");
        return DG_EUNSUPPORTED;
    }
    g_cpu_bf16 = on;
    return 0;
}
bool dg_get_cpu_bf16(void) { return g_cpu_bf16; }
