/* eager/error.c — the last-error slot (per thread) behind dg_last_error().
 *
 * The model. Every new failure (DG_ERR, dg_set_error_at) replaces the message and status, so
 * dg_last_error() describes the most recent failure on this thread, the way PyTorch and Paddle
 * raise at the failing call; a stale message from an earlier, unrelated failure never hides a
 * new one. The one exception is propagation: a call handed a NULL input (DG_CHECK_INPUT,
 * DG_CHECK_HANDLE, DG_PROPAGATE) takes the NULL to be the result of an earlier failed call and
 * keeps that call's message, recording its own ("input 'x' is NULL") only when this thread has
 * none, so a NULL passed down a chain of ops reports where the chain broke. A successful call
 * never clears the slot; dg_clear_error does.
 *
 * Each recorded failure also bumps a per-thread count (dg_error_count). Code that adds a
 * message only when a callee failed silently, or that wraps a callee's message in more context,
 * compares the count from before the call with the one after it instead of asking whether some
 * error is recorded: a recorded message may be an old one. Code that tries something and falls
 * back when it fails saves the slot first and restores it (dg_error_save/restore), so that a
 * failure it handled leaves no message behind for a later NULL to pick up. */
#include "internal.h"
#include <stdarg.h>

static _Thread_local char last_msg[DG_ERROR_MSG_LEN];
static _Thread_local int last_status;
static _Thread_local uint64_t n_recorded;

static void record(int status, const char *file, int line, const char *fmt, va_list ap) {
    int n = vsnprintf(last_msg, sizeof last_msg, fmt, ap);
    if (n < 0) n = 0;
    if ((size_t)n < sizeof last_msg)
        snprintf(last_msg + n, sizeof last_msg - (size_t)n, " (%s:%d)", file, line);
    last_status = status ? status : DG_EINVAL;
    n_recorded++;
}

void dg_set_error_at(int status, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    record(status, file, line, fmt, ap);
    va_end(ap);
}

void dg_propagate_error_at(int status, const char *file, int line, const char *fmt, ...) {
    if (last_status != 0) return;   /* the failure that produced the NULL already said why */
    va_list ap;
    va_start(ap, fmt);
    record(status, file, line, fmt, ap);
    va_end(ap);
}

void dg_error_append(const char *text) {
    size_t n = strlen(last_msg);
    if (last_status && n + 1 < sizeof last_msg) snprintf(last_msg + n, sizeof last_msg - n, "%s", text);
}

bool dg_has_error(void) { return last_status != 0; }
uint64_t dg_error_count(void) { return n_recorded; }
bool dg_error_since(uint64_t count) { return n_recorded != count; }
const char *dg_last_error(void) { return last_status ? last_msg : ""; }
int dg_last_status(void) { return last_status; }
void dg_clear_error(void) { last_status = 0; last_msg[0] = 0; }

void dg_error_save(dg_error_saved *s) {
    s->status = last_status;
    s->count = n_recorded;
    memcpy(s->msg, last_msg, sizeof s->msg);
}
/* The count goes back too: a caller that took it before the handled failure must not see one. */
void dg_error_restore(const dg_error_saved *s) {
    last_status = s->status;
    n_recorded = s->count;
    memcpy(last_msg, s->msg, sizeof last_msg);
}

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

int dg_params_check(const char *op, uint32_t tag, const char *default_fn) {
    if (tag == DG_PARAMS_TAG) return 0;
    DG_ERR(DG_EINVAL, "%s: the params were not made by %s() (params_tag is %#x): a literal leaves every field it does not "
           "name 0, not the default; start from %s() and set the fields that differ", op, default_fn, (unsigned)tag, default_fn);
    return DG_EINVAL;
}
