/* eager/cuda/profile.c — device time for the profiler (eager/profiler.c): events recorded on a GPU's
 * compute stream at an op's start and end, the way torch's profiler times kernels without CUPTI.
 * The core looks these entries up only while a session records and the module is open
 * (dg_module_symbol_if_open); it asks for the elapsed times when the session stops, once the
 * stream has run past them. Timing events come from a free list per device, so an op costs two
 * cudaEventRecord calls and no cudaEventCreate once the list is warm; dg_shutdown destroys them. */
#include "cuda_internal.h"
#include <pthread.h>
#include <stdlib.h>

typedef struct prof_event { cudaEvent_t ev; int device; struct prof_event *next; } prof_event;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_event *g_free[DG_CUDA_MAX_DEVICES];

/* An event recorded now on be's compute stream; NULL when it cannot be made (the error state is
 * the caller's to restore: the profiler never changes it). */
DG_MODULE_EXPORT void *dg_cuda_prof_mark(const dg_backend *be) {
    if (dg_cuda_enter(be)) return NULL;
    dg_cuda_ctx *c = dg_cuda_ctx_current();
    if (c->device < 0 || c->device >= DG_CUDA_MAX_DEVICES) return NULL;
    pthread_mutex_lock(&g_lock);
    prof_event *e = g_free[c->device];
    if (e) g_free[c->device] = e->next;
    pthread_mutex_unlock(&g_lock);
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) return NULL;
        if (cudaEventCreate(&e->ev) != cudaSuccess) { free(e); return NULL; }
        e->device = c->device;
    }
    if (cudaEventRecord(e->ev, c->stream) != cudaSuccess) {
        cudaEventDestroy(e->ev);
        free(e);
        return NULL;
    }
    return e;
}

/* Milliseconds from a to b (both of one device), waiting for b; 0, or -1 when the runtime cannot
 * say (an event of two devices, a runtime being torn down at exit). */
DG_MODULE_EXPORT int dg_cuda_prof_elapsed(void *a, void *b, float *ms) {
    prof_event *x = a, *y = b;
    if (!x || !y || x->device != y->device) return -1;
    int cur = -1;
    if (cudaGetDevice(&cur) != cudaSuccess || (cur != x->device && cudaSetDevice(x->device) != cudaSuccess)) return -1;
    int rc = cudaEventSynchronize(y->ev) == cudaSuccess && cudaEventSynchronize(x->ev) == cudaSuccess &&
             cudaEventElapsedTime(ms, x->ev, y->ev) == cudaSuccess ? 0 : -1;
    if (cur != x->device) cudaSetDevice(cur);
    return rc;
}

/* An event back to its device's free list. */
DG_MODULE_EXPORT void dg_cuda_prof_release(void *p) {
    prof_event *e = p;
    if (!e) return;
    pthread_mutex_lock(&g_lock);
    e->next = g_free[e->device];
    g_free[e->device] = e;
    pthread_mutex_unlock(&g_lock);
}

/* dg_shutdown (the backend's shutdown entry, with device current): its free list destroyed. */
void dg_cuda_prof_release_all(int device) {
    if (device < 0 || device >= DG_CUDA_MAX_DEVICES) return;
    pthread_mutex_lock(&g_lock);
    prof_event *e = g_free[device];
    g_free[device] = NULL;
    pthread_mutex_unlock(&g_lock);
    while (e) {
        prof_event *next = e->next;
        cudaEventDestroy(e->ev);
        free(e);
        e = next;
    }
}
