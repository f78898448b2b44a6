/* dist/ps/transport.h — opening the parameter server's real transport: the ZeroMQ module
 * (dist/zmq/transport_zmq.c, libdygraph-zmq.so.0), which the core reaches only through
 * dg_module_symbol so that it never links libzmq. */
#ifndef DG_DIST_PS_TRANSPORT_H
#define DG_DIST_PS_TRANSPORT_H

#include "ps_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The module's entry, by name and type: a transport whose sockets take messages up to
 * max_msg_bytes, answering (server) or sending (worker) for the job job_token names. */
#define DG_PS_ZMQ_ENTRY "dg_ps_zmq_new"
typedef dg_ps_transport *(*dg_ps_zmq_new_fn)(int64_t max_msg_bytes, const char *job_token);

/* The default bound on one message: far above any pull or push of a sane table shard, far
 * below what would let one peer exhaust a server's memory. */
#define DG_PS_MAX_MSG_DEFAULT ((int64_t)1 << 30)

/* A ZeroMQ transport for this process's job (DG_JOB_TOKEN, checked as dg_dist_job_token does),
 * opening the module on first use; NULL with the error set (naming the module's file and where
 * it was looked for when it is missing). */
dg_ps_transport *dg_ps_zmq_transport(int64_t max_msg_bytes);

#ifdef __cplusplus
}
#endif
#endif
