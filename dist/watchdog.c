/* dist/watchdog.c — the collective watchdog: every rank's heartbeat through the rendezvous store,
 * and the error a rank raises when one of its collectives outlives DG_DIST_TIMEOUT.
 *
 * The transports bound each collective by the timeout themselves (dg_peer_wait, NCCL's polling)
 * and call dg_comm_timed_out. What they cannot know is which rank is to blame: the rank that
 * waits is the healthy one. So each rank runs a thread that posts "hb/<rank>" to the store every
 * interval: its wall clock, the number of collectives it has entered and the latest one's label.
 * The rank that times out reads every other rank's entry and says which ones went silent
 * (stopped, hung, dead: their thread stopped posting too) and which are alive but elsewhere
 * (behind, or in another collective: a program bug, not a stall).
 *
 * The heartbeat has its own store connection, with a short timeout, so a store that stopped
 * answering (rank 0, which serves it, is the one stopped) costs a beat, not the job; that case
 * is reported as such. Clocks: ages compare the writer's wall clock with the reader's, exact on
 * one machine and NTP-close across machines; silent means older than several intervals. */
#include "dist_internal.h"
#include <stdarg.h>
#include <errno.h>

struct dg_watchdog {
    dg_comm *c;
    dg_store_params sp;
    char host[DG_DIST_MAX_ENDPOINT], token[DG_STORE_MAX_TOKEN + 1];
    double interval_s;            /* between beats */
    double silent_s;              /* a heartbeat older than this is a silent rank */
    pthread_t thread;
    pthread_mutex_t lock;         /* client, stopping; the beat and a timing-out rank's reads */
    pthread_cond_t wake;
    bool stopping;
    dg_store *client;             /* NULL while the store does not answer (reconnected at the next beat) */
    double store_silent_since;    /* wall clock of the first failed beat of a run of failures; 0: answering */
};

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void dg_comm_progress(dg_comm *c, const char *fmt, ...) {
    pthread_mutex_lock(&c->progress_lock);
    c->collectives++;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->activity, sizeof c->activity, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&c->progress_lock);
}

/* One beat (w->lock held): "wall_clock collectives label". */
static void beat(struct dg_watchdog *w) {
    char key[32], val[192];
    snprintf(key, sizeof key, "hb/%d", w->c->rank);
    pthread_mutex_lock(&w->c->progress_lock);
    int n = snprintf(val, sizeof val, "%.3f %llu %s", wall_s(), (unsigned long long)w->c->collectives, w->c->activity);
    pthread_mutex_unlock(&w->c->progress_lock);
    /* a failed reconnection is reported by the rank that times out, not here */
    if (!w->client) w->client = dg_store_new(w->sp);
    if (w->client && dg_store_set(w->client, key, val, (size_t)(n < (int)sizeof val ? n : (int)sizeof val - 1)) == 0) {
        w->store_silent_since = 0;
        return;
    }
    /* a request that timed out leaves its reply in flight on the connection: start a new one */
    dg_store_free(w->client);
    w->client = NULL;
    if (w->store_silent_since == 0) w->store_silent_since = wall_s();
}

static void *heartbeat(void *arg) {
    struct dg_watchdog *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        beat(w);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double t = (double)until.tv_sec + (double)until.tv_nsec * 1e-9 + w->interval_s;
        until.tv_sec = (time_t)t;
        until.tv_nsec = (long)((t - (double)until.tv_sec) * 1e9);
        while (!w->stopping && pthread_cond_timedwait(&w->wake, &w->lock, &until) != ETIMEDOUT) {}
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

struct dg_watchdog *dg_watchdog_start(dg_comm *c, const dg_dist_env *env) {
    if (!c->store || c->size < 2) return NULL;
    struct dg_watchdog *w = calloc(1, sizeof *w);
    if (!w) return NULL;   /* the job runs without it; a timeout then names no rank */
    w->c = c;
    /* a tenth of the timeout, so a rank stopped for the whole timeout has missed ten beats */
    w->interval_s = fmin(fmax(c->timeout_s / 10, 0.2), 5.0);
    w->silent_s = fmax(3 * w->interval_s, 2.0);
    if (dg_dist_store_params(env, fmin(c->timeout_s, fmax(2 * w->interval_s, 1.0)), &w->sp, w->host, sizeof w->host,
                             w->token, sizeof w->token) != 0) {
        free(w);
        return NULL;
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    if (pthread_create(&w->thread, NULL, heartbeat, w) != 0) {
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->wake);
        free(w);
        return NULL;
    }
    return w;
}

void dg_watchdog_stop(struct dg_watchdog *w) {
    if (!w) return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    dg_store_free(w->client);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    free(w);
}

/* What the other ranks' heartbeats say, appended to out: the silent ones first (they are the
 * likely cause), then those alive elsewhere. */
static void describe_peers(struct dg_watchdog *w, uint64_t mine, char *out, size_t len) {
    size_t used = strlen(out);
#define ADD(...) do { if (used < len) { int k_ = snprintf(out + used, len - used, __VA_ARGS__); if (k_ > 0) used += (size_t)k_; } } while (0)
    pthread_mutex_lock(&w->lock);
    if (!w->client) w->client = dg_store_new(w->sp);
    if (!w->client) {
        ADD(" Rank 0, which serves the store at %s:%d, does not answer%s: rank 0 is the one stopped, hung or dead.",
            w->host, w->sp.port, w->store_silent_since ? "" : " now");
        pthread_mutex_unlock(&w->lock);
        return;
    }
    double now = wall_s();
    int silent = 0, elsewhere = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int r = 0; r < w->c->size; r++) {
            if (r == w->c->rank) continue;
            char key[32];
            snprintf(key, sizeof key, "hb/%d", r);
            void *v = NULL;
            size_t n = 0;
            bool found = false;
            if (dg_store_peek(w->client, key, &v, &n, &found) != 0) {
                dg_store_free(w->client);
                w->client = NULL;
                ADD(" Rank 0, which serves the store at %s:%d, stopped answering: rank 0 is stopped, hung or dead.", w->host,
                    w->sp.port);
                pthread_mutex_unlock(&w->lock);
                return;
            }
            char text[200] = "";
            memcpy(text, v ? v : "", n < sizeof text - 1 ? n : sizeof text - 1);
            free(v);
            char *end;
            double t = strtod(text, &end);
            unsigned long long count = strtoull(end, &end, 10);
            const char *label = *end == ' ' ? end + 1 : end;
            double age = now - t;
            bool is_silent = !found || age > w->silent_s;
            if (pass == 0 && is_silent) {
                if (!found) ADD(" Rank %d sent no heartbeat at all (stopped or hung since it joined).", r);
                else ADD(" Rank %d is silent: its last heartbeat is %.1f s old (stopped, hung or dead), at collective #%llu (%s).",
                         r, age, count, *label ? label : "none yet");
                silent++;
            } else if (pass == 1 && !is_silent && count != mine) {
                ADD(" Rank %d is alive but at collective #%llu (%s)%s.", r, count, label,
                    count < mine ? ", behind this rank" : ", ahead: the ranks' collectives differ in order or number");
                elsewhere++;
            }
        }
    }
    if (!silent && !elsewhere) ADD(" Every other rank is alive and in the same collective (a slow network or transport?).");
    pthread_mutex_unlock(&w->lock);
#undef ADD
}

int dg_comm_timed_out(dg_comm *c, const char *transport, const char *what, const char *detail, bool aborted) {
    /* the transport learns it here, once, also when the reducer (not the transport) did the
     * waiting: MPI would otherwise finalize at exit on the abandoned requests and wait for ever */
    if (!c->abandoned && c->be && c->be->abandon) c->be->abandon(c);
    c->abandoned = true;
    char act[sizeof c->activity];
    pthread_mutex_lock(&c->progress_lock);
    uint64_t mine = c->collectives;
    snprintf(act, sizeof act, "%s", c->activity);
    pthread_mutex_unlock(&c->progress_lock);
    char peers[1024] = "";
    if (c->watchdog) describe_peers(c->watchdog, mine, peers, sizeof peers);
    else snprintf(peers, sizeof peers, " (no rendezvous store, so the other ranks' progress is unknown: see their logs)");
    DG_ERR(DG_ETIMEOUT, "%s: %s%s did not finish within %.0f s on rank %d of %d, at collective #%llu (%s): another rank "
           "stopped, died or hangs.%s The communicator is %s (DG_DIST_TIMEOUT sets the limit); end the program",
           transport, what, detail, c->timeout_s, c->rank, c->size, (unsigned long long)mine, *act ? act : "none",
           peers, aborted ? "aborted" : "abandoned");
    return DG_ETIMEOUT;
}
