/* eager/threads.c — how many threads the CPU kernels use: an explicit count as given, else an
 * automatic one that leaves out the CPUs other processes keep busy. A leaf of the core: the
 * kernels in eager/cpu/ ask it, and it asks nothing of tensors or backends. */
#include "internal.h"
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

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

/* `who` asked for n threads: more than 4 per CPU only adds switching, and libgomp dies making
 * tens of thousands, so the count is cut there, with a one-line notice saying so (the program
 * goes on: fewer threads compute the same numbers). */
static int clamp_threads(int n, const char *who) {
    int most = 4 * g_ncpu;
    if (n > most) {
        fprintf(stderr, "dygraph: %s asked for %d threads; using %d (4 per CPU, %d CPU(s) usable)\n", who, n, most, g_ncpu);
        return most;
    }
    return n < 1 ? 1 : n;
}

int dg_env_num_threads(void) {
    const char *e = getenv("DG_NUM_THREADS");
    if (!e || !*e) return 0;
    char *end;
    long v = strtol(e, &end, 10);
    if (*end || v < 0 || v > INT_MAX) {   /* the environment is not the program: a notice, then automatic */
        fprintf(stderr, "dygraph: DG_NUM_THREADS='%s' is not a thread count; the count stays automatic\n", e);
        return 0;
    }
    return (int)v;
}

/* The environment's count holds from the first op, whether or not the program calls dg_init
 * (which reads it again, under the same rule: DG_NUM_THREADS before OMP_NUM_THREADS). */
static void threads_init(void) {
    g_ncpu = omp_get_num_procs();
    if (g_ncpu < 1) g_ncpu = 1;
    g_auto = g_ncpu;
    int dg = dg_env_num_threads();
    /* OMP_NUM_THREADS is the user's explicit choice; libgomp has already parsed it */
    const char *e = getenv("OMP_NUM_THREADS");
    if (dg > 0) g_explicit = clamp_threads(dg, "DG_NUM_THREADS");
    else if (e && *e) g_explicit = clamp_threads(omp_get_max_threads(), "OMP_NUM_THREADS");
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

void dg_set_num_threads(int n) { dg_set_num_threads_from(n, "dg_set_num_threads"); }

void dg_set_num_threads_from(int n, const char *who) {
    pthread_once(&g_threads_once, threads_init);
    if (n < 1) {   /* back to automatic: measure afresh, not over the time the count was fixed */
        pthread_mutex_lock(&g_load_lock);
        g_prev.ok = false;
        __atomic_store_n(&g_load_due, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&g_load_lock);
    }
    __atomic_store_n(&g_explicit, n < 1 ? 0 : clamp_threads(n, who), __ATOMIC_RELAXED);
    dg_threads();   /* the caller's own OpenMP setting follows at once */
}
int dg_get_num_threads(void) { return dg_threads(); }
