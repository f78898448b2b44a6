/* data/sampler.c — batch samplers. The plain one is sequential or shuffled (a Fisher-Yates
 * permutation per epoch from the Philox stream keyed by (seed, epoch)). The distributed one
 * reproduces paddle.io.DistributedBatchSampler index for index, including numpy's
 * RandomState(epoch).shuffle (MT19937), so a run mixing dygraph and Paddle ranks agrees. An
 * epoch's batches are computed once by set_epoch; reading them is lock-free. */
#include "data_util.h"
#include <errno.h>

struct dg_batch_sampler {
    bool distributed;
    int64_t n;             /* dataset length */
    int64_t batch_size;
    bool shuffle, drop_last;
    uint64_t seed;
    int nranks, rank;
    int64_t epoch;
    int64_t *order;        /* this rank's indices for the epoch, in batch order */
    int64_t m;             /* their count */
    int64_t num_batches;
};

/* ---- Philox permutation (plain sampler; the stream helpers are in data_util.h) ---- */

/* ---- MT19937 and numpy's legacy RandomState.shuffle ---- */
typedef struct mt19937 { uint32_t key[624]; int pos; } mt19937;

static void mt_seed(mt19937 *st, uint32_t seed) {
    for (int pos = 0; pos < 624; pos++) {
        st->key[pos] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)pos + 1u;
    }
    st->pos = 624;
}

static uint32_t mt_next(mt19937 *st) {
    if (st->pos == 624) {
        for (int i = 0; i < 624; i++) {
            uint32_t y = (st->key[i] & 0x80000000u) | (st->key[(i + 1) % 624] & 0x7fffffffu);
            st->key[i] = st->key[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        st->pos = 0;
    }
    uint32_t y = st->key[st->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* numpy's random_interval: uniform in [0, max] by masked rejection. */
static uint64_t mt_interval(mt19937 *st, uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1; mask |= mask >> 2; mask |= mask >> 4; mask |= mask >> 8; mask |= mask >> 16; mask |= mask >> 32;
    uint64_t v;
    if (max <= 0xffffffffu) {
        while ((v = (mt_next(st) & mask)) > max) {}
    } else {
        do {
            uint64_t hi = mt_next(st), lo = mt_next(st);   /* numpy: high word drawn first */
            v = (hi << 32 | lo) & mask;
        } while (v > max);
    }
    return v;
}

static void numpy_shuffle(int64_t *x, int64_t n, uint32_t seed) {
    mt19937 st;
    mt_seed(&st, seed);
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = (int64_t)mt_interval(&st, (uint64_t)i);
        int64_t t = x[i]; x[i] = x[j]; x[j] = t;
    }
}

/* ---- epochs ---- */
static int build_plain(dg_batch_sampler *s, int64_t epoch) {
    int64_t *o = malloc(sizeof *o * (size_t)(s->n ? s->n : 1));
    if (!o) { DG_ERR(DG_ENOMEM, "batch_sampler: out of memory for %lld indices", (long long)s->n); return DG_ENOMEM; }
    for (int64_t i = 0; i < s->n; i++) o[i] = i;
    if (s->shuffle) {
        uint64_t key = dg_data_philox64(s->seed, (uint64_t)epoch), counter = 0;
        for (int64_t i = s->n - 1; i > 0; i--) {
            int64_t j = (int64_t)dg_data_uniform_upto(key, &counter, (uint64_t)i);
            int64_t t = o[i]; o[i] = o[j]; o[j] = t;
        }
    }
    free(s->order);
    s->order = o;
    s->m = s->n;
    return 0;
}

/* Paddle 2.x DistributedBatchSampler.__iter__ up to the batching. */
static int build_distributed(dg_batch_sampler *s, int64_t epoch) {
    int64_t n = s->n, R = s->nranks, bs = s->batch_size;
    int64_t per_rank = (n + R - 1) / R, total = per_rank * R;
    int64_t *all = malloc(sizeof *all * (size_t)(total ? total : 1));
    int64_t *o = malloc(sizeof *o * (size_t)(per_rank ? per_rank : 1));
    if (!all || !o) {
        free(all); free(o);
        DG_ERR(DG_ENOMEM, "distributed_batch_sampler: out of memory for %lld indices", (long long)total);
        return DG_ENOMEM;
    }
    for (int64_t i = 0; i < total; i++) all[i] = i % n;      /* pad with the head, repeated if needed */
    if (s->shuffle) numpy_shuffle(all, total, (uint32_t)(s->seed + (uint64_t)epoch));
    int64_t m = 0;
    if (R == 1) {
        memcpy(o, all, sizeof *o * (size_t)total);
        m = total;
    } else {
        int64_t last = total % (bs * R), last_local = last / R;   /* last % R == 0 as total % R == 0 */
        for (int64_t i = s->rank * bs; i < total - last; i += bs * R)
            for (int64_t k = i; k < i + bs && k < total - last; k++) o[m++] = all[k];
        const int64_t *tail = all + (total - last);
        for (int64_t k = s->rank * last_local; k < (s->rank + 1) * last_local; k++) o[m++] = tail[k];
    }
    free(all);
    if (m != per_rank) {   /* Paddle asserts this; it holds by construction */
        free(o);
        DG_ERR(DG_ESTATE, "distributed_batch_sampler: rank %d got %lld indices, expected %lld", s->rank, (long long)m, (long long)per_rank);
        return DG_ESTATE;
    }
    free(s->order);
    s->order = o;
    s->m = m;
    return 0;
}

int dg_batch_sampler_set_epoch(dg_batch_sampler *s, int64_t epoch) {
    DG_CHECK_HANDLE_INT(s, "batch_sampler_set_epoch: sampler is NULL");
    if (s->order && epoch == s->epoch) return 0;
    DG_CHECK_INT(epoch >= 0, "batch_sampler_set_epoch: epoch %lld is negative", (long long)epoch);
    int rc = s->distributed ? build_distributed(s, epoch) : build_plain(s, epoch);
    if (rc) return rc;
    s->epoch = epoch;
    return 0;
}

static dg_batch_sampler *sampler_make(dg_batch_sampler *s) {
    if (dg_batch_sampler_set_epoch(s, 0)) { free(s); return NULL; }
    s->num_batches = s->drop_last ? s->m / s->batch_size : (s->m + s->batch_size - 1) / s->batch_size;
    return s;
}

dg_batch_sampler_params dg_batch_sampler_default_params(void) {
    return (dg_batch_sampler_params){ .params_tag = DG_PARAMS_TAG, .batch_size = 1, .shuffle = false, .drop_last = false, .seed = 0 };
}

dg_batch_sampler *dg_batch_sampler_new(int64_t dataset_len, dg_batch_sampler_params p) {
    DG_CHECK_PARAMS("batch_sampler_new", p, dg_batch_sampler_default_params);
    DG_CHECK(dataset_len >= 0, "batch_sampler_new: dataset length %lld is negative", (long long)dataset_len);
    DG_CHECK(p.batch_size >= 1, "batch_sampler_new: batch_size must be >= 1, got %lld", (long long)p.batch_size);
    dg_batch_sampler *s = calloc(1, sizeof *s);
    DG_CHECK(s, "batch_sampler_new: out of memory");
    s->n = dataset_len;
    s->batch_size = p.batch_size;
    s->shuffle = p.shuffle;
    s->drop_last = p.drop_last;
    s->seed = p.seed;
    s->nranks = 1;
    return sampler_make(s);
}

/* An integer environment variable in [lo, hi]; 1 found, 0 unset/empty, negative on a bad value. */
static int env_int(const char *name, long lo, long hi, int *out) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n') end++;
    if (errno || end == v || *end || x < lo || x > hi) {
        DG_ERR(DG_EINVAL, "distributed_batch_sampler: environment %s='%s' is not an integer in [%ld, %ld]", name, v, lo, hi);
        return DG_EINVAL;
    }
    *out = (int)x;
    return 1;
}

dg_distributed_batch_sampler_params dg_distributed_batch_sampler_default_params(void) {
    return (dg_distributed_batch_sampler_params){ .params_tag = DG_PARAMS_TAG, .batch_size = 1, .num_replicas = DG_FROM_ENV, .rank = DG_FROM_ENV,
                                                  .shuffle = false, .drop_last = false, .seed = 0 };
}

dg_batch_sampler *dg_distributed_batch_sampler_new(int64_t dataset_len, dg_distributed_batch_sampler_params p) {
    DG_CHECK_PARAMS("distributed_batch_sampler_new", p, dg_distributed_batch_sampler_default_params);
    DG_CHECK(dataset_len >= 0, "distributed_batch_sampler_new: dataset length %lld is negative", (long long)dataset_len);
    DG_CHECK(p.batch_size >= 1, "distributed_batch_sampler_new: batch_size must be >= 1, got %lld", (long long)p.batch_size);
    DG_CHECK(p.num_replicas >= 1 || p.num_replicas == DG_FROM_ENV,
             "distributed_batch_sampler_new: num_replicas must be >= 1 or DG_FROM_ENV, got %d", p.num_replicas);
    DG_CHECK(p.rank >= 0 || p.rank == DG_FROM_ENV, "distributed_batch_sampler_new: rank must be >= 0 or DG_FROM_ENV, got %d",
             p.rank);
    int nranks = p.num_replicas, rank = p.rank;
    const char *from = "the arguments";
    if (nranks == DG_FROM_ENV) {   /* Paddle's num_replicas=None */
        nranks = 1;
        int rc = env_int("PADDLE_TRAINERS_NUM", 1, 1 << 20, &nranks);
        if (rc == 0) rc = env_int("OMPI_COMM_WORLD_SIZE", 1, 1 << 20, &nranks);
        if (rc < 0) return NULL;
        from = "the environment";
    }
    if (rank == DG_FROM_ENV) {     /* Paddle's rank=None */
        rank = 0;
        int rc = env_int("PADDLE_TRAINER_ID", 0, 1 << 20, &rank);
        if (rc == 0) rc = env_int("OMPI_COMM_WORLD_RANK", 0, 1 << 20, &rank);
        if (rc < 0) return NULL;
        from = "the environment";
    }
    DG_CHECK(rank >= 0 && rank < nranks, "distributed_batch_sampler_new: rank %d is outside [0, %d) (from %s)", rank, nranks, from);
    dg_batch_sampler *s = calloc(1, sizeof *s);
    DG_CHECK(s, "distributed_batch_sampler_new: out of memory");
    s->distributed = true;
    s->n = dataset_len;
    s->batch_size = p.batch_size;
    s->shuffle = p.shuffle;
    s->drop_last = p.drop_last;
    s->seed = p.seed;
    s->nranks = nranks;
    s->rank = rank;
    return sampler_make(s);
}

int64_t dg_batch_sampler_num_batches(const dg_batch_sampler *s) {
    DG_CHECK_HANDLE_INT(s, "batch_sampler_num_batches: sampler is NULL");
    return s->num_batches;
}

int64_t dg_batch_sampler_batch(const dg_batch_sampler *s, int64_t b, int64_t *indices, int64_t cap) {
    DG_CHECK_HANDLE_INT(s, "batch_sampler_batch: sampler is NULL");
    DG_CHECK_INT(b >= 0 && b < s->num_batches, "batch_sampler_batch: batch %lld is outside [0, %lld)", (long long)b,
                 (long long)s->num_batches);
    int64_t start = b * s->batch_size, count = s->m - start < s->batch_size ? s->m - start : s->batch_size;
    DG_CHECK_INT(indices && cap >= count, "batch_sampler_batch: batch %lld holds %lld indices, buffer %s %lld", (long long)b,
                 (long long)count, indices ? "has room for" : "is NULL, cap", (long long)cap);
    memcpy(indices, s->order + start, sizeof *indices * (size_t)count);
    return count;
}

void dg_batch_sampler_free(dg_batch_sampler *s) {
    if (!s) return;
    free(s->order);
    free(s);
}

int64_t dg_batch_sampler_dataset_len(const dg_batch_sampler *s) {
    DG_CHECK_HANDLE_INT(s, "batch_sampler_dataset_len: sampler is NULL");
    return s->n;
}
