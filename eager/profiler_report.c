/* eager/profiler_report.c — reading a profiler session (eager/profiler.c records it): every
 * span sorted per row with the time of the spans nested in it, the key-averages table
 * (dg_profiler_print_table, dg_profiler_key_averages) and the Chrome trace-event JSON that
 * Perfetto and chrome://tracing open (dg_profiler_export_chrome_trace). */
#include "profiler_internal.h"
#include <errno.h>
#include <math.h>
#include <unistd.h>

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

/* Every event of the current session (dg_prof_lock held), sorted by row and start, with the time of
 * the events nested in each. Counters are included (kind EV_COUNTER) but nest nothing. */
static int collect(rows_t *r) {
    memset(r, 0, sizeof *r);
    uint64_t gen = __atomic_load_n(&dg_prof_gen, __ATOMIC_ACQUIRE);
    int64_t cap = 0;
    for (prof_thread *th = dg_prof_threads; th; th = th->next_all) {
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
    for (prof_thread *th = dg_prof_threads; th; th = th->next_all) {
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

static dg_profiler_stat *g_stats;   /* the last stopped session's rows (dg_prof_lock), NULL: not made yet */
static int g_nstats;
void dg_prof_stats_invalidate(void) {
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
    uint64_t end = dg_prof_t_stop ? dg_prof_t_stop : dg_prof_now();
    return end > dg_prof_t_start ? (double)(end - dg_prof_t_start) : 1.0;
}

/* The rows (dg_prof_lock held): from the cache when the session has stopped; *out is the caller's
 * to free when *owned. */
static int stats_locked(dg_profiler_stat **out, int *n, bool *owned) {
    *owned = false;
    if (g_stats && dg_prof_t_stop) { *out = g_stats; *n = g_nstats; return 0; }
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
    if (dg_prof_t_stop) {   /* a stopped session does not change: keep the rows */
        dg_prof_stats_invalidate();
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
    pthread_mutex_lock(&dg_prof_lock);
    if (!dg_prof_started) {
        pthread_mutex_unlock(&dg_prof_lock);
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
    pthread_mutex_unlock(&dg_prof_lock);
    return rc ? rc : n;
}

static void fmt_ms(char *buf, size_t len, double us) {
    if (us >= 1e6) snprintf(buf, len, "%.3f s", us / 1e6);
    else if (us >= 1e3) snprintf(buf, len, "%.3f ms", us / 1e3);
    else snprintf(buf, len, "%.3f us", us);
}

int dg_prof_table_locked(FILE *f, int rows) {
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
    int64_t kept = __atomic_load_n(&dg_prof_nevents, __ATOMIC_RELAXED), dropped = __atomic_load_n(&dg_prof_dropped, __ATOMIC_RELAXED);
    if (kept > dg_prof_max_events) kept = dg_prof_max_events;
    fprintf(f, "Profiled wall time: %s; self time of all rows: %s; %d of %d rows shown; %lld events%s", wall, selfs, show, n,
            (long long)kept, dropped ? "" : "\n");
    if (dropped) fprintf(f, ", %lld dropped (max_events %lld)\n", (long long)dropped, (long long)dg_prof_max_events);
    if (owned) free(s);
    return 0;
}

int dg_profiler_print_table(FILE *f, int rows) {
    DG_CHECK_INT(f, "profiler_print_table: f is NULL");
    DG_CHECK_INT(rows >= 0, "profiler_print_table: rows must be >= 0 (0: every row), got %d", rows);
    pthread_mutex_lock(&dg_prof_lock);
    int rc = 0;
    if (!dg_prof_started) {
        DG_ERR(DG_ESTATE, "profiler_print_table: no profiler session was started (dg_profiler_start)");
        rc = DG_ESTATE;
    } else {
        rc = dg_prof_table_locked(f, rows);
    }
    pthread_mutex_unlock(&dg_prof_lock);
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

int dg_prof_export_locked(const char *path_in, char *written, size_t wlen) {
    if (!dg_prof_started) {
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
    for (int k = 0; k < dg_prof_ntracks; k++) {
        fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", pid, TRACK_TID_BASE + k);
        json_str(f, dg_prof_tracks[k]);
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
    int64_t kept = __atomic_load_n(&dg_prof_nevents, __ATOMIC_RELAXED), dropped = __atomic_load_n(&dg_prof_dropped, __ATOMIC_RELAXED);
    if (kept > dg_prof_max_events) kept = dg_prof_max_events;
    fputs("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"profiler\":\"dygraph ", f);
    fputs(dg_version(), f);
    fprintf(f, "\",\"rank\":%d,\"world_size\":%d,\"start_us\":", rank, world);
    json_us(f, dg_prof_t_start);
    fputs(",\"stop_us\":", f);
    json_us(f, dg_prof_t_stop ? dg_prof_t_stop : dg_prof_now());
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
    pthread_mutex_lock(&dg_prof_lock);
    int rc = dg_prof_export_locked(path, NULL, 0);
    pthread_mutex_unlock(&dg_prof_lock);
    return rc;
}
