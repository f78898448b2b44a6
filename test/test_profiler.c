/* test/test_profiler.c — the profiler (dygraph/profiler.h, eager/profiler.c): sessions and their
 * errors; nothing recorded while off (the hooks' off path); ranges nesting per thread, self time
 * computed within a thread only; the table and key averages; the Chrome trace's events (op args
 * with shapes, spans with bytes and bucket, tracks, memory counters, thread names); the events of
 * dg_backward, the optimizer and the DataLoader's workers; the event limit; rank file names; and
 * DG_PROFILE. Op forward events are made here through eager/profiler.h's dg_prof_op, the call the
 * op entry path makes. Each Criterion test runs in a process of its own, so sessions and the
 * environment do not leak between tests. */
#include "test_util.h"
#include "../eager/profiler.h"
#include <pthread.h>
#include <time.h>
#include <unistd.h>

static void sleep_us(long us) {
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&ts, &ts) != 0) {}
}

static dg_profiler_params quiet_params(void) {
    dg_profiler_params p = dg_profiler_default_params();
    p.profile_memory = false;
    return p;
}

/* The key-averages row named name (category cat), or NULL. */
static const dg_profiler_stat *find_stat(const dg_profiler_stat *s, int n, const char *name, dg_profiler_category cat) {
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0 && s[i].category == cat) return &s[i];
    return NULL;
}
static int stats(dg_profiler_stat *s, int max) {
    int n = dg_profiler_key_averages(s, max);
    cr_assert(n >= 0, "key_averages: %s", dg_last_error());
    return n < max ? n : max;
}

/* The whole of a file (freed by the caller). */
static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    cr_assert(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* One simulated forward op, as the op entry path reports it. */
static void fake_op(const char *name, const dg_tensor *a, const dg_tensor *b, const dg_tensor *y, long us) {
    uint64_t t0 = dg_profiling() ? dg_prof_now() : 0;
    if (us) sleep_us(us);
    const dg_tensor *in[2] = { a, b };
    dg_prof_op(name, DG_PROF_FORWARD, t0, in, 2, y);
}

Test(profiler, sessions_and_their_errors) {
    dg_profiler_stat s[4];
    cr_assert_eq(dg_profiler_key_averages(s, 4), DG_ESTATE, "rows before any session");
    cr_assert_eq(dg_profiler_print_table(stdout, 5), DG_ESTATE);
    cr_assert_eq(dg_profiler_export_chrome_trace("/tmp/never.json"), DG_ESTATE);
    cr_assert_eq(dg_profiler_stop(), DG_ESTATE);
    cr_assert(strstr(dg_last_error(), "no session is recording"), "%s", dg_last_error());
    cr_assert(!dg_profiler_enabled());

    dg_profiler_params p = dg_profiler_default_params();
    p.table_rows = -1;
    cr_assert_eq(dg_profiler_start(p), DG_EINVAL);
    cr_assert(strstr(dg_last_error(), "table_rows"), "%s", dg_last_error());
    p = dg_profiler_default_params();
    p.memory_interval_us = NAN;
    cr_assert_eq(dg_profiler_start(p), DG_EINVAL);
    p = dg_profiler_default_params();
    p.max_events = 0;
    cr_assert_eq(dg_profiler_start(p), DG_EINVAL);
    cr_assert(strstr(dg_last_error(), "max_events"), "%s", dg_last_error());
    cr_assert(!dg_profiler_enabled(), "a refused start records");

    cr_assert_eq(dg_profiler_start(dg_profiler_default_params()), 0, "%s", dg_last_error());
    cr_assert(dg_profiler_enabled());
    cr_assert_eq(dg_profiler_start(dg_profiler_default_params()), DG_ESTATE, "a second start");
    cr_assert(strstr(dg_last_error(), "already recording"), "%s", dg_last_error());
    cr_assert_eq(dg_profiler_stop(), 0, "%s", dg_last_error());
    cr_assert(!dg_profiler_enabled());
    cr_assert_eq(dg_profiler_print_table(NULL, 5), DG_EINVAL);
    cr_assert_eq(dg_profiler_print_table(stdout, -1), DG_EINVAL);
    /* a trace that cannot be written: DG_EIO naming the path, from stop and from export */
    p = dg_profiler_default_params();
    p.trace_path = "/nonexistent-dir/trace.json";
    cr_assert_eq(dg_profiler_start(p), 0);
    cr_assert_eq(dg_profiler_stop(), DG_EIO);
    cr_assert(strstr(dg_last_error(), "/nonexistent-dir/trace.json"), "%s", dg_last_error());
    cr_assert_eq(dg_profiler_export_chrome_trace("/nonexistent-dir/x.json"), DG_EIO);
}

Test(profiler, nothing_is_recorded_while_off) {
    dg_tensor *x = dg_randn(DG_SHAPE(4, 3), DG_F32), *w = dg_randn(DG_SHAPE(3, 2), DG_F32);
    dg_set_requires_grad(w, true);
    dg_optimizer *opt = dg_sgd(&w, 1, dg_sgd_default_params());
    cr_assert(opt);
    /* one session with one event, then everything while off */
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    dg_profiler_range_push(DG_PROFILER_USER, "on");
    dg_profiler_range_pop();
    cr_assert_eq(dg_profiler_stop(), 0);
    cr_assert_eq(dg_profiler_span_begin(), 0u, "span_begin while off gives a token");
    cr_assert_eq(dg_backward(dg_sum_all(dg_matmul(x, w))), 0, "%s", dg_last_error());
    cr_assert_eq(dg_optimizer_step(opt), 0);
    cr_assert_eq(dg_optimizer_clear_grad(opt), 0);
    dg_profiler_range_push(DG_PROFILER_USER, "off");
    dg_profiler_range_pop();
    dg_prof_op("matmul", DG_PROF_FORWARD, dg_prof_now(), NULL, 0, x);   /* a t0 taken while off elsewhere */
    dg_profiler_span_end(dg_prof_now(), DG_PROFILER_USER, "late", -1, -1);
    dg_profiler_stat s[8];
    int n = stats(s, 8);
    cr_assert_eq(n, 1, "events recorded while off: %d rows", n);
    cr_assert_str_eq(s[0].name, "on");
    cr_assert_eq(s[0].calls, 1);
    /* and a t0 of 0 (the profiler was off when the op began) records nothing while on */
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    dg_prof_op("matmul", DG_PROF_FORWARD, 0, NULL, 0, x);
    dg_profiler_span_end(0, DG_PROFILER_USER, "zero", -1, -1);
    cr_assert_eq(dg_profiler_stop(), 0);
    cr_assert_eq(dg_profiler_key_averages(NULL, 0), 0, "rows from t0 = 0");
    dg_optimizer_free(opt);
    dg_tensor_free(x);
    dg_tensor_free(w);
}

/* ---- nesting: self time on the thread, not across threads ---- */
typedef struct other_ctx { pthread_mutex_t mu; pthread_cond_t cv; int phase; } other_ctx;
static void wait_phase(other_ctx *c, int want) {
    pthread_mutex_lock(&c->mu);
    while (c->phase < want) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}
static void set_phase(other_ctx *c, int v) {
    pthread_mutex_lock(&c->mu);
    c->phase = v;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}
static void *other_thread(void *arg) {
    other_ctx *c = arg;
    dg_profiler_thread_name("other worker");
    wait_phase(c, 1);   /* while the main thread's "outer" is open */
    dg_profiler_range_push(DG_PROFILER_USER, "other");
    sleep_us(8000);
    dg_profiler_range_pop();
    set_phase(c, 2);
    return NULL;
}

Test(profiler, ranges_nest_per_thread) {
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(3, 4), DG_F32), *y = dg_ones(DG_SHAPE(2, 4), DG_F32);
    other_ctx c = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, other_thread, &c), 0);
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    dg_profiler_range_push(DG_PROFILER_USER, "outer");
    fake_op("linear", a, b, y, 0);          /* a composite: its parts inside it */
    sleep_us(2000);
    set_phase(&c, 1);
    wait_phase(&c, 2);                      /* "other" ran on its thread inside outer's time */
    dg_profiler_range_push(DG_PROFILER_USER, "inner");
    fake_op("matmul", a, b, y, 3000);
    fake_op("matmul", a, b, y, 1000);
    dg_profiler_range_pop();
    dg_profiler_range_pop();
    pthread_join(th, NULL);
    cr_assert_eq(dg_profiler_stop(), 0);

    dg_profiler_stat s[16];
    int n = stats(s, 16);
    const dg_profiler_stat *outer = find_stat(s, n, "outer", DG_PROFILER_USER), *inner = find_stat(s, n, "inner", DG_PROFILER_USER),
                           *mm = find_stat(s, n, "matmul", DG_PROFILER_OP), *lin = find_stat(s, n, "linear", DG_PROFILER_OP),
                           *other = find_stat(s, n, "other", DG_PROFILER_USER);
    cr_assert(outer && inner && mm && lin && other, "rows missing (%d rows)", n);
    cr_assert_eq(mm->calls, 2);
    cr_assert_eq(outer->calls, 1);
    cr_assert(mm->total_us >= 4000, "matmul total %.1f us, slept 4000", mm->total_us);
    cr_assert(fabs(mm->self_us - mm->total_us) < 1e-6, "a leaf's self time is its total");
    cr_assert(fabs(inner->self_us - (inner->total_us - mm->total_us)) < 0.01, "inner self %.3f, total %.3f, children %.3f",
              inner->self_us, inner->total_us, mm->total_us);
    /* outer's children are linear and inner only: "other" ran on another thread at the same time */
    cr_assert(fabs(outer->self_us - (outer->total_us - inner->total_us - lin->total_us)) < 0.01,
              "outer self %.3f, total %.3f, inner %.3f, linear %.3f", outer->self_us, outer->total_us, inner->total_us,
              lin->total_us);
    cr_assert(outer->self_us >= 8000, "outer's self time %.1f us lost the other thread's range", outer->self_us);
    cr_assert(fabs(other->self_us - other->total_us) < 1e-6);
    cr_assert(outer->total_us >= inner->total_us + other->total_us);
    /* sorted by total time, outer first; percent is of the profiled wall time */
    cr_assert_str_eq(s[0].name, "outer");
    for (int i = 1; i < n; i++) cr_assert(s[i - 1].total_us >= s[i].total_us, "rows not sorted by total time");
    cr_assert(s[0].percent > 50 && s[0].percent <= 100.0 + 1e-9, "outer is %.1f%% of the session", s[0].percent);
    /* the other thread is a row of its own, by its name */
    char path[] = "/tmp/dg_prof_nestXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(dg_profiler_export_chrome_trace(path), 0, "%s", dg_last_error());
    char *j = slurp(path);
    cr_assert(strstr(j, "\"name\":\"thread_name\""), "no thread names");
    cr_assert(strstr(j, "\"args\":{\"name\":\"other worker\"}"), "the other thread's name is missing");
    cr_assert(strstr(j, "\"args\":{\"name\":\"main\"}"), "the main thread is not named");
    free(j);
    unlink(path);
    dg_tensor_free(a); dg_tensor_free(b); dg_tensor_free(y);
}

Test(profiler, range_stack_overflow_and_stray_pops) {
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    dg_profiler_range_pop();   /* nothing open: ignored */
    for (int i = 0; i < 70; i++) dg_profiler_range_push(DG_PROFILER_USER, "deep");
    for (int i = 0; i < 70; i++) dg_profiler_range_pop();
    dg_profiler_range_push(DG_PROFILER_USER, "after");
    dg_profiler_range_pop();
    cr_assert_eq(dg_profiler_stop(), 0);
    dg_profiler_stat s[4];
    int n = stats(s, 4);
    const dg_profiler_stat *deep = find_stat(s, n, "deep", DG_PROFILER_USER), *after = find_stat(s, n, "after", DG_PROFILER_USER);
    cr_assert(deep && after);
    cr_assert_eq(deep->calls, 64, "ranges deeper than the stack are not recorded, the rest are (%lld)", (long long)deep->calls);
    cr_assert_eq(after->calls, 1, "the stack is balanced after the overflow");
}

Test(profiler, table_rows_and_form) {
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    for (int i = 0; i < 3; i++) {
        dg_profiler_range_push(DG_PROFILER_USER, "step");
        dg_profiler_range_push(DG_PROFILER_USER, "work");
        sleep_us(500);
        dg_profiler_range_pop();
        dg_profiler_range_pop();
    }
    cr_assert_eq(dg_profiler_stop(), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(dg_profiler_print_table(f, 0), 0);
    fclose(f);
    cr_assert(strstr(buf, "Name") == buf, "table: %s", buf);
    cr_assert(strstr(buf, "Category") && strstr(buf, "Calls") && strstr(buf, "Self %") && strstr(buf, "Total %"), "%s", buf);
    char *step = strstr(buf, "\nstep "), *work = strstr(buf, "\nwork ");
    cr_assert(step && work && step < work, "rows by total time: %s", buf);
    cr_assert(strstr(step, "user") && strstr(step, " 3 "), "step's row: %.100s", step);
    cr_assert(strstr(buf, "2 of 2 rows shown"), "%s", buf);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    cr_assert_eq(dg_profiler_print_table(f, 1), 0);
    fclose(f);
    cr_assert(strstr(buf, "\nstep ") && !strstr(buf, "\nwork "), "rows = 1: %s", buf);
    cr_assert(strstr(buf, "1 of 2 rows shown"), "%s", buf);
    free(buf);
}

Test(profiler, chrome_trace_events_and_args) {
    dg_tensor *a = dg_ones(DG_SHAPE(2, 3), DG_F32), *b = dg_ones(DG_SHAPE(3, 4), DG_F32), *y = dg_ones(DG_SHAPE(2, 4), DG_F32);
    dg_profiler_params p = dg_profiler_default_params();
    p.memory_interval_us = 0;   /* a sample at every event end (written when it changed) */
    char path[] = "/tmp/dg_prof_traceXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    p.trace_path = path;
    cr_assert_eq(dg_profiler_start(p), 0);
    fake_op("matmul", a, b, y, 0);
    fake_op("add", a, NULL, NULL, 0);   /* a NULL input; failed (no output) */
    dg_memory_stats before, after;
    cr_assert_eq(dg_memory_stats_get(dg_cpu(), &before), 0);
    dg_tensor *big = dg_zeros(DG_SHAPE(1 << 20), DG_F32);   /* 4 MB: the CPU counter moves */
    cr_assert_eq(dg_memory_stats_get(dg_cpu(), &after), 0);
    fake_op("zeros", NULL, NULL, big, 0);
    uint64_t t = dg_profiler_span_begin();
    cr_assert(t != 0);
    dg_profiler_span_end(t, DG_PROFILER_COLLECTIVE, "all_reduce bucket", 4096, 3);
    t = dg_profiler_span_begin();
    dg_profiler_span_end_on("DataParallel bucket 7", t, DG_PROFILER_COLLECTIVE, "all_reduce bucket", 64, 7);
    t = dg_profiler_span_begin();
    dg_profiler_span_end(t, DG_PROFILER_DATALOADER, "dataloader.next", -1, 12);
    dg_profiler_span_end(dg_profiler_span_begin(), DG_PROFILER_USER, "quote\"and\\slash", -1, -1);
    cr_assert_eq(dg_profiler_stop(), 0, "%s", dg_last_error());
    dg_tensor_free(big);
    char *j = slurp(path);
    cr_assert(strncmp(j, "{\"traceEvents\":[", 16) == 0, "%.40s", j);
    cr_assert(strstr(j, "\"displayTimeUnit\":\"ms\""));
    cr_assert(strstr(j, "{\"ph\":\"X\",\"name\":\"matmul\",\"cat\":\"op\","), "no matmul X event");
    cr_assert(strstr(j, "\"args\":{\"input_shapes\":\"[2, 3], [3, 4]\",\"output_shape\":\"[2, 4]\",\"dtype\":\"float32\","
                        "\"device\":\"cpu\",\"inputs\":2}"), "matmul's args");
    cr_assert(strstr(j, "\"input_shapes\":\"[2, 3], None\",\"dtype\":\"float32\",\"device\":\"cpu\",\"inputs\":2,\"failed\":true"),
              "a failed op's args");
    cr_assert(strstr(j, "\"args\":{\"bytes\":4096,\"bucket\":3}"), "a collective's args");
    cr_assert(strstr(j, "\"args\":{\"batch\":12}"), "a batch's args");
    cr_assert(strstr(j, "\"name\":\"quote\\\"and\\\\slash\""), "names are JSON-escaped");
    cr_assert(strstr(j, "\"args\":{\"name\":\"DataParallel bucket 7\"}"), "the track's row name");
    cr_assert(strstr(j, "\"tid\":2130706432,\"ts\":"), "the track's event is on the track's row");
    cr_assert(strstr(j, "{\"ph\":\"C\",\"name\":\"memory cpu\",\"cat\":\"memory\""), "no memory counter");
    cr_assert(strstr(j, "\"name\":\"process_name\""));
    cr_assert(strstr(j, "\"otherData\":{\"profiler\":\"dygraph "), "no otherData");
    cr_assert(strstr(j, "\"dropped_events\":0}"));
    /* the counter's first value, and a second once the 4 MB block is live (the pool counts it; under
     * a sanitizer that keeps the pool from reserving its range the block is outside the stats) */
    const char *c1 = strstr(j, "\"name\":\"memory cpu\"");
    cr_assert(c1, "no memory counter");
    if (after.allocated != before.allocated) {
        cr_assert(strstr(c1 + 1, "\"name\":\"memory cpu\""), "the counter was written once only");
        char want[64];
        snprintf(want, sizeof want, "\"args\":{\"allocated\":%zu,", after.allocated);
        cr_assert(strstr(j, want), "no counter value %s", want);
    }
    free(j);
    unlink(path);
    dg_tensor_free(a); dg_tensor_free(b); dg_tensor_free(y);
}

/* ---- the library's own events ---- */
typedef struct toy { int64_t n; } toy;
static int64_t toy_len(void *self) { return ((toy *)self)->n; }
static int toy_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    out->t[0] = dg_full(DG_SHAPE(4), (double)i, DG_F32);
    out->n = 1;
    return out->t[0] ? 0 : dg_last_status();
}
static void toy_free(void *self) { free(self); }
static const dg_dataset_vtable toy_vt = { toy_len, toy_get, toy_free };

Test(profiler, backward_optimizer_and_dataloader_events) {
    toy *t = malloc(sizeof *t);
    t->n = 24;
    dg_dataset *ds = dg_dataset_new(&toy_vt, t, "toy");
    dg_dataloader_params lp = dg_dataloader_default_params();
    lp.batch_size = 4;
    lp.num_workers = 2;
    dg_dataloader *dl = dg_dataloader_new(ds, lp);
    dg_dataset_free(ds);
    dg_layer *lin = dg_nn_linear(4, 2);
    int np;
    dg_tensor **params = dg_layer_parameters(lin, &np);
    dg_optimizer *opt = dg_adam(params, np, dg_adam_default_params());
    free(params);
    cr_assert(dl && lin && opt, "%s", dg_last_error());
    char path[] = "/tmp/dg_prof_libXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(dg_profiler_start(dg_profiler_default_params()), 0);
    cr_assert_eq(dg_dataloader_start_epoch(dl, 0), 0);
    int steps = 0;
    for (;;) {
        dg_scope *s = dg_scope_begin();
        dg_sample b;
        int got = dg_dataloader_next(dl, &b);
        cr_assert(got >= 0, "%s", dg_last_error());
        if (got == 0) { dg_scope_end(s); break; }
        dg_tensor *loss = dg_mean_all(dg_relu(dg_forward(lin, b.t[0])));
        cr_assert_eq(dg_backward(loss), 0, "%s", dg_last_error());
        cr_assert_eq(dg_optimizer_step(opt), 0);
        cr_assert_eq(dg_optimizer_clear_grad(opt), 0);
        dg_scope_end(s);
        steps++;
    }
    cr_assert_eq(dg_profiler_stop(), 0);
    cr_assert_eq(steps, 6);
    dg_profiler_stat s[64];
    int n = stats(s, 64);
    const dg_profiler_stat *bw = find_stat(s, n, "backward", DG_PROFILER_AUTOGRAD),
                           *mm = find_stat(s, n, "matmul_backward", DG_PROFILER_OP_BACKWARD),
                           *relu = find_stat(s, n, "relu_backward", DG_PROFILER_OP_BACKWARD),
                           *step = find_stat(s, n, "adam.step", DG_PROFILER_OPTIMIZER),
                           *clear = find_stat(s, n, "adam.clear_grad", DG_PROFILER_OPTIMIZER),
                           *next = find_stat(s, n, "dataloader.next", DG_PROFILER_DATALOADER),
                           *load = find_stat(s, n, "dataloader.load", DG_PROFILER_DATALOADER);
    cr_assert(bw && mm && relu && step && clear && next && load, "rows missing (%d)", n);
    cr_assert_eq(bw->calls, 6);
    cr_assert_eq(relu->calls, 6);
    cr_assert_eq(step->calls, 6);
    cr_assert_eq(clear->calls, 6);
    cr_assert_eq(next->calls, 6, "one dataloader.next per batch");
    cr_assert_eq(load->calls, 6, "one dataloader.load per batch");
    /* the backward ops are inside the backward walk: its self time excludes them */
    double ops_bw = 0;
    for (int i = 0; i < n; i++) if (s[i].category == DG_PROFILER_OP_BACKWARD) ops_bw += s[i].total_us;
    cr_assert(bw->self_us <= bw->total_us - ops_bw + 0.01, "backward self %.3f total %.3f ops %.3f", bw->self_us, bw->total_us, ops_bw);
    /* the workers' loads are on the workers' rows, named */
    cr_assert_eq(dg_profiler_export_chrome_trace(path), 0);
    char *j = slurp(path);
    cr_assert(strstr(j, "\"args\":{\"name\":\"dataloader worker\"}"), "no dataloader worker row");
    const char *mainrow = strstr(j, "\"args\":{\"name\":\"main\"}");
    cr_assert(mainrow);
    const char *tidp = mainrow;
    while (tidp > j && strncmp(tidp, "\"tid\":", 6) != 0) tidp--;
    int main_tid = atoi(tidp + 6);
    int loads = 0;
    for (const char *p = strstr(j, "\"name\":\"dataloader.load\""); p; p = strstr(p + 1, "\"name\":\"dataloader.load\"")) {
        const char *tp = strstr(p, "\"tid\":");
        cr_assert(tp && atoi(tp + 6) != main_tid, "a worker's load on the main thread's row");
        loads++;
    }
    cr_assert_eq(loads, 6);
    cr_assert(strstr(j, "\"name\":\"relu_backward\",\"cat\":\"op_backward\""));
    cr_assert(strstr(j, "\"grad_input_shapes\":\"[4, 2]\",\"grad_output_shape\":\"[4, 2]\""), "relu_backward's shapes");
    free(j);
    unlink(path);
    dg_optimizer_free(opt);
    dg_layer_free(lin);
    dg_dataloader_free(dl);
}

Test(profiler, event_limit_and_new_sessions) {
    dg_profiler_params p = quiet_params();
    p.max_events = 3;
    cr_assert_eq(dg_profiler_start(p), 0);
    for (int i = 0; i < 10; i++) {
        dg_profiler_range_push(DG_PROFILER_USER, "r");
        dg_profiler_range_pop();
    }
    cr_assert_eq(dg_profiler_stop(), 0);
    dg_profiler_stat s[2];
    cr_assert_eq(stats(s, 2), 1);
    cr_assert_eq(s[0].calls, 3, "kept %lld of max_events 3", (long long)s[0].calls);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(dg_profiler_print_table(f, 0), 0);
    fclose(f);
    cr_assert(strstr(buf, "3 events, 7 dropped (max_events 3)"), "%s", buf);
    free(buf);
    /* a new session starts empty: the earlier events (a thread that has exited included) are gone */
    pthread_t th;
    other_ctx c = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1 };
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    cr_assert_eq(pthread_create(&th, NULL, other_thread, &c), 0);
    pthread_join(th, NULL);
    cr_assert_eq(dg_profiler_stop(), 0);
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    dg_profiler_range_push(DG_PROFILER_USER, "second");
    dg_profiler_range_pop();
    cr_assert_eq(dg_profiler_stop(), 0);
    cr_assert_eq(stats(s, 2), 1);
    cr_assert_str_eq(s[0].name, "second");
}

Test(profiler, rank_file_names) {
    char dir[] = "/tmp/dg_prof_rankXXXXXX";
    cr_assert(mkdtemp(dir));
    cr_assert_eq(dg_profiler_start(quiet_params()), 0);
    dg_profiler_range_push(DG_PROFILER_USER, "r");
    dg_profiler_range_pop();
    cr_assert_eq(dg_profiler_stop(), 0);
    char path[256], want[256];
    setenv("PADDLE_TRAINER_ID", "1", 1);
    setenv("PADDLE_TRAINERS_NUM", "2", 1);
    snprintf(path, sizeof path, "%s/t.json", dir);
    cr_assert_eq(dg_profiler_export_chrome_trace(path), 0);
    snprintf(want, sizeof want, "%s/t.rank1.json", dir);
    cr_assert_eq(access(want, R_OK), 0, "a rank of 2 writes %s", want);
    cr_assert_neq(access(path, R_OK), 0, "the unnumbered file was written");
    char *j = slurp(want);
    cr_assert(strstr(j, "\"pid\":1,") && !strstr(j, "\"pid\":0,"), "a rank's pid is its rank");
    cr_assert(strstr(j, "rank 1 of 2"), "the process is named by its rank");
    free(j);
    snprintf(path, sizeof path, "%s/p%%r.trace", dir);
    cr_assert_eq(dg_profiler_export_chrome_trace(path), 0);
    snprintf(want, sizeof want, "%s/p1.trace", dir);
    cr_assert_eq(access(want, R_OK), 0, "%%r is the rank: %s", want);
    unsetenv("PADDLE_TRAINER_ID");
    unsetenv("PADDLE_TRAINERS_NUM");
    snprintf(path, sizeof path, "%s/solo.json", dir);
    cr_assert_eq(dg_profiler_export_chrome_trace(path), 0);
    cr_assert_eq(access(path, R_OK), 0, "one process writes the path as given");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

Test(profiler, dg_profile_environment_variable) {
    char dir[] = "/tmp/dg_prof_envXXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/env.json", dir);
    setenv("DG_PROFILE", path, 1);
    cr_assert(!dg_profiler_enabled());
    cr_assert_eq(dg_init(NULL), 0);
    cr_assert(dg_profiler_enabled(), "DG_PROFILE did not start a session at dg_init");
    cr_assert_eq(dg_profiler_start(dg_profiler_default_params()), DG_ESTATE);
    cr_assert(strstr(dg_last_error(), "DG_PROFILE"), "%s", dg_last_error());
    dg_tensor *w = dg_randn(DG_SHAPE(3, 2), DG_F32);
    dg_set_requires_grad(w, true);
    cr_assert_eq(dg_backward(dg_sum_all(dg_relu(w))), 0);
    dg_tensor_free(w);
    dg_shutdown();   /* ends the session: the file is written */
    cr_assert(!dg_profiler_enabled());
    char *j = slurp(path);
    cr_assert(strstr(j, "\"name\":\"relu_backward\""), "the DG_PROFILE trace lacks the backward op");
    free(j);
    cr_assert_eq(dg_init(NULL), 0);
    cr_assert(!dg_profiler_enabled(), "DG_PROFILE profiles the first session only");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}
