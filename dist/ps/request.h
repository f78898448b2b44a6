/* dist/ps/request.h — a worker's requests to one server (request.c), shared by its dense and
 * sparse tables (client.c, client_sparse.c). */
#ifndef DG_DIST_PS_REQUEST_H
#define DG_DIST_PS_REQUEST_H

#include "ps_internal.h"
#include <stddef.h>
#include <stdint.h>

/* One request to server s over tr: the reply's status, table version and payload (malloc'd,
 * the caller frees it and reads from DG_PS_REPLY_HEADER on; NULL payload: dropped). A reply that
 * is no parameter-server reply, or an ERROR reply, is an error naming `what` and the server. */
int dg_ps_ask(dg_ps_transport *tr, double timeout_s, int s, const unsigned char *msg, size_t len, const char *what, int *status,
              uint64_t *version, unsigned char **payload, size_t *plen);
/* The same for a request that may have to wait for table version `want`: asked again, with the
 * peer backoff, while the server answers NOT_YET, until timeout_s. */
int dg_ps_ask_when_ready(dg_ps_transport *tr, double timeout_s, int s, const unsigned char *msg, size_t len, const char *what,
                         uint32_t table, int worker, uint64_t want, uint64_t *version, unsigned char **payload, size_t *plen);

#endif
