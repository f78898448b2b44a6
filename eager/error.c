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

/* Splits a trailing " (file:line)" that DG_ERR appended off msg, so a message re-raised with more
 * context keeps one location, the innermost. Returns false when there is none. */
bool dg_error_split_location(char *msg, const char **file, int *line) {
    size_t n = strlen(msg);
    if (n < 5 || msg[n - 1] != ')') return false;
    char *open = NULL;
    for (char *p = msg + n - 1; p > msg; p--)
        if (p[0] == '(' && p[-1] == ' ') { open = p; break; }
    if (!open) return false;
    char *colon = strrchr(open, ':');
    if (!colon || colon == open + 1 || colon[1] == ')') return false;
    for (char *d = colon + 1; d < msg + n - 1; d++) if (*d < '0' || *d > '9') return false;
    *line = atoi(colon + 1);
    *colon = 0;
    *file = open + 1;
    open[-1] = 0;
    return true;
}
