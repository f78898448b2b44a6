/* test/test_ps_server.c — the parameter server's request handler (dist/ps/server.c) driven
 * directly with wire bytes: sync mode's step (the mean of every worker's push, once), async
 * mode's, the errors a confused worker gets, and hostile bytes answered, never crashed on. */
#include "test_util.h"
#include "../dist/ps/proto.h"
#include "../dist/ps/server.h"

typedef struct { int status; uint64_t version; unsigned char *payload; size_t len; void *raw; } reply;

static reply ask(dg_ps_server *s, const void *msg, size_t len) {
    void *r = NULL;
    size_t rl = 0;
    cr_assert_eq(dg_ps_server_handle(s, msg, len, &r, &rl), 0, "the handler failed: %s", dg_last_error());
    cr_assert(r && rl >= DG_PS_REPLY_HEADER, "a reply of %zu bytes", rl);
    const unsigned char *b = r;
    cr_assert_eq(dg_ps_get32(b), DG_PS_MAGIC);
    return (reply){ dg_ps_get16(b + 6), dg_ps_get64(b + 8), (unsigned char *)r + DG_PS_REPLY_HEADER, rl - DG_PS_REPLY_HEADER, r };
}

static reply init(dg_ps_server *s, uint32_t worker, uint32_t workers, int mode, const float *v, int n, double lr) {
    unsigned char msg[DG_PS_REQ_HEADER + DG_PS_INIT_BYTES + 64 * sizeof(float)];
    dg_ps_req_header(msg, DG_PS_OP_INIT, 0, worker, 0);
    dg_ps_init_msg m = { .total = (uint64_t)n, .offset = 0, .len = (uint64_t)n, .n_workers = workers, .mode = (uint32_t)mode,
                         .kind = 0 /* SGD */, .lr = lr };
    dg_ps_init_encode(&m, msg + DG_PS_REQ_HEADER);
    memcpy(msg + DG_PS_REQ_HEADER + DG_PS_INIT_BYTES, v, (size_t)n * sizeof(float));
    return ask(s, msg, DG_PS_REQ_HEADER + DG_PS_INIT_BYTES + (size_t)n * sizeof(float));
}
static reply push(dg_ps_server *s, uint32_t worker, uint64_t version, const float *g, int n) {
    unsigned char msg[DG_PS_REQ_HEADER + 64 * sizeof(float)];
    dg_ps_req_header(msg, DG_PS_OP_PUSH, 0, worker, version);
    memcpy(msg + DG_PS_REQ_HEADER, g, (size_t)n * sizeof(float));
    return ask(s, msg, DG_PS_REQ_HEADER + (size_t)n * sizeof(float));
}
static reply pull(dg_ps_server *s, uint32_t worker, uint64_t want) {
    unsigned char msg[DG_PS_REQ_HEADER];
    dg_ps_req_header(msg, DG_PS_OP_PULL, 0, worker, want);
    return ask(s, msg, sizeof msg);
}
static bool says(const reply *r, const char *what) {
    return r->status == DG_PS_ERROR && memmem(r->payload, r->len, what, strlen(what)) != NULL;
}

Test(ps_server, sync_steps_once_with_the_mean_of_every_workers_push) {
    dg_ps_server *s = dg_ps_server_new(2);
    const float v[3] = { 1, 2, 3 }, g0[3] = { 1, 0, -4 }, g1[3] = { 3, 2, 0 };
    reply r = init(s, 1, 2, DG_PS_MODE_SYNC, v, 3, 0.5);
    cr_assert_eq(r.status, DG_PS_OK);
    free(r.raw);
    r = init(s, 0, 2, DG_PS_MODE_SYNC, (float[3]){ 9, 9, 9 }, 3, 0.5);   /* the second INIT changes nothing */
    cr_assert_eq(r.status, DG_PS_OK);
    free(r.raw);
    r = pull(s, 0, 0);
    cr_assert_eq(r.status, DG_PS_OK);
    cr_assert_eq(r.len, sizeof v);
    cr_expect(memcmp(r.payload, v, sizeof v) == 0, "the first INIT's values");
    free(r.raw);
    r = push(s, 0, 0, g0, 3);
    cr_assert_eq(r.status, DG_PS_OK);
    free(r.raw);
    r = pull(s, 1, 1);
    cr_expect_eq(r.status, DG_PS_NOT_YET, "one of two workers pushed: no step yet");
    free(r.raw);
    r = push(s, 0, 0, g0, 3);
    cr_expect(says(&r, "pushed twice"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = push(s, 1, 1, g1, 3);
    cr_expect(says(&r, "pushed for version 1; the table is at 0"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = push(s, 1, 0, g1, 3);
    cr_assert_eq(r.status, DG_PS_OK);
    cr_expect_eq(r.version, 1);
    free(r.raw);
    r = pull(s, 1, 1);
    cr_assert_eq(r.status, DG_PS_OK);
    float got[3], want[3];
    memcpy(got, r.payload, sizeof got);
    for (int i = 0; i < 3; i++) want[i] = v[i] - 0.5f * ((g0[i] + g1[i]) * 0.5f);
    cr_expect(memcmp(got, want, sizeof got) == 0, "SGD with the mean gradient: %g %g %g", got[0], got[1], got[2]);
    free(r.raw);
    /* STOP from both workers ends the server */
    unsigned char stop[DG_PS_REQ_HEADER];
    for (uint32_t w = 0; w < 2; w++) {
        cr_expect_not(dg_ps_server_done(s));
        dg_ps_req_header(stop, DG_PS_OP_STOP, 0, w, 0);
        r = ask(s, stop, sizeof stop);
        free(r.raw);
    }
    cr_expect(dg_ps_server_done(s));
    dg_ps_server_free(s);
}

Test(ps_server, async_steps_at_each_push) {
    dg_ps_server *s = dg_ps_server_new(2);
    const float v[2] = { 1, 1 }, g[2] = { 2, 4 };
    free(init(s, 0, 2, DG_PS_MODE_ASYNC, v, 2, 0.25).raw);
    for (int k = 1; k <= 3; k++) {
        reply r = push(s, (uint32_t)(k % 2), 0, g, 2);
        cr_assert_eq(r.status, DG_PS_OK);
        cr_expect_eq(r.version, (uint64_t)k);
        free(r.raw);
    }
    reply r = pull(s, 0, 0);
    float got[2];
    memcpy(got, r.payload, sizeof got);
    cr_expect(got[0] == 1 - 3 * 0.5f && got[1] == 1 - 3 * 1.0f, "%g %g", got[0], got[1]);
    free(r.raw);
    dg_ps_server_free(s);
}

Test(ps_server, a_confused_worker_is_told_what_is_wrong) {
    dg_ps_server *s = dg_ps_server_new(2);
    const float v[2] = { 1, 1 };
    reply r = init(s, 0, 3, DG_PS_MODE_SYNC, v, 2, 0.1);
    cr_expect(says(&r, "the worker counts 3 workers, this server 2"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = push(s, 0, 0, v, 2);
    cr_expect(says(&r, "never initialised"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = pull(s, 0, 0);
    cr_expect_eq(r.status, DG_PS_NOT_YET, "a table whose INIT has not come yet");
    free(r.raw);
    free(init(s, 0, 2, DG_PS_MODE_SYNC, v, 2, 0.1).raw);
    r = init(s, 1, 2, DG_PS_MODE_SYNC, v, 2, 0.2);
    cr_expect(says(&r, "another geometry or optimizer"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = push(s, 0, 0, v, 1);
    cr_expect(says(&r, "4 gradient bytes for a shard of 2 elements"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = pull(s, 5, 0);
    cr_expect(says(&r, "worker 5: this job has 2 workers"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    unsigned char bad[DG_PS_REQ_HEADER];
    dg_ps_req_header(bad, 99, 0, 0, 0);
    r = ask(s, bad, sizeof bad);
    cr_expect(says(&r, "unknown operation 99"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    dg_ps_req_header(bad, DG_PS_OP_PULL, 0, 0, 0);
    dg_ps_put16(bad + 4, 7);
    r = ask(s, bad, sizeof bad);
    cr_expect(says(&r, "protocol version 7"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    dg_ps_server_free(s);
}

static reply sparse_init(dg_ps_server *s, uint32_t table, uint32_t worker, int mode) {
    unsigned char msg[DG_PS_REQ_HEADER + DG_PS_SPARSE_BYTES];
    dg_ps_req_header(msg, DG_PS_OP_SPARSE_INIT, table, worker, 0);
    dg_ps_sparse_msg m = { .dim = 3, .kind = DG_PS_SPARSE_SGD, .n_workers = 2, .mode = (uint32_t)mode, .seed = 5, .lr = 0.5, .init_range = 1 };
    dg_ps_sparse_encode(&m, msg + DG_PS_REQ_HEADER);
    return ask(s, msg, sizeof msg);
}
static reply sparse_pull(dg_ps_server *s, uint32_t table, uint64_t want, const int64_t *ids, int n) {
    unsigned char msg[DG_PS_REQ_HEADER + 8 * 16];
    dg_ps_req_header(msg, DG_PS_OP_SPARSE_PULL, table, 0, want);
    for (int i = 0; i < n; i++) dg_ps_put64(msg + DG_PS_REQ_HEADER + 8 * i, (uint64_t)ids[i]);
    return ask(s, msg, DG_PS_REQ_HEADER + 8 * (size_t)n);
}
static reply sparse_send(dg_ps_server *s, uint16_t op, uint32_t table, uint32_t worker, uint64_t version, const int64_t *ids,
                         const float *g, int n) {
    unsigned char msg[DG_PS_REQ_HEADER + 8 + 16 * (8 + 3 * 4)];
    dg_ps_req_header(msg, op, table, worker, version);
    dg_ps_put64(msg + DG_PS_REQ_HEADER, (uint64_t)n);
    for (int i = 0; i < n; i++) dg_ps_put64(msg + DG_PS_REQ_HEADER + 8 + 8 * i, (uint64_t)ids[i]);
    memcpy(msg + DG_PS_REQ_HEADER + 8 + 8 * (size_t)n, g, sizeof(float) * 3 * (size_t)n);
    return ask(s, msg, DG_PS_REQ_HEADER + 8 + (size_t)n * (8 + 12));
}
static reply sparse_push(dg_ps_server *s, uint32_t table, uint32_t worker, uint64_t version, const int64_t *ids, const float *g, int n) {
    return sparse_send(s, DG_PS_OP_SPARSE_PUSH, table, worker, version, ids, g, n);
}

/* Rows come from (seed, id) alone, on whichever server; sync mode steps each row once with the
 * mean of the workers' gradients for it (an id one worker did not push counts as zero there). */
Test(ps_server, sparse_rows_are_seeded_by_id_and_stepped_with_the_mean) {
    dg_ps_server *a = dg_ps_server_new(2), *b = dg_ps_server_new(2);
    free(sparse_init(a, 1, 0, true).raw);
    free(sparse_init(b, 1, 1, true).raw);
    const int64_t ids[3] = { 42, 7, 1000000007 };
    reply ra = sparse_pull(a, 1, 0, ids, 3), rb = sparse_pull(b, 1, 0, ids + 2, 1);
    cr_assert_eq(ra.status, DG_PS_OK);
    cr_assert_eq(ra.len, 3 * 3 * sizeof(float));
    float want[9];
    for (int i = 0; i < 3; i++) dg_fleet_sparse_initial_row(5, 1, ids[i], 3, want + 3 * i);
    cr_expect(memcmp(ra.payload, want, sizeof want) == 0, "rows are dg_fleet_sparse_initial_row's");
    cr_expect(memcmp(rb.payload, want + 6, 12) == 0, "id 1000000007 has the same row on another server");
    for (int i = 0; i < 9; i++) cr_expect(want[i] >= -1 && want[i] < 1 && want[i] != 0);
    free(ra.raw);
    free(rb.raw);
    const float g0[6] = { 1, 1, 1, 2, 2, 2 }, g1[3] = { 3, 3, 3 };
    reply r = sparse_push(a, 1, 0, 0, ids, g0, 2);   /* worker 0: ids 42 and 7 */
    cr_assert_eq(r.status, DG_PS_OK);
    free(r.raw);
    r = sparse_pull(a, 1, 1, ids, 1);
    cr_expect_eq(r.status, DG_PS_NOT_YET);
    free(r.raw);
    r = sparse_push(a, 1, 1, 0, ids, g1, 1);   /* worker 1: id 42 only */
    cr_assert_eq(r.status, DG_PS_OK);
    cr_expect_eq(r.version, 1);
    free(r.raw);
    r = sparse_pull(a, 1, 1, ids, 2);
    cr_assert_eq(r.status, DG_PS_OK);
    float got[6];
    memcpy(got, r.payload, sizeof got);
    for (int j = 0; j < 3; j++) {
        cr_expect(got[j] == want[j] + -0.5f * ((1 + 3) * 0.5f), "id 42: %g", got[j]);
        cr_expect(got[3 + j] == want[3 + j] + -0.5f * ((2 + 0) * 0.5f), "id 7: %g", got[3 + j]);
    }
    free(r.raw);
    unsigned char m[DG_PS_REQ_HEADER];
    dg_ps_req_header(m, DG_PS_OP_PULL, 1, 0, 0);
    r = ask(a, m, sizeof m);
    cr_expect(says(&r, "table 1 is sparse"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    dg_ps_server_free(a);
    dg_ps_server_free(b);
}

/* Random bytes, and every prefix and single-byte change of valid requests: always a reply (an
 * error one where the bytes make no sense), never a crash or a table changed by garbage. */
Test(ps_server, hostile_bytes_get_an_error_reply) {
    dg_ps_server *s = dg_ps_server_new(2);
    const float v[4] = { 1, 2, 3, 4 };
    free(init(s, 0, 2, DG_PS_MODE_ASYNC, v, 4, 0.1).raw);
    free(sparse_init(s, 1, 0, DG_PS_MODE_ASYNC).raw);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    unsigned char buf[512];
    for (int it = 0; it < 20000; it++) {
        size_t n = 0;
        if (it % 2) {   /* a valid request, cut or with one byte changed */
            int op = 1 + (it / 2) % 7;
            if (op == DG_PS_OP_STOP) op = DG_PS_OP_PULL;
            bool sparse = op >= DG_PS_OP_SPARSE_INIT;
            dg_ps_req_header(buf, (uint16_t)op, sparse ? 1 : 0, (uint32_t)(it % 2), 0);
            n = DG_PS_REQ_HEADER + (op == DG_PS_OP_PUSH ? sizeof v : op == DG_PS_OP_INIT ? DG_PS_INIT_BYTES + sizeof v
                                    : op == DG_PS_OP_SPARSE_INIT ? DG_PS_SPARSE_BYTES : op == DG_PS_OP_SPARSE_PULL ? 16
                                    : op == DG_PS_OP_SPARSE_PUSH ? 8 + 8 + 12 : 0);
            memset(buf + DG_PS_REQ_HEADER, 0, n - DG_PS_REQ_HEADER);
            if (op == DG_PS_OP_SPARSE_PUSH) dg_ps_put64(buf + DG_PS_REQ_HEADER, 1);
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (x % 3 == 0) n = x % (n + 1);
            else buf[x % n] ^= (unsigned char)(1u << (x % 8));
        } else {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            n = x % sizeof buf;
            for (size_t i = 0; i < n; i++) { x ^= x << 13, x ^= x >> 7, x ^= x << 17; buf[i] = (unsigned char)x; }
            if (n >= 4 && (it % 4) == 0) dg_ps_put32(buf, DG_PS_MAGIC);
        }
        void *r = NULL;
        size_t rl = 0;
        cr_assert_eq(dg_ps_server_handle(s, buf, n, &r, &rl), 0);
        cr_assert(r && rl >= DG_PS_REPLY_HEADER);
        free(r);
    }
    dg_ps_server_free(s);
}

/* Geo tables take what the workers' parameters moved and add it; gradients are refused there, and
 * deltas anywhere else. */
Test(ps_server, geo_tables_add_the_workers_deltas) {
    dg_ps_server *s = dg_ps_server_new(2);
    const float v[3] = { 1, 2, 3 };
    free(init(s, 0, 2, DG_PS_MODE_GEO, v, 3, 0.5).raw);
    unsigned char msg[DG_PS_REQ_HEADER + 3 * sizeof(float)];
    const float d0[3] = { 0.5f, 0, -1 }, d1[3] = { 0.25f, 1, 0 };
    for (int w = 0; w < 2; w++) {
        dg_ps_req_header(msg, DG_PS_OP_GEO_PUSH, 0, (uint32_t)w, 0);
        memcpy(msg + DG_PS_REQ_HEADER, w ? d1 : d0, sizeof d0);
        reply r = ask(s, msg, sizeof msg);
        cr_assert_eq(r.status, DG_PS_OK, "%.*s", (int)r.len, r.payload);
        cr_expect_eq(r.version, (uint64_t)(w + 1));
        free(r.raw);
    }
    reply r = pull(s, 1, 0);
    float got[3];
    memcpy(got, r.payload, sizeof got);
    cr_expect(got[0] == 1.75f && got[1] == 3 && got[2] == 2, "%g %g %g", got[0], got[1], got[2]);
    free(r.raw);
    r = push(s, 0, 2, d0, 3);
    cr_expect(says(&r, "geo table"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = ask(s, msg, sizeof msg - 4);
    cr_expect(says(&r, "delta bytes"), "%.*s", (int)r.len, r.payload);
    free(r.raw);

    free(sparse_init(s, 1, 0, DG_PS_MODE_GEO).raw);
    const int64_t ids[2] = { 4, 9 };
    r = sparse_pull(s, 1, 0, ids, 2);
    float rows[6];
    memcpy(rows, r.payload, sizeof rows);
    free(r.raw);
    const float g[6] = { 1, 2, 3, -1, -2, -3 };
    r = sparse_send(s, DG_PS_OP_SPARSE_GEO_PUSH, 1, 1, 0, ids, g, 2);
    cr_assert_eq(r.status, DG_PS_OK, "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = sparse_pull(s, 1, 0, ids, 2);
    for (int i = 0; i < 6; i++) cr_expect_float_eq(((float *)r.payload)[i], rows[i] + g[i], 1e-6, "element %d", i);
    free(r.raw);
    r = sparse_push(s, 1, 0, 0, ids, g, 2);
    cr_expect(says(&r, "geo table"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = sparse_send(s, DG_PS_OP_SPARSE_GEO_PUSH, 0, 0, 0, ids, g, 2);   /* table 0 is dense */
    cr_expect(says(&r, "dense"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    dg_ps_server_free(s);
    cr_expect_eq(dg_live_tensors(), 0);
}

static reply sparse_init_with(dg_ps_server *s, uint32_t table, uint32_t worker, dg_ps_sparse_msg m) {
    unsigned char msg[DG_PS_REQ_HEADER + DG_PS_SPARSE_BYTES];
    dg_ps_req_header(msg, DG_PS_OP_SPARSE_INIT, table, worker, 0);
    dg_ps_sparse_encode(&m, msg + DG_PS_REQ_HEADER);
    return ask(s, msg, sizeof msg);
}
static void pulled_row(dg_ps_server *s, uint32_t table, int64_t id, float out[3]) {
    reply r = sparse_pull(s, table, 0, &id, 1);
    cr_assert_eq(r.status, DG_PS_OK, "%.*s", (int)r.len, r.payload);
    memcpy(out, r.payload, 3 * sizeof(float));
    free(r.raw);
}

/* Sparse Adam: each row its own step count (Paddle's sparse Adam), the rest torch's Adam; a row
 * pushed later starts its bias correction at step 1. */
Test(ps_server, sparse_adam_steps_each_row_with_its_own_count) {
    dg_ps_server *s = dg_ps_server_new(1);
    dg_ps_sparse_msg m = { .dim = 3, .kind = DG_PS_SPARSE_ADAM, .n_workers = 1, .mode = DG_PS_MODE_ASYNC, .seed = 3, .lr = 0.1,
                           .eps = 1e-8, .init_range = 0.5, .beta1 = 0.9, .beta2 = 0.999 };
    reply r = sparse_init_with(s, 1, 0, m);
    cr_assert_eq(r.status, DG_PS_OK, "%.*s", (int)r.len, r.payload);
    free(r.raw);
    double p[2][3], mm[2][3] = { { 0 } }, vv[2][3] = { { 0 } };
    int t[2] = { 0, 0 };
    for (int i = 0; i < 2; i++) {
        float row[3];
        dg_fleet_sparse_initial_row(3, 0.5, 10 + i, 3, row);
        for (int j = 0; j < 3; j++) p[i][j] = row[j];
    }
    for (int step = 0; step < 5; step++) {
        int64_t ids[2] = { 10, 11 };
        int n = step < 2 ? 1 : 2;   /* id 11 joins at the third push */
        float g[6];
        for (int k = 0; k < 6; k++) g[k] = (float)(0.3 * (k + 1) - 0.2 * step);
        free(sparse_push(s, 1, 0, 0, ids, g, n).raw);
        for (int i = 0; i < n; i++) {
            t[i]++;
            for (int j = 0; j < 3; j++) {
                double gj = g[3 * i + j];
                mm[i][j] = 0.9 * mm[i][j] + 0.1 * gj;
                vv[i][j] = 0.999 * vv[i][j] + 0.001 * gj * gj;
                p[i][j] -= 0.1 * (mm[i][j] / (1 - pow(0.9, t[i]))) / (sqrt(vv[i][j]) / sqrt(1 - pow(0.999, t[i])) + 1e-8);
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        float got[3];
        pulled_row(s, 1, 10 + i, got);
        for (int j = 0; j < 3; j++) cr_expect_float_eq(got[j], p[i][j], 2e-6, "row %d element %d: %g vs %g", 10 + i, j, got[j], p[i][j]);
    }
    dg_ps_server_free(s);
    cr_expect_eq(dg_live_tensors(), 0);
}

/* Entry threshold 2: a row pulls as zeros and is not trained until its second push; eviction
 * drops the rows unused for longer than the age, which then start again from (seed, id); and a
 * save with both, loaded into a new server, answers the same rows and steps the same way. */
Test(ps_server, entry_threshold_eviction_and_their_save) {
    dg_ps_server *s = dg_ps_server_new(1);
    dg_ps_sparse_msg m = { .dim = 3, .kind = DG_PS_SPARSE_SGD, .n_workers = 1, .mode = DG_PS_MODE_ASYNC, .seed = 9, .lr = 0.5,
                           .init_range = 0.5, .entry = 2 };
    free(sparse_init_with(s, 2, 0, m).raw);
    const int64_t a = 21, b = 22;
    float init_a[3], got[3];
    dg_fleet_sparse_initial_row(9, 0.5, a, 3, init_a);
    pulled_row(s, 2, a, got);
    cr_expect(got[0] == 0 && got[1] == 0 && got[2] == 0, "a row below the threshold pulls as zeros: %g %g %g", got[0], got[1], got[2]);
    const float g[3] = { 1, 2, 3 };
    free(sparse_push(s, 2, 0, 0, &a, g, 1).raw);   /* first push: counted, not applied */
    pulled_row(s, 2, a, got);
    cr_expect(got[0] == 0, "still below: %g", got[0]);
    free(sparse_push(s, 2, 0, 0, &a, g, 1).raw);   /* second: entered, and this gradient applied */
    pulled_row(s, 2, a, got);
    for (int j = 0; j < 3; j++) cr_expect_float_eq(got[j], init_a[j] - 0.5f * g[j], 1e-6, "element %d", j);

    /* b is used at version 2; a is pushed four more times (versions 2..5) */
    pulled_row(s, 2, b, got);
    for (int k = 0; k < 4; k++) free(sparse_push(s, 2, 0, 0, &a, g, 1).raw);
    char dir[] = "/tmp/dg_ps_evictXXXXXX";
    cr_assert(mkdtemp(dir));
    cr_assert_eq(dg_ps_server_save(s, dir, 0, 1), 0, "%s", dg_last_error());
    cr_assert_eq(dg_ps_write_manifest(dir, 1), 0, "%s", dg_last_error());
    dg_ps_server *l = dg_ps_server_new(1);
    cr_assert_eq(dg_ps_server_load(l, dir, 0, 1), 0, "%s", dg_last_error());
    dg_ps_server *both[2] = { s, l };
    for (int k = 0; k < 2; k++) {
        unsigned char h[DG_PS_REQ_HEADER];
        dg_ps_req_header(h, DG_PS_OP_EVICT, 0, 0, 3);   /* table version 6: b (last used at 2) is 4 old */
        reply r = ask(both[k], h, sizeof h);
        cr_assert_eq(r.status, DG_PS_OK);
        cr_expect_eq(dg_ps_get64(r.payload), 1, "%s: dropped %llu rows", k ? "loaded" : "saved", (unsigned long long)dg_ps_get64(r.payload));
        free(r.raw);
        float ga[3], gb[3];
        free(sparse_push(both[k], 2, 0, 0, &b, g, 1).raw);   /* b starts over: counted once, not applied */
        pulled_row(both[k], 2, b, gb);
        cr_expect(gb[0] == 0 && gb[1] == 0 && gb[2] == 0, "an evicted row starts over below the threshold");
        pulled_row(both[k], 2, a, ga);
        if (k == 0) memcpy(got, ga, sizeof got);
        else cr_expect(memcmp(got, ga, sizeof got) == 0, "the loaded server's row differs from the saved one's");
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_expect_eq(system(cmd), 0);
    dg_ps_server_free(s);
    dg_ps_server_free(l);
    cr_expect_eq(dg_live_tensors(), 0);
}
