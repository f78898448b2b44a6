/* dist/ps/transport.c — opens the ZeroMQ transport module for this process's job (transport.h):
 * the job token comes from DG_JOB_TOKEN, so that the servers of one job answer only its own
 * workers, as the rendezvous store does for collective jobs. */
#include "../dist_internal.h"
#include "transport.h"

dg_ps_transport *dg_ps_zmq_transport(int64_t max_msg_bytes) {
    char token[DG_STORE_MAX_TOKEN + 1];
    if (dg_dist_job_token(token, sizeof token)) return NULL;
    dg_ps_zmq_new_fn make = (dg_ps_zmq_new_fn)dg_module_symbol("zmq", DG_PS_ZMQ_ENTRY);
    if (!make) return NULL;   /* dg_module_symbol said which file and where */
    return make(max_msg_bytes, token);
}
