/* test/test_dist.c — the distributed pieces inside one process: environment checks (every
 * misconfiguration is an error naming the variable), the rendezvous store (set/get/add/wait,
 * port in use, unreachable rank 0 within the timeout), the local communicator, and
 * DataParallel in a world of one (unused parameters, no_sync). Multi-process equivalence runs
 * in `make test-dist`. Criterion runs each test in its own process, so environment changes
 * and the fleet's globals do not leak between tests. */
#include "test_util.h"
#include "../dist/dist_internal.h"   /* dg_store_peek, the watchdog's read */
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static void clear_env(void) {
    const char *vars[] = { "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
                           "FLAGS_selected_gpus", "DG_JOB_TOKEN", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK" };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

/* A TCP port nobody listens on right now (bound, read back, released). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* A store served by this process on a free local port (rank 0's side). */
static dg_store *local_server(double timeout_s) {
    dg_store_params stp = dg_store_default_params();
    stp.host = "127.0.0.1";
    stp.port = free_port();
    stp.is_server = true;
    stp.timeout_s = timeout_s;
    dg_store *srv = dg_store_new(stp);
    cr_assert(srv, "%s", dg_last_error());
    return srv;
}

static void set_world(const char *rank, const char *num, const char *eps) {
    clear_env();
    setenv("PADDLE_TRAINER_ID", rank, 1);
    setenv("PADDLE_TRAINERS_NUM", num, 1);
    if (eps) setenv("PADDLE_TRAINER_ENDPOINTS", eps, 1);
}

static void expect_env_error(const char *needle) {
    dg_dist_env env;
    dg_clear_error();
    cr_assert_lt(dg_dist_env_read(&env), 0, "expected an error mentioning '%s'", needle);
    cr_assert(strstr(dg_last_error(), needle), "message '%s' should mention '%s'", dg_last_error(), needle);
    dg_clear_error();
}

/* The client reads the "id" the server set: "abc" and its NUL. */
static void expect_id_abc(dg_store *cli) {
    void *v = NULL;
    size_t n = 0;
    cr_assert_eq(dg_store_get(cli, "id", &v, &n), 0, "%s", dg_last_error());
    cr_assert_eq(n, 4);
    cr_assert_str_eq(v, "abc");
    free(v);
}

Test(dist_env, not_launched_is_a_world_of_one) {
    clear_env();
    dg_dist_env env;
    cr_assert_eq(dg_dist_env_read(&env), 0, "%s", dg_last_error());
    cr_assert_eq(env.rank, 0);
    cr_assert_eq(env.world_size, 1);
    cr_assert_not(env.launched);
    dg_dist_env_clear(&env);
    cr_assert_eq(dg_fleet_init(true, NULL), 0, "%s", dg_last_error());
    cr_assert_eq(dg_fleet_worker_num(), 1);
    cr_assert_eq(dg_fleet_worker_index(), 0);
    cr_assert(dg_fleet_is_first_worker());
    cr_assert_str_eq(dg_comm_backend_name(dg_fleet_comm()), "local");
    dg_fleet_shutdown();
}

Test(dist_env, launcher_variables_are_read_and_checked) {
    set_world("1", "2", "127.0.0.1:7001,127.0.0.1:7002");
    setenv("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:7002", 1);
    setenv("FLAGS_selected_gpus", "1", 1);
    dg_dist_env env;
    cr_assert_eq(dg_dist_env_read(&env), 0, "%s", dg_last_error());
    cr_assert_eq(env.rank, 1);
    cr_assert_eq(env.world_size, 2);
    cr_assert_eq(env.gpu, 1);
    cr_assert_str_eq(env.current_endpoint, "127.0.0.1:7002");
    char ep[64];
    cr_assert_eq(dg_dist_env_endpoint(&env, 0, ep, sizeof ep), 0);
    cr_assert_str_eq(ep, "127.0.0.1:7001");
    dg_dist_env_clear(&env);

    set_world("2", "2", "127.0.0.1:7001,127.0.0.1:7002");
    expect_env_error("PADDLE_TRAINER_ID=2 is not below PADDLE_TRAINERS_NUM=2");
    set_world("0", "2", NULL);
    expect_env_error("PADDLE_TRAINER_ENDPOINTS is missing");
    set_world("0", "3", "127.0.0.1:7001,127.0.0.1:7002");
    expect_env_error("has 2 endpoints but PADDLE_TRAINERS_NUM=3");
    set_world("x", "2", "127.0.0.1:7001,127.0.0.1:7002");
    expect_env_error("PADDLE_TRAINER_ID='x'");
    set_world("0", "2", "127.0.0.1,127.0.0.1:7002");
    expect_env_error("not ip:port");
    set_world("0", "2", "127.0.0.1:7001,127.0.0.1:7002");
    setenv("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:9999", 1);
    expect_env_error("PADDLE_CURRENT_ENDPOINT=127.0.0.1:9999");
    set_world("0", "1", NULL);
    setenv("FLAGS_selected_gpus", "abc", 1);
    expect_env_error("FLAGS_selected_gpus='abc'");
    /* fleet_init carries the message */
    set_world("5", "2", "127.0.0.1:7001,127.0.0.1:7002");
    cr_assert_lt(dg_fleet_init(true, NULL), 0);
    cr_assert(strstr(dg_last_error(), "PADDLE_TRAINER_ID=5"), "%s", dg_last_error());
    dg_clear_error();
    /* parameter-server mode reads its own variables and names the one missing */
    cr_assert_lt(dg_fleet_init(false, NULL), 0);
    cr_assert(strstr(dg_last_error(), "TRAINING_ROLE"), "%s", dg_last_error());
}

Test(dist_store, set_get_add_wait_in_one_process) {
    int port = free_port();
    dg_store_params stp = dg_store_default_params();
    stp.host = "127.0.0.1";
    stp.port = port;
    stp.is_server = true;
    stp.timeout_s = 5;
    dg_store *srv = dg_store_new(stp);
    cr_assert(srv, "%s", dg_last_error());
    dg_store_params stp2 = dg_store_default_params();
    stp2.host = "127.0.0.1";
    stp2.port = port;
    stp2.timeout_s = 5;
    dg_store *cli = dg_store_new(stp2);
    cr_assert(cli, "%s", dg_last_error());
    cr_assert_eq(dg_store_set(srv, "id", "abc", 4), 0, "%s", dg_last_error());
    expect_id_abc(cli);
    int64_t x = 0;
    cr_assert_eq(dg_store_add(cli, "count", 2, &x), 0);
    cr_assert_eq(x, 2);
    cr_assert_eq(dg_store_add(srv, "count", 3, &x), 0);
    cr_assert_eq(x, 5);
    cr_assert_eq(dg_store_wait_at_least(cli, "count", 5), 0, "%s", dg_last_error());
    dg_store_free(cli);
    dg_store_free(srv);
}

/* The watchdog's read: answers at once whether or not the key exists (a stopped rank never
 * writes its heartbeat, and waiting for it would be the hang the watchdog is there to end). */
Test(dist_store, peek_answers_at_once_for_an_absent_key) {
    dg_store *srv = local_server(30);
    void *v = NULL;
    size_t n = 0;
    bool found = true;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(dg_store_peek(srv, "hb/1", &v, &n, &found), 0, "%s", dg_last_error());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_assert(!found && !v && n == 0);
    cr_assert_lt((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9, 5.0);
    cr_assert_eq(dg_store_set(srv, "hb/1", "12.5 3 barrier", 15), 0);
    cr_assert_eq(dg_store_peek(srv, "hb/1", &v, &n, &found), 0, "%s", dg_last_error());
    cr_assert(found && n == 15 && memcmp(v, "12.5 3 barrier", 15) == 0);
    free(v);
    dg_store_free(srv);
}

Test(dist_store, waiting_for_a_key_nobody_sets_times_out) {
    dg_store *srv = local_server(1);
    void *v = NULL;
    size_t n = 0;
    time_t t0 = time(NULL);
    cr_assert_eq(dg_store_get(srv, "never", &v, &n), DG_ETIMEOUT);
    cr_assert_leq(time(NULL) - t0, 5);
    cr_assert(strstr(dg_last_error(), "never"), "%s", dg_last_error());
    dg_clear_error();
    dg_store_free(srv);
}

Test(dist_store, port_in_use_is_an_error) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
    socklen_t len = sizeof a;
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    int port = ntohs(a.sin_port);
    dg_store_params stp4 = dg_store_default_params();
    stp4.host = "127.0.0.1";
    stp4.port = port;
    stp4.is_server = true;
    stp4.timeout_s = 1;
    cr_assert_null(dg_store_new(stp4));
    cr_assert(strstr(dg_last_error(), "cannot listen"), "%s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "in use"), "%s", dg_last_error());
    dg_clear_error();
    /* the same through fleet_init on rank 0 */
    char eps[64];
    snprintf(eps, sizeof eps, "127.0.0.1:%d,127.0.0.1:%d", port, free_port());
    set_world("0", "2", eps);
    setenv("DG_DIST_TIMEOUT", "1", 1);
    cr_assert_lt(dg_fleet_init(true, NULL), 0);
    cr_assert(strstr(dg_last_error(), "cannot listen"), "%s", dg_last_error());
    close(fd);
}

/* A store of one job and clients of another: the foreign client is refused at its hello, with the
 * endpoint and its rank in the message, and the store goes on serving its own job's clients. */
Test(dist_store, a_client_with_another_jobs_token_is_refused_and_the_right_one_served) {
    int port = free_port();
    char where[32];
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    dg_store_params sp = dg_store_default_params();
    sp.host = "127.0.0.1";
    sp.port = port;
    sp.is_server = true;
    sp.timeout_s = 5;
    sp.token = "0123456789abcdef0123456789abcdef";
    sp.rank = 0;
    dg_store *srv = dg_store_new(sp);
    cr_assert(srv, "%s", dg_last_error());
    cr_assert_eq(dg_store_set(srv, "id", "abc", 4), 0, "%s", dg_last_error());

    dg_store_params cp = sp;
    cp.is_server = false;
    cp.rank = 1;
    const char *wrong[] = { "0123456789abcdef0123456789abcdee", "0123456789abcdef", "", NULL };
    for (int i = 0; i < 4; i++) {
        cp.token = wrong[i];
        dg_clear_error();
        time_t t0 = time(NULL);
        cr_assert_null(dg_store_new(cp), "token '%s' should be refused", wrong[i] ? wrong[i] : "(NULL)");
        cr_assert_leq(time(NULL) - t0, 2, "a refusal is final, not retried until the timeout");
        cr_assert_eq(dg_last_status(), DG_ECOMM);
        const char *m = dg_last_error();
        cr_assert(strstr(m, where) && strstr(m, "belongs to another job") && strstr(m, "rank 1"), "%s", m);
    }
    dg_clear_error();

    cp.token = sp.token;
    dg_store *cli = dg_store_new(cp);
    cr_assert(cli, "%s", dg_last_error());
    expect_id_abc(cli);
    int64_t x = 0;
    cr_assert_eq(dg_store_add(cli, "count", 2, &x), 0, "%s", dg_last_error());
    cr_assert_eq(dg_store_add(srv, "count", 1, &x), 0, "%s", dg_last_error());
    cr_assert_eq(x, 3, "the refused clients changed nothing");
    dg_store_free(cli);
    dg_store_free(srv);
}

Test(dist_store, tokens_are_checked_before_use) {
    dg_store_params sp = dg_store_default_params();
    sp.host = "127.0.0.1";
    sp.port = free_port();
    sp.timeout_s = 1;
    char long_token[DG_STORE_MAX_TOKEN + 2];
    memset(long_token, 'a', sizeof long_token - 1);
    long_token[sizeof long_token - 1] = 0;
    sp.token = long_token;
    cr_assert_null(dg_store_new(sp));
    cr_assert(strstr(dg_last_error(), "job token"), "%s", dg_last_error());
    dg_clear_error();
    /* the rendezvous names the variable */
    char eps[64];
    snprintf(eps, sizeof eps, "127.0.0.1:%d,127.0.0.1:%d", free_port(), free_port());
    set_world("1", "2", eps);
    setenv("DG_DIST_TIMEOUT", "1", 1);
    setenv("DG_JOB_TOKEN", "abc def", 1);
    cr_assert_lt(dg_fleet_init(true, NULL), 0);
    cr_assert(strstr(dg_last_error(), "DG_JOB_TOKEN"), "%s", dg_last_error());
}

/* The store listens on its endpoint's own address only, so an endpoint that is no address of
 * this machine cannot be served (before, the store took every interface and never noticed). */
Test(dist_store, the_server_listens_on_the_endpoints_own_address) {
    dg_store_params sp = dg_store_default_params();
    sp.host = "192.0.2.1";   /* TEST-NET-1: never assigned to a machine */
    sp.port = free_port();
    sp.is_server = true;
    sp.timeout_s = 1;
    sp.rank = 0;
    cr_assert_null(dg_store_new(sp));
    cr_assert(strstr(dg_last_error(), "rank 0 cannot listen on 192.0.2.1:") && strstr(dg_last_error(), "address of this machine"),
              "%s", dg_last_error());
}

Test(dist_store, unreachable_rank0_fails_within_the_timeout) {
    char eps[64];
    int port = free_port();
    snprintf(eps, sizeof eps, "127.0.0.1:%d,127.0.0.1:%d", port, free_port());
    set_world("1", "2", eps);
    setenv("DG_DIST_TIMEOUT", "1", 1);
    time_t t0 = time(NULL);
    cr_assert_eq(dg_fleet_init(true, NULL), DG_ETIMEOUT, "%s", dg_last_error());
    cr_assert_leq(time(NULL) - t0, 5);
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    cr_assert(strstr(dg_last_error(), want) && strstr(dg_last_error(), "not reachable"), "%s", dg_last_error());
}

Test(dist_store, a_missing_rank_fails_every_present_rank) {
    /* rank 0 of 2 alone: it serves, checks in, and waits for rank 1 until the timeout */
    char eps[64];
    snprintf(eps, sizeof eps, "127.0.0.1:%d,127.0.0.1:%d", free_port(), free_port());
    set_world("0", "2", eps);
    setenv("DG_DIST_TIMEOUT", "1", 1);
    cr_assert_eq(dg_fleet_init(true, NULL), DG_ETIMEOUT, "%s", dg_last_error());
    cr_assert(strstr(dg_last_error(), "not every rank arrived"), "%s", dg_last_error());
}

Test(dist_comm, local_world_collectives) {
    clear_env();
    dg_scope *sc = dg_scope_begin();
    dg_comm *c = dg_comm_new(dg_comm_default_params());
    cr_assert(c, "%s", dg_last_error());
    cr_assert_eq(dg_comm_size(c), 1);
    dg_tensor *t = dg_arange(0, 6, 1, DG_F32);
    cr_assert_eq(dg_comm_all_reduce(c, t, DG_COMM_AVG), 0, "%s", dg_last_error());
    cr_assert_eq(dg_comm_broadcast(c, t, 0), 0);
    cr_assert_float_eq(dg_item(dg_sum_all(t)), 15.0f, 0);
    dg_tensor *g = dg_comm_all_gather(c, t);
    cr_assert(g, "%s", dg_last_error());
    cr_assert_eq(dg_ndim(g), 2);
    cr_assert_eq(dg_dim(g, 0), 1);
    cr_assert_float_eq(dg_item(dg_sum_all(g)), 15.0f, 0);
    cr_assert_lt(dg_comm_broadcast(c, t, 3), 0, "root outside the world");
    dg_clear_error();
    dg_tensor *v = dg_transpose(dg_reshape(t, DG_SHAPE(2, 3)), 0, 1);
    cr_assert_lt(dg_comm_all_reduce(c, v, DG_COMM_SUM), 0, "a non-contiguous view is refused");
    cr_assert(strstr(dg_last_error(), "contiguous"), "%s", dg_last_error());
    dg_clear_error();
    cr_assert_eq(dg_comm_barrier(c), 0);
    dg_comm_free(c);
    dg_scope_end(sc);
}

static dg_tensor *first_only(dg_layer *self, const dg_tensor *x) {
    return dg_forward(dg_layer_child(self, 0), x);   /* the second Linear never runs */
}

Test(dist_dp, world_of_one_unused_parameters_and_no_sync) {
    clear_env();
    cr_assert_eq(dg_fleet_init(true, NULL), 0, "%s", dg_last_error());
    static const dg_layer_class two_heads_class = DG_LAYER_CLASS("TwoHeads");
    dg_layer *net = dg_layer_new(&two_heads_class, first_only, NULL, NULL);
    cr_assert_eq(dg_layer_add_sublayer(net, "a", dg_nn_linear(4, 2)), 0);
    cr_assert_eq(dg_layer_add_sublayer(net, "b", dg_nn_linear(4, 2)), 0);
    dg_layer *dp = dg_fleet_distributed_model(dg_layer_ref(net));
    cr_assert(dp, "%s", dg_last_error());
    cr_assert_eq(dg_dp_module(dp), net);
    dg_scope *s = dg_scope_begin();
    dg_tensor *loss = dg_mean_all(dg_forward(dp, dg_randn(DG_SHAPE(3, 4), DG_F32)));
    dg_tensor *scaled = dg_dp_scale_loss(dp, loss);
    cr_assert_float_eq(dg_item(scaled), dg_item(loss), 0, "world of one: scale 1");
    cr_assert_eq(dg_backward(scaled), 0);
    cr_assert_eq(dg_dp_apply_collective_grads(dp), DG_ESTATE);
    cr_assert(strstr(dg_last_error(), "'b.weight'") || strstr(dg_last_error(), "'_layers.b.weight'"), "%s", dg_last_error());
    dg_clear_error();
    /* no_sync: apply is a no-op */
    cr_assert_eq(dg_dp_no_sync(dp, true), 0);
    cr_assert_eq(dg_dp_apply_collective_grads(dp), 0);
    cr_assert_eq(dg_dp_no_sync(dp, false), 0);
    dg_scope_end(s);
    dg_layer_free(dp);
    /* find_unused_parameters accepts the skipped head */
    dg_dp_params dpp = dg_dp_default_params();
    dpp.find_unused_parameters = true;
    dg_layer *dp2 = dg_data_parallel(dg_layer_ref(net), dg_fleet_comm(), dpp);
    cr_assert(dp2, "%s", dg_last_error());
    dg_layer_clear_gradients(net);
    s = dg_scope_begin();
    cr_assert_eq(dg_backward(dg_mean_all(dg_forward(dp2, dg_randn(DG_SHAPE(3, 4), DG_F32)))), 0);
    cr_assert_eq(dg_dp_apply_collective_grads(dp2), 0, "%s", dg_last_error());
    dg_scope_end(s);
    cr_assert_null(dg_dp_comm(net), "not a DataParallel");
    dg_clear_error();
    dg_layer_free(dp2);
    dg_layer_free(net);
    dg_fleet_shutdown();
}

/* Parameter-server strategy fields are checked before the environment: geo mode's k_steps needs
 * sync_mode false and may not be negative. */
Test(dist_env, ps_strategy_k_steps_is_checked) {
    dg_fleet_strategy st = dg_fleet_default_strategy();
    st.k_steps = 4;   /* sync_mode still true */
    cr_assert_lt(dg_fleet_init(false, &st), 0);
    cr_assert(strstr(dg_last_error(), "k_steps 4") && strstr(dg_last_error(), "sync_mode false"), "%s", dg_last_error());
    dg_clear_error();
    st.sync_mode = false;
    st.k_steps = -1;
    cr_assert_lt(dg_fleet_init(false, &st), 0);
    cr_assert(strstr(dg_last_error(), "k_steps must be >= 0"), "%s", dg_last_error());
    dg_fleet_shutdown();
}

/* The collective guide's Local SGD schedules, against its Python run on the same inputs. */
Test(dist_env, local_sgd_schedules_are_the_guides) {
    const int ks[5] = { 1, 2, 3, 4, 8 };
    const int want[5][8] = { { 1, 1, 1, 1, 1, 1, 1, 1 }, { 1, 1, 1, 2, 2, 2, 2, 2 }, { 1, 1, 1, 2, 3, 3, 3, 3 },
                             { 1, 1, 1, 2, 4, 4, 4, 4 }, { 1, 1, 1, 2, 4, 8, 8, 8 } };
    for (int k = 0; k < 5; k++)
        for (int p = 0; p < 8; p++)
            cr_expect_eq(dg_fleet_get_local_sgd_steps(p, ks[k], 2), want[k][p], "K %d pass %d", ks[k], p);
    /* adaptive_local_step(2.3, 0.1, loss, lr, base 4, previous K) over a falling loss and lr */
    const double loss[11] = { 2.3, 1.9, 1.5, 1.2, 1.0, 0.9, 0.8, 0.7, 0.65, 0.61, 0.605 };
    const double lr[11] = { 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.01, 0.01, 0.01, 0.001, 0.001 };
    const int seq[11] = { 4, 3, 2, 3, 2, 2, 4, 3, 2, 3, 2 };
    int pre = 1;
    for (int i = 0; i < 11; i++) {
        int k = dg_fleet_adaptive_local_step(2.3, 0.1, loss[i], lr[i], 4, pre);
        cr_expect_eq(k, seq[i], "step %d: K %d, the guide's %d", i, k, seq[i]);
        pre = k;
    }
    cr_expect_eq(dg_fleet_adaptive_local_step(2.3, 0.1, 0.5, 0.1, 4, 3), 1, "a loss under the floor");
    cr_expect_eq(dg_fleet_adaptive_local_step(2.3, 0.1, 2.3, 1e-9, 4, 3), 3, "a jump of more than 20 keeps the previous K");
}
