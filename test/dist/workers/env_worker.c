/* test/dist/workers/env_worker.c — a worker for launcher_test.sh that prints the trainer
 * environment dgrun gave it, so the test can check every rank's view of the world. */
#include "worker_env.h"

static const char *get(const char *name) {
    const char *v = getenv(name);
    return v ? v : "<unset>";
}

int main(int argc, char **argv) {
    if (!expect_rank("env_worker", NULL, NULL)) return 2;
    static const char *names[] = {"PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS",
                                  "PADDLE_CURRENT_ENDPOINT", "PADDLE_LOCAL_RANK", "FLAGS_selected_gpus", "DG_JOB_TOKEN"};
    printf("rank: %s\n", get("PADDLE_TRAINER_ID"));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) printf("%s=%s\n", names[i], get(names[i]));
    for (int i = 1; i < argc; i++) printf("arg%d=%s\n", i, argv[i]);
    return fflush(stdout) == 0 ? 0 : 1;
}
