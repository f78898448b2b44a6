/* test/test_ps_env.c — a parameter-server job's role environment (dist/ps/env.c): both naming
 * schemes alone and together, and every inconsistency an error naming the variable and value.
 * Criterion runs each test in a process of its own, so setenv here touches no other test. */
#include "test_util.h"
#include "../dist/ps/env.h"

static void clear_all(void) {
    static const char *vars[] = {"TRAINING_ROLE", "PADDLE_TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST",
                                 "PADDLE_PSERVER_IPS", "PADDLE_PSERVER_PORT", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINERS",
                                 "PADDLE_TRAINER_ID", "POD_IP", "PADDLE_CURRENT_IP", "PADDLE_PORT"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

/* Reading must fail with DG_EINVAL and a message holding every one of the given pieces. */
static void expect_error(const char *a, const char *b) {
    dg_ps_env e;
    int rc = dg_ps_env_read(&e);
    cr_assert_eq(rc, DG_EINVAL, "expected an error mentioning '%s', got rc %d", a, rc);
    cr_assert(strstr(dg_last_error(), a), "'%s' not in: %s", a, dg_last_error());
    if (b) cr_assert(strstr(dg_last_error(), b), "'%s' not in: %s", b, dg_last_error());
    cr_assert_null(e.servers);
    dg_clear_error();
}

/* Paddle's launcher: a server of two */
static void launcher_server(void) {
    clear_all();
    setenv("TRAINING_ROLE", "PSERVER", 1);
    setenv("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:6001,127.0.0.1:6002", 1);
    setenv("PADDLE_TRAINERS_NUM", "3", 1);
    setenv("POD_IP", "127.0.0.1", 1);
    setenv("PADDLE_PORT", "6002", 1);
}

/* the tutorial's: a worker */
static void tutorial_worker(void) {
    clear_all();
    setenv("PADDLE_TRAINING_ROLE", "TRAINER", 1);
    setenv("PADDLE_PSERVER_IPS", "10.0.0.1,10.0.0.2", 1);
    setenv("PADDLE_PSERVER_PORT", "6174", 1);
    setenv("PADDLE_TRAINERS", "2", 1);
    setenv("PADDLE_TRAINER_ID", "1", 1);
}

Test(ps_env, launcher_names_server) {
    launcher_server();
    dg_ps_env e;
    cr_assert_eq(dg_ps_env_read(&e), 0, "%s", dg_last_error());
    cr_assert_eq(e.role, DG_PS_SERVER);
    cr_assert_eq(e.n_servers, 2);
    cr_assert_str_eq(e.servers[0], "127.0.0.1:6001");
    cr_assert_str_eq(e.servers[1], "127.0.0.1:6002");
    cr_assert_eq(e.n_workers, 3);
    cr_assert_eq(e.worker_id, -1);
    cr_assert_str_eq(e.current, "127.0.0.1:6002");
    cr_assert_eq(e.server_index, 1);
    dg_ps_env_clear(&e);
    cr_assert_null(e.servers);
}

Test(ps_env, tutorial_names_worker) {
    tutorial_worker();
    dg_ps_env e;
    cr_assert_eq(dg_ps_env_read(&e), 0, "%s", dg_last_error());
    cr_assert_eq(e.role, DG_PS_WORKER);
    cr_assert_eq(e.n_servers, 2);
    cr_assert_str_eq(e.servers[1], "10.0.0.2:6174");
    cr_assert_eq(e.n_workers, 2);
    cr_assert_eq(e.worker_id, 1);
    cr_assert_eq(e.server_index, -1);
    cr_assert_str_eq(e.current, "");
    dg_ps_env_clear(&e);
}

Test(ps_env, tutorial_names_server) {
    tutorial_worker();
    setenv("PADDLE_TRAINING_ROLE", "PSERVER", 1);
    unsetenv("PADDLE_TRAINER_ID");
    setenv("PADDLE_CURRENT_IP", "10.0.0.1", 1);   /* the port is PADDLE_PSERVER_PORT's */
    dg_ps_env e;
    cr_assert_eq(dg_ps_env_read(&e), 0, "%s", dg_last_error());
    cr_assert_eq(e.role, DG_PS_SERVER);
    cr_assert_str_eq(e.current, "10.0.0.1:6174");
    cr_assert_eq(e.server_index, 0);
    dg_ps_env_clear(&e);
}

/* what dgrun exports: both schemes at once, agreeing */
Test(ps_env, both_schemes_agreeing) {
    launcher_server();
    setenv("PADDLE_TRAINING_ROLE", "PSERVER", 1);
    setenv("PADDLE_TRAINERS", "3", 1);
    setenv("PADDLE_CURRENT_IP", "127.0.0.1", 1);
    dg_ps_env e;
    cr_assert_eq(dg_ps_env_read(&e), 0, "%s", dg_last_error());
    cr_assert_eq(e.server_index, 1);
    dg_ps_env_clear(&e);
    /* one shared port: the tutorial's pair names the same servers as the list */
    setenv("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:6002,127.0.0.2:6002", 1);
    setenv("PADDLE_PSERVER_IPS", "127.0.0.1,127.0.0.2", 1);
    setenv("PADDLE_PSERVER_PORT", "6002", 1);
    cr_assert_eq(dg_ps_env_read(&e), 0, "%s", dg_last_error());
    cr_assert_eq(e.n_servers, 2);
    cr_assert_eq(e.server_index, 0);
    dg_ps_env_clear(&e);
}

Test(ps_env, schemes_disagreeing_name_both) {
    launcher_server();
    setenv("PADDLE_TRAINING_ROLE", "TRAINER", 1);
    expect_error("TRAINING_ROLE='PSERVER'", "PADDLE_TRAINING_ROLE='TRAINER'");
    launcher_server();
    setenv("PADDLE_TRAINERS", "4", 1);
    expect_error("PADDLE_TRAINERS_NUM='3'", "PADDLE_TRAINERS='4'");
    launcher_server();
    setenv("PADDLE_CURRENT_IP", "127.0.0.2", 1);
    expect_error("PADDLE_CURRENT_IP='127.0.0.2'", "POD_IP='127.0.0.1'");
    launcher_server();
    setenv("PADDLE_PSERVER_PORT", "6001", 1);
    expect_error("PADDLE_PORT='6002'", "PADDLE_PSERVER_PORT='6001'");
    launcher_server();
    setenv("PADDLE_PSERVER_IPS", "127.0.0.1,127.0.0.3", 1);
    setenv("PADDLE_PSERVER_PORT", "6002", 1);
    unsetenv("PADDLE_PORT");
    expect_error("PADDLE_PSERVERS_IP_PORT_LIST='127.0.0.1:6001,127.0.0.1:6002'", "PADDLE_PSERVER_IPS='127.0.0.1,127.0.0.3'");
}

Test(ps_env, unknown_or_missing_role) {
    launcher_server();
    setenv("TRAINING_ROLE", "HETER_TRAINER", 1);
    expect_error("TRAINING_ROLE='HETER_TRAINER'", "PSERVER or TRAINER");
    launcher_server();
    unsetenv("TRAINING_ROLE");
    setenv("PADDLE_TRAINING_ROLE", "pserver", 1);
    expect_error("PADDLE_TRAINING_ROLE='pserver'", NULL);
    launcher_server();
    unsetenv("TRAINING_ROLE");
    expect_error("TRAINING_ROLE", "PADDLE_TRAINING_ROLE");
}

Test(ps_env, server_list_errors) {
    launcher_server();
    unsetenv("PADDLE_PSERVERS_IP_PORT_LIST");
    expect_error("PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_PSERVER_IPS");
    launcher_server();
    setenv("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:6001,127.0.0.1:70000", 1);
    expect_error("PADDLE_PSERVERS_IP_PORT_LIST='127.0.0.1:6001,127.0.0.1:70000'", "'127.0.0.1:70000'");
    launcher_server();
    setenv("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:6001,,127.0.0.1:6002", 1);
    expect_error("PADDLE_PSERVERS_IP_PORT_LIST", "is not ip:port");
    launcher_server();
    setenv("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1", 1);
    expect_error("PADDLE_PSERVERS_IP_PORT_LIST='127.0.0.1'", NULL);
    launcher_server();
    setenv("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:6002,127.0.0.1:6001,127.0.0.1:6002", 1);
    expect_error("lists 127.0.0.1:6002 twice", "PADDLE_PSERVERS_IP_PORT_LIST");
    tutorial_worker();
    unsetenv("PADDLE_PSERVER_PORT");
    expect_error("PADDLE_PSERVER_IPS='10.0.0.1,10.0.0.2'", "PADDLE_PSERVER_PORT");
    tutorial_worker();
    setenv("PADDLE_PSERVER_PORT", "0", 1);
    expect_error("PADDLE_PSERVER_PORT='0'", NULL);
    tutorial_worker();
    setenv("PADDLE_PSERVER_IPS", "10.0.0.1,10.0.0.1", 1);
    expect_error("PADDLE_PSERVER_IPS", "10.0.0.1:6174 twice");
}

Test(ps_env, worker_id_and_count) {
    tutorial_worker();
    setenv("PADDLE_TRAINER_ID", "2", 1);
    expect_error("PADDLE_TRAINER_ID='2'", "[0, 2)");
    tutorial_worker();
    setenv("PADDLE_TRAINER_ID", "-1", 1);
    expect_error("PADDLE_TRAINER_ID='-1'", NULL);
    tutorial_worker();
    unsetenv("PADDLE_TRAINER_ID");
    expect_error("PADDLE_TRAINER_ID is missing", NULL);
    tutorial_worker();
    setenv("PADDLE_TRAINERS", "0", 1);
    expect_error("PADDLE_TRAINERS='0'", NULL);
    tutorial_worker();
    unsetenv("PADDLE_TRAINERS");
    expect_error("PADDLE_TRAINERS_NUM", "PADDLE_TRAINERS");
}

Test(ps_env, server_endpoint_errors) {
    launcher_server();
    setenv("PADDLE_PORT", "6003", 1);
    expect_error("127.0.0.1:6003", "is not in the server list PADDLE_PSERVERS_IP_PORT_LIST");
    launcher_server();
    setenv("PADDLE_PORT", "x6002", 1);
    expect_error("PADDLE_PORT='x6002'", NULL);
    launcher_server();
    unsetenv("PADDLE_PORT");
    expect_error("PADDLE_PORT", "PADDLE_PSERVER_PORT");
    launcher_server();
    unsetenv("POD_IP");
    expect_error("PADDLE_CURRENT_IP", "POD_IP");
    launcher_server();
    setenv("POD_IP", "127.0.0.1 ", 1);
    expect_error("POD_IP='127.0.0.1 '", NULL);
}
