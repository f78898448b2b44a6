/* dist/ps/env.h — a parameter-server job's role environment: which role this process has
 * (server or worker), every server's endpoint, how many workers there are and which one this is,
 * read from either of the two naming schemes in use (dist/ps/env.c says which variables). */
#ifndef DG_DIST_PS_ENV_H
#define DG_DIST_PS_ENV_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DG_PS_MAX_SERVERS 4096
#define DG_PS_ENDPOINT_MAX 128   /* "ip:port" with its terminator */

typedef enum { DG_PS_WORKER = 0, DG_PS_SERVER = 1 } dg_ps_role;

typedef struct dg_ps_env {
    dg_ps_role role;
    int n_servers;
    char (*servers)[DG_PS_ENDPOINT_MAX]; /* server i's "ip:port", in the list's order (malloc'd) */
    int n_workers;
    int worker_id;                       /* a worker's index in [0, n_workers); -1 on a server */
    char current_ip[DG_PS_ENDPOINT_MAX]; /* this process's address ("" for a worker that was given none) */
    char current[DG_PS_ENDPOINT_MAX];    /* a server's own endpoint, "ip:port" ("" on a worker) */
    int server_index;                    /* a server's position in servers; -1 on a worker */
} dg_ps_env;

/* Fills *e from the environment: 0, or DG_EINVAL with a message naming the variable and its
 * value (both variables when the two schemes disagree). dg_ps_env_clear frees what it holds. */
int dg_ps_env_read(dg_ps_env *e);
void dg_ps_env_clear(dg_ps_env *e);

#ifdef __cplusplus
}
#endif
#endif
