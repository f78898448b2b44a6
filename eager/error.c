/* eager/error.c — the last-error slot (per thread) behind dg_last_error(). The first message
 * since the last clear wins, so a NULL passed down a chain of ops reports where it started. */
#include "internal.h"
#include <stdarg.h>

static _Thread_local char last_msg[1024];
static _Thread_local int last_status;

void dg_set_error_at(int status, const char *file, int line, const char *fmt, ...) {
    if (last_status != 0) return;  /* keep the first error */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof last_msg)
        snprintf(last_msg + n, sizeof last_msg - (size_t)n, " (%s:%d)", file, line);
    last_status = status ? status : DG_EINVAL;
}

bool dg_has_error(void) { return last_status != 0; }
const char *dg_last_error(void) { return last_status ? last_msg : ""; }
int dg_last_status(void) { return last_status; }
void dg_clear_error(void) { last_status = 0; last_msg[0] = 0; }
