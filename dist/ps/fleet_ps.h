/* dist/ps/fleet_ps.h — what dist/fleet.c asks of the parameter-server mode (fleet_ps.c). */
#ifndef DG_DIST_PS_FLEET_PS_H
#define DG_DIST_PS_FLEET_PS_H

#include <dygraph.h>

#ifdef __cplusplus
extern "C" {
#endif

/* fleet.init(is_collective=False): the role environment read and kept; idempotent. */
int dg_fleet_ps_init(const dg_fleet_strategy *st);
bool dg_fleet_ps_on(void);
int dg_fleet_ps_worker_index(void);   /* -1 on a server */
int dg_fleet_ps_worker_num(void);
/* Puts opt's dense parameters on the servers and makes its step remote. */
int dg_fleet_ps_distributed_optimizer(dg_optimizer *opt);
void dg_fleet_ps_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif
