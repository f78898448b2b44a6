/* test/dist/workers/env_worker.c — a worker for launcher_test.sh that prints the trainer
 * environment dgrun gave it, so the test can check every rank's view of the world. In a
 * parameter-server job (TRAINING_ROLE set) it prints that job's variables instead; a server has
 * no PADDLE_TRAINER_ID, and with `fail-server N` server N exits 3 (a failing server). */
#include "worker_env.h"
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static const char *get(const char *name) {
    const char *v = getenv(name);
    return v ? v : "<unset>";
}

static int ps_main(int argc, char **argv) {
    static const char *names[] = {"TRAINING_ROLE", "PADDLE_TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST",
                                  "PADDLE_PSERVER_IPS", "PADDLE_PSERVER_PORT", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINERS",
                                  "PADDLE_TRAINER_ID", "POD_IP", "PADDLE_CURRENT_IP", "PADDLE_PORT", "DG_JOB_TOKEN",
                                  "PADDLE_TRAINER_ENDPOINTS"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) printf("%s=%s\n", names[i], get(names[i]));
    fflush(stdout);
    bool server = !strcmp(get("TRAINING_ROLE"), "PSERVER");
    if (server && argc >= 3 && !strcmp(argv[1], "fail-server")) {
        /* this server's index: where its ip:port stands in the list */
        char me[160], list[4096];
        snprintf(me, sizeof me, "%s:%s", get("POD_IP"), get("PADDLE_PORT"));
        snprintf(list, sizeof list, "%s", get("PADDLE_PSERVERS_IP_PORT_LIST"));
        int i = 0;
        for (char *save = NULL, *ep = strtok_r(list, ",", &save); ep; ep = strtok_r(NULL, ",", &save), i++)
            if (!strcmp(ep, me) && i == atoi(argv[2])) return 3;
    }
    /* a server that never ends on its own: the launcher's grace period must stop it */
    if (server && argc >= 2 && !strcmp(argv[1], "hang-server")) for (;;) pause();
    return 0;
}

int main(int argc, char **argv) {
    if (getenv("TRAINING_ROLE")) return ps_main(argc, argv);
    if (!expect_rank("env_worker", NULL, NULL)) return 2;
    static const char *names[] = {"PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
                                  "PADDLE_CURRENT_ENDPOINT", "PADDLE_LOCAL_RANK", "FLAGS_selected_gpus", "DG_JOB_TOKEN"};
    printf("rank: %s\n", get("PADDLE_TRAINER_ID"));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) printf("%s=%s\n", names[i], get(names[i]));
    for (int i = 1; i < argc; i++) printf("arg%d=%s\n", i, argv[i]);
    return fflush(stdout) == 0 ? 0 : 1;
}
