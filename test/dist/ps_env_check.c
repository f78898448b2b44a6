/* test/dist/ps_env_check.c — for launcher_test.sh: reads the parameter-server role environment
 * dgrun gave this process with dist/ps/env.c, as a real server or worker would, and prints what
 * it understood (or the error), so the test checks that the launcher and the reader agree. */
#include <dygraph.h>
#include "../../dist/ps/env.h"
#include <stdio.h>
#include <stdlib.h>

/* a failed assertion prints what launcher_test.sh looks for and exits 1 */
#define ENV_ASSERT(cond) do { if (!(cond)) { printf("ps_env_check: error: %s\n", dg_last_error()); exit(1); } } while (0)

int main(void) {
    dg_ps_env e;
    ENV_ASSERT(dg_ps_env_read(&e) == 0);
    printf("role=%s\nservers=%d\nworkers=%d\nworker_id=%d\nserver_index=%d\ncurrent=%s\n",
           e.role == DG_PS_SERVER ? "server" : "worker", e.n_servers, e.n_workers, e.worker_id, e.server_index, e.current);
    for (int i = 0; i < e.n_servers; i++) printf("server%d=%s\n", i, e.servers[i]);
    dg_ps_env_clear(&e);
    return fflush(stdout) == 0 ? 0 : 1;
}
