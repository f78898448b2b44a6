/* dist/ps/communicator.c — async mode's communicator thread (communicator.h).
 *
 * Buffers of the table's size move between the worker and the thread under one lock: `queued`
 * (the sum of the gradients handed over since the thread last took them), `sending` (the sum it
 * is pushing), `fresh` (the values it pulled after its last push, until the worker takes them) and
 * `incoming` (the pull under way). What `fresh` lacks of this worker's own gradients is exactly
 * `sending` (when a newer exchange is under way) plus `queued`: the thread runs one exchange at a
 * time, so every exchange before the one that pulled `fresh` had reached the servers.
 * Posted messages (the sparse tables' pushes and prefetching pulls) go out in the order they were
 * posted, before the exchange of the gradients handed over with them. */
#include "../dist_internal.h"
#include "communicator.h"
#include <pthread.h>

struct dg_ps_communicator {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;       /* wake: work or stop for the thread; done: a send finished */
    dg_ps_transport *tr;
    dg_ps_exchange_fn fn;
    dg_ps_send_fn send;
    void *ctx;
    int64_t total;
    bool stop, busy, exchanging, has_fresh;   /* busy: a cycle under way; exchanging: with `sending` */
    dg_ps_post *outbox, *outbox_tail;
    int max_merge, n_queued, n_sending;   /* gradients summed in queued / in sending */
    float *queued, *sending, *fresh, *incoming;
    int rc;                          /* the thread's first failure, and its message */
    char why[1024];
};

static void *run(void *arg) {
    dg_ps_communicator *c = arg;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->stop && c->n_queued == 0 && !c->outbox) pthread_cond_wait(&c->wake, &c->mu);
        if ((c->n_queued == 0 && !c->outbox) || c->rc) break;   /* stopping with nothing left, or failed */
        dg_ps_post *posts = c->outbox;
        c->outbox = c->outbox_tail = NULL;
        bool dense = c->n_queued > 0;
        if (dense) {
            float *t = c->queued;
            c->queued = c->sending, c->sending = t;
            c->n_sending = c->n_queued;
            c->n_queued = 0;
            c->exchanging = true;
        }
        c->busy = true;
        pthread_cond_broadcast(&c->done);   /* room in the queue again */
        pthread_mutex_unlock(&c->mu);
        int rc = 0;
        while (posts) {   /* a failure still answers every post, so nobody waits for a reply forever */
            dg_ps_post *next = posts->next;
            int r = rc ? rc : c->send(c->ctx, c->tr, posts);
            if (r && !rc) rc = r;
            if (r && posts->reply) posts->reply(posts->arg, r, NULL, 0);
            free(posts->msg);
            free(posts);
            posts = next;
        }
        if (!rc && dense) rc = c->fn(c->ctx, c->tr, c->sending, c->incoming);   /* sending stays: the worker may read it */
        pthread_mutex_lock(&c->mu);
        c->busy = c->exchanging = false;
        if (rc) {
            c->rc = rc;
            snprintf(c->why, sizeof c->why, "%s", dg_last_error());
        } else if (dense) {
            float *t = c->fresh;
            c->fresh = c->incoming, c->incoming = t;
            c->has_fresh = true;
        }
        pthread_cond_broadcast(&c->done);
        if (rc) break;
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

dg_ps_communicator *dg_ps_communicator_new(dg_ps_transport *tr, int64_t total, int max_merge, dg_ps_exchange_fn fn,
                                           dg_ps_send_fn send, void *ctx) {
    dg_ps_communicator *c = calloc(1, sizeof *c);
    size_t bytes = (size_t)(total ? total : 1) * sizeof(float);   /* total 0: posts only */
    if (c) {
        c->queued = malloc(bytes), c->sending = malloc(bytes), c->fresh = malloc(bytes), c->incoming = malloc(bytes);
    }
    if (!c || !c->queued || !c->sending || !c->fresh || !c->incoming) {
        if (c) free(c->queued), free(c->sending), free(c->fresh), free(c->incoming);
        free(c);
        tr->ops->destroy(tr);
        DG_ERR(DG_ENOMEM, "ps communicator: out of memory for 4 x %lld floats", (long long)total);
        return NULL;
    }
    c->tr = tr, c->fn = fn, c->send = send, c->ctx = ctx, c->total = total, c->max_merge = max_merge < 1 ? 1 : max_merge;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->wake, NULL);
    pthread_cond_init(&c->done, NULL);
    if (pthread_create(&c->thread, NULL, run, c) != 0) {
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->wake);
        pthread_cond_destroy(&c->done);
        free(c->queued), free(c->sending), free(c->fresh), free(c->incoming);
        free(c);
        tr->ops->destroy(tr);
        DG_ERR(DG_ECOMM, "ps communicator: cannot start its thread");
        return NULL;
    }
    return c;
}

/* The thread's failure as this thread's error; the caller holds the lock. */
static int failed(dg_ps_communicator *c) {
    DG_ERR(c->rc, "ps communicator: %s", c->why);
    return c->rc;
}

/* Hands the fresh values and what they lack to take (the caller holds the lock). */
static int take_fresh(dg_ps_communicator *c, dg_ps_take_fn take, void *ctx) {
    if (!c->has_fresh) return 0;
    c->has_fresh = false;
    dg_ps_handover h = { c->fresh, c->exchanging ? c->sending : NULL, c->n_queued ? c->queued : NULL,
                         (c->exchanging ? c->n_sending : 0) + c->n_queued };
    take(ctx, &h);
    return 1;
}

int dg_ps_communicator_step(dg_ps_communicator *c, dg_ps_take_fn take, dg_ps_add_fn add, void *ctx) {
    pthread_mutex_lock(&c->mu);
    /* max_merge 1: the previous exchange must have ended (one gradient in flight, none behind it) */
    while (!c->rc && (c->n_queued >= c->max_merge || (c->max_merge == 1 && c->exchanging))) pthread_cond_wait(&c->done, &c->mu);
    if (c->rc) {
        int rc = failed(c);
        pthread_mutex_unlock(&c->mu);
        return rc;
    }
    int got = take_fresh(c, take, ctx);   /* before this step's gradient joins the queue */
    int rc = add(ctx, c->queued, c->n_queued > 0);
    if (!rc) {
        c->n_queued++;
        pthread_cond_signal(&c->wake);
    }
    pthread_mutex_unlock(&c->mu);
    return rc ? rc : got;
}

int dg_ps_communicator_post(dg_ps_communicator *c, int server, unsigned char *msg, size_t len, dg_ps_reply_fn reply, void *arg) {
    dg_ps_post *p = malloc(sizeof *p);
    if (!p) {
        free(msg);
        DG_ERR(DG_ENOMEM, "ps communicator: out of memory");
        return DG_ENOMEM;
    }
    *p = (dg_ps_post){ server, msg, len, reply, arg, NULL };
    pthread_mutex_lock(&c->mu);
    if (c->rc) {
        int rc = failed(c);
        pthread_mutex_unlock(&c->mu);
        free(msg);
        free(p);
        return rc;
    }
    if (c->outbox_tail) c->outbox_tail->next = p;
    else c->outbox = p;
    c->outbox_tail = p;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int dg_ps_communicator_flush(dg_ps_communicator *c, dg_ps_take_fn take, void *ctx) {
    pthread_mutex_lock(&c->mu);
    while (!c->rc && (c->n_queued > 0 || c->outbox || c->busy)) pthread_cond_wait(&c->done, &c->mu);
    int rc = c->rc ? failed(c) : take_fresh(c, take, ctx);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void dg_ps_communicator_free(dg_ps_communicator *c) {
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    for (dg_ps_post *p = c->outbox, *next; p; p = next) {   /* left by a failure: answered, never sent */
        next = p->next;
        if (p->reply) p->reply(p->arg, c->rc ? c->rc : DG_ECOMM, NULL, 0);
        free(p->msg);
        free(p);
    }
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->wake);
    pthread_cond_destroy(&c->done);
    c->tr->ops->destroy(c->tr);
    free(c->queued), free(c->sending), free(c->fresh), free(c->incoming);
    free(c);
}
