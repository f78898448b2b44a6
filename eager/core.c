/* eager/core.c — library lifetime (dg_init, dg_shutdown and the session they delimit), checked
 * mode, the current device and the one-line notice (the thread count: eager/threads.c).
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
#include "profiler.h"
#include <dygraph/module.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

static dg_device g_device = { DG_CPU, 0 };
static bool g_allow_tf32 = false;
static bool g_exact_gpu_conv = false;
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
    return (dg_init_params){ .params_tag = DG_PARAMS_TAG, .device = NULL, .num_threads = DG_FROM_ENV, .seed = DG_DEFAULT_SEED };
}

int dg_init(const dg_init_params *p) {
    if (p) DG_CHECK_PARAMS_INT("init", *p, dg_init_default_params);
    dg_prof_env_once();   /* DG_PROFILE */
    dg_init_params d = p ? *p : dg_init_default_params();
    if (d.num_threads < 1 && d.num_threads != DG_FROM_ENV) {
        DG_ERR(DG_EINVAL, "init: num_threads must be >= 1 or DG_FROM_ENV, got %d (dg_init_default_params() has the defaults)",
               d.num_threads);
        return DG_EINVAL;
    }
    dg_shut_down = false;     /* a new session: dg_shutdown already moved dg_session on */
    if (d.checked) dg_checked_mode = 1;
    int threads = d.num_threads;
    const char *who = "dg_init's num_threads";
    if (threads == DG_FROM_ENV) {
        who = "DG_NUM_THREADS";
        threads = dg_env_num_threads();
    }
    if (threads > 0) dg_set_num_threads_from(threads, who);   /* else automatic */
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
    dg_prof_shutdown();   /* a recording profiler writes its trace (it reads the allocators' counters) */
    dg_scope_release_thread();
    /* a device backend first: its queued work may still read host memory */
    const dg_backend *be[8];
    for (int i = dg_backends_started(be, 8) - 1; i >= 0; i--)
        if (be[i]->shutdown) be[i]->shutdown(be[i]);
    dg_quarantine_release();
    dg_block_cache_release_all();
    dg_rng_reset();
    dg_grad_mode_reset();
    dg_autocast_reset();
    g_device = dg_cpu();
    g_allow_tf32 = false;
    g_exact_gpu_conv = false;
    dg_cpu_bf16_reset();
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
void dg_set_exact_gpu_conv(bool exact) { g_exact_gpu_conv = exact; }
bool dg_get_exact_gpu_conv(void) { return g_exact_gpu_conv; }

