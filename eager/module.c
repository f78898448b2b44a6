/* eager/module.c — opens the modules of dygraph/module.h on first use and answers their requests
 * for the core's functions.
 *
 * Where a module is looked for, in order: the folders of $DG_MODULE_PATH (colon-separated); the
 * folder of the object holding the core (libdygraph.so, or the program that linked
 * libdygraph.a) and its ../lib; the library folder the build was configured for; then the
 * dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache). So a build tree, an install tree
 * and a relocated install all find their modules without settings. */
#include <dygraph/module.h>
#include "backend.h"
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <limits.h>

#ifndef DG_MODULE_DIR
#define DG_MODULE_DIR "/usr/local/lib"
#endif
#define DG_MODULE_SOVERSION "0"

typedef struct module {
    char name[16];
    void *handle;
    bool tried;
    int status;
    char error[1024];
} module;

#define MAX_MODULES 8
#define MAX_PROVIDED 32
static module g_modules[MAX_MODULES];
static struct { char name[48]; void *fn; } g_provided[MAX_PROVIDED];
static int g_n_provided;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static bool host_has_error(void) { return dg_has_error(); }

/* The core's side of host_symbol: only what module sources call. Adding one is compatible;
 * changing a signature needs DG_MODULE_ABI bumped. */
static void *host_symbol(const char *name) {
    static const struct { const char *name; void *fn; } core[] = {
        { "dg_set_error_at", (void *)dg_set_error_at },
        { "dg_has_error", (void *)host_has_error },
        { "dg_clear_error", (void *)dg_clear_error },
        { "dg_last_error", (void *)dg_last_error },
        { "dg_last_status", (void *)dg_last_status },
        { "dg_error_save", (void *)dg_error_save },
        { "dg_error_restore", (void *)dg_error_restore },
        { "dg_dtype_name", (void *)dg_dtype_name },
        { "dg_dtype_size", (void *)dg_dtype_size },
        { "dg_tensor_ptr", (void *)dg_tensor_ptr },
        { "dg_shape_fmt", (void *)dg_shape_fmt },
        { "dg_get_allow_tf32", (void *)dg_get_allow_tf32 },
        { "dg_get_exact_gpu_conv", (void *)dg_get_exact_gpu_conv },
        { "dg_get_device", (void *)dg_get_device },
    };
    for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
        if (strcmp(core[i].name, name) == 0) return core[i].fn;
    const char *colon = strchr(name, ':');
    if (colon && colon - name < 16) {      /* "cuda:dg_cuda_alloc": another module's entry */
        char mod[16];
        snprintf(mod, sizeof mod, "%.*s", (int)(colon - name), name);
        return dg_module_symbol(mod, colon + 1);
    }
    void *fn = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n_provided && !fn; i++)
        if (strcmp(g_provided[i].name, name) == 0) fn = g_provided[i].fn;
    pthread_mutex_unlock(&g_lock);
    return fn;
}

int dg_module_provide(const char *name, void *fn) {
    DG_CHECK_INT(name && fn && strlen(name) < sizeof g_provided[0].name, "module_provide: bad name or NULL function");
    pthread_mutex_lock(&g_lock);
    int rc = 0;
    int i = 0;
    while (i < g_n_provided && strcmp(g_provided[i].name, name) != 0) i++;
    if (i == g_n_provided && g_n_provided == MAX_PROVIDED) rc = DG_ENOMEM;
    else {
        snprintf(g_provided[i].name, sizeof g_provided[i].name, "%s", name);
        g_provided[i].fn = fn;
        if (i == g_n_provided) g_n_provided++;
    }
    pthread_mutex_unlock(&g_lock);
    if (rc) DG_ERR(rc, "module_provide: more than %d functions provided to modules", MAX_PROVIDED);
    return rc;
}

/* The folder of the file holding this code: libdygraph.so, or the program itself. */
static bool core_dir(char *out, size_t len) {
    Dl_info info;
    char path[PATH_MAX] = "";
    if (dladdr((void *)dg_module_symbol, &info) && info.dli_fname && strchr(info.dli_fname, '/'))
        snprintf(path, sizeof path, "%s", info.dli_fname);
    else {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n <= 0) return false;
        path[n] = 0;
    }
    char *slash = strrchr(path, '/');
    if (!slash) return false;
    *slash = 0;
    snprintf(out, len, "%s", path[0] ? path : "/");
    return true;
}

/* Calls fn(dir) for each search folder until it returns true; "" stands for the dynamic linker's
 * own search. */
static bool each_dir(bool (*fn)(const char *dir, void *arg), void *arg) {
    const char *env = getenv("DG_MODULE_PATH");
    if (env && *env) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", env);
        for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
            if (*d && fn(d, arg)) return true;
    }
    char dir[PATH_MAX], up[PATH_MAX + 8];
    if (core_dir(dir, sizeof dir)) {
        if (fn(dir, arg)) return true;
        snprintf(up, sizeof up, "%s/../lib", dir);
        if (fn(up, arg)) return true;
    }
    if (fn(DG_MODULE_DIR, arg)) return true;
    return fn("", arg);
}

typedef struct search {
    const char *file;
    char path[PATH_MAX];
    char tried[1024];
    char failure[768];       /* dlopen's message for a file that exists but would not load */
    void *handle;
} search;

static bool try_dir(const char *dir, void *arg) {
    search *s = arg;
    if (*dir) {
        snprintf(s->path, sizeof s->path, "%.3900s/%s", dir, s->file);
        size_t used = strlen(s->tried);
        snprintf(s->tried + used, sizeof s->tried - used, "%s%s", used ? ", " : "", dir);
        if (access(s->path, F_OK) != 0) return false;
    } else {
        snprintf(s->path, sizeof s->path, "%s", s->file);
    }
    s->handle = dlopen(s->path, RTLD_NOW | RTLD_LOCAL);
    if (!s->handle && *dir) snprintf(s->failure, sizeof s->failure, "%s", dlerror());
    if (!s->handle) dlerror();
    return s->handle != NULL || (*dir && s->failure[0]);
}

static bool present_dir(const char *dir, void *arg) {
    search *s = arg;
    if (!*dir) return false;
    snprintf(s->path, sizeof s->path, "%.3900s/%s", dir, s->file);
    return access(s->path, F_OK) == 0;
}

bool dg_module_present(const char *name) {
    search s = { 0 };
    char file[64];
    snprintf(file, sizeof file, "libdygraph-%s.so." DG_MODULE_SOVERSION, name);
    s.file = file;
    return each_dir(present_dir, &s);
}

static void open_module(module *m) {
    char file[64];
    snprintf(file, sizeof file, "libdygraph-%s.so." DG_MODULE_SOVERSION, m->name);
    search s = { .file = file };
    each_dir(try_dir, &s);
    m->tried = true;
    if (!s.handle) {
        m->status = DG_EUNSUPPORTED;
        if (s.failure[0])
            snprintf(m->error, sizeof m->error, "the %s module %.300s is there but would not load: %.500s", m->name, s.path, s.failure);
        else
            snprintf(m->error, sizeof m->error, "the %s module %s was not found (looked in %.600s, then the dynamic linker's path): "
                     "this build or install has no %s support", m->name, file, s.tried[0] ? s.tried : "no folder", m->name);
        return;
    }
    dg_module_init_fn init = (dg_module_init_fn)dlsym(s.handle, DG_MODULE_INIT_SYMBOL);
    static const dg_module_host host = { DG_MODULE_ABI, sizeof(struct dg_tensor), sizeof(dg_backend), host_symbol };
    char err[512] = "";
    int rc = init ? init(&host, err, sizeof err) : DG_EUNSUPPORTED;
    if (rc) {
        m->status = DG_EUNSUPPORTED;
        snprintf(m->error, sizeof m->error, "the %s module %.300s refused to start: %.500s", m->name, s.path,
                 init ? err : "it has no " DG_MODULE_INIT_SYMBOL " (not a dygraph module)");
        dlclose(s.handle);
        return;
    }
    m->handle = s.handle;
}

void *dg_module_symbol_if_open(const char *name, const char *symbol) {
    void *handle = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < MAX_MODULES && g_modules[i].name[0]; i++)
        if (strcmp(g_modules[i].name, name) == 0) handle = g_modules[i].handle;
    pthread_mutex_unlock(&g_lock);
    return handle ? dlsym(handle, symbol) : NULL;
}

void *dg_module_symbol(const char *name, const char *symbol) {
    DG_CHECK(name && symbol && strlen(name) < sizeof g_modules[0].name, "module_symbol: bad module or symbol name");
    pthread_mutex_lock(&g_lock);
    module *m = NULL;
    for (int i = 0; i < MAX_MODULES && !m; i++)
        if (!g_modules[i].name[0] || strcmp(g_modules[i].name, name) == 0) m = &g_modules[i];
    if (m && !m->name[0]) snprintf(m->name, sizeof m->name, "%s", name);
    pthread_mutex_unlock(&g_lock);
    DG_CHECK(m, "module_symbol: more than %d modules", MAX_MODULES);
    /* opened outside the table lock: a module's init may ask host_symbol for provided functions */
    static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&open_lock);
    if (!m->tried) {
        open_module(m);
        pthread_mutex_lock(&g_lock);     /* publish the handle for dg_module_symbol_if_open */
        pthread_mutex_unlock(&g_lock);
    }
    pthread_mutex_unlock(&open_lock);
    if (!m->handle) {
        DG_ERR(m->status, "%s", m->error);
        return NULL;
    }
    void *fn = dlsym(m->handle, symbol);
    if (!fn) DG_ERR(DG_EUNSUPPORTED, "the %s module has no entry %s (built from other sources than this library?)", name, symbol);
    return fn;
}
