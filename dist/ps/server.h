/* dist/ps/server.h — a parameter server's state and its request handler (server.c). */
#ifndef DG_DIST_PS_SERVER_H
#define DG_DIST_PS_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dg_ps_server dg_ps_server;

/* A server for a job of n_workers workers, with no table yet (the first INIT of each makes it). */
dg_ps_server *dg_ps_server_new(int n_workers);
void dg_ps_server_free(dg_ps_server *s);
/* ps_internal.h's dg_ps_handler, with ctx = the server. */
int dg_ps_server_handle(void *ctx, const void *msg, size_t len, void **reply, size_t *reply_len);
/* Server index of count writes its tables to dir/server.<index>-of-<count>.safetensors; the
 * worker that asked writes dir/manifest after every server answered (dg_ps_write_manifest).
 * load: the tables of the save in dir that server index of count keeps (server_io.c). */
int dg_ps_server_save(dg_ps_server *s, const char *dir, int index, int count);
int dg_ps_write_manifest(const char *dir, int count);
int dg_ps_server_load(dg_ps_server *s, const char *dir, int index, int count);
/* Whether every worker has sent STOP. */
bool dg_ps_server_done(const dg_ps_server *s);

#ifdef __cplusplus
}
#endif
#endif
