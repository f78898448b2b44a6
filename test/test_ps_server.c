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

static reply init(dg_ps_server *s, uint32_t worker, uint32_t workers, bool sync, const float *v, int n, double lr) {
    unsigned char msg[DG_PS_REQ_HEADER + DG_PS_INIT_BYTES + 64 * sizeof(float)];
    dg_ps_req_header(msg, DG_PS_OP_INIT, 0, worker, 0);
    dg_ps_init_msg m = { .total = (uint64_t)n, .offset = 0, .len = (uint64_t)n, .n_workers = workers, .sync = sync,
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
    reply r = init(s, 1, 2, true, v, 3, 0.5);
    cr_assert_eq(r.status, DG_PS_OK);
    free(r.raw);
    r = init(s, 0, 2, true, (float[3]){ 9, 9, 9 }, 3, 0.5);   /* the second INIT changes nothing */
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
    free(init(s, 0, 2, false, v, 2, 0.25).raw);
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
    reply r = init(s, 0, 3, true, v, 2, 0.1);
    cr_expect(says(&r, "the worker counts 3 workers, this server 2"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = push(s, 0, 0, v, 2);
    cr_expect(says(&r, "never initialised"), "%.*s", (int)r.len, r.payload);
    free(r.raw);
    r = pull(s, 0, 0);
    cr_expect_eq(r.status, DG_PS_NOT_YET, "a table whose INIT has not come yet");
    free(r.raw);
    free(init(s, 0, 2, true, v, 2, 0.1).raw);
    r = init(s, 1, 2, true, v, 2, 0.2);
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

/* Random bytes, and every prefix and single-byte change of valid requests: always a reply (an
 * error one where the bytes make no sense), never a crash or a table changed by garbage. */
Test(ps_server, hostile_bytes_get_an_error_reply) {
    dg_ps_server *s = dg_ps_server_new(2);
    const float v[4] = { 1, 2, 3, 4 };
    free(init(s, 0, 2, false, v, 4, 0.1).raw);
    uint64_t x = 0x2545F4914F6CDD1Dull;
    unsigned char buf[512];
    for (int it = 0; it < 20000; it++) {
        size_t n = 0;
        if (it % 2) {   /* a valid request, cut or with one byte changed */
            int op = 1 + it % 4;
            dg_ps_req_header(buf, (uint16_t)(op == 4 ? DG_PS_OP_PULL : op), 0, (uint32_t)(it % 2), 0);
            n = DG_PS_REQ_HEADER + (op == DG_PS_OP_PUSH ? sizeof v : op == DG_PS_OP_INIT ? DG_PS_INIT_BYTES + sizeof v : 0);
            memset(buf + DG_PS_REQ_HEADER, 0, n - DG_PS_REQ_HEADER);
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
