/* dygraph/data.h — datasets, samplers and the DataLoader (like paddle.io / torch.utils.data).
 *
 * A dataset maps an index to a sample: a few tensors (image, label, …) made fresh for the
 * caller. Users implement one in C with a vtable; the built-in ones read MNIST/Fashion-MNIST
 * IDX (plain or .gz), the seed's mnist.json.gz, CIFAR-10 binary batches, the Kaggle facial
 * keypoints CSV, and image lists (`relative/path.jpeg label`, JPEG and PNG). Every parser
 * validates its file before serving from it: a bad file is an error naming the file and the
 * record/byte, never a crash or a partial batch.
 *
 * The DataLoader cuts an epoch into batches with a batch sampler, gets samples on num_workers
 * threads that prefetch into a bounded queue, and collates each field by stacking along a new
 * first axis. Batch order and random transforms depend only on (seed, epoch, index), so 0, 1 or
 * N workers give byte-identical batches. An error inside a worker reaches dg_dataloader_next as
 * an error with its message. Tensors a batch holds belong to the scope open when
 * dg_dataloader_next is called (or to the caller when none is). */
#ifndef DYGRAPH_DATA_H
#define DYGRAPH_DATA_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DG_MAX_SAMPLE_FIELDS 4
typedef struct dg_sample { int n; dg_tensor *t[DG_MAX_SAMPLE_FIELDS]; } dg_sample;
/* Releases the tensors of a sample and sets n to 0 (for samples got outside any scope). */
void dg_sample_clear(dg_sample *s);

/* ---- datasets ---- */
typedef struct dg_dataset dg_dataset;
typedef struct dg_dataset_vtable {
    int64_t (*len)(void *self);
    /* Fill out with new tensors for sample `index`. Called from worker threads concurrently: it
     * must be thread-safe. `seed` is fixed by (loader seed, epoch, index): use it, not global
     * state, for any randomness. Return 0, or a negative dg_status after setting a message
     * (dg_dataset_error). */
    int (*get)(void *self, int64_t index, uint64_t seed, dg_sample *out);
    void (*free)(void *self);           /* may be NULL */
} dg_dataset_vtable;

dg_dataset *dg_dataset_new(const dg_dataset_vtable *vt, void *self, const char *name);
void dg_dataset_free(dg_dataset *ds);
int64_t dg_dataset_len(const dg_dataset *ds);
const char *dg_dataset_name(const dg_dataset *ds);
int dg_dataset_get(dg_dataset *ds, int64_t index, uint64_t seed, dg_sample *out);
/* Sets the thread's error message from inside a get (printf-style); returns DG_EFORMAT. */
int dg_dataset_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A view of base through an index list (train/val splits). Takes a reference to base. */
dg_dataset *dg_dataset_subset(dg_dataset *base, const int64_t *indices, int64_t n);
/* Deterministic split: shuffles 0..len-1 with seed, first round(len*fraction) go to *first. */
int dg_dataset_random_split(dg_dataset *base, double fraction, uint64_t seed, dg_dataset **first, dg_dataset **second);

/* ---- transforms: a dataset that applies fn to each sample of base (takes a reference) ---- */
typedef int (*dg_transform_fn)(dg_sample *s, uint64_t seed, void *user);
dg_dataset *dg_dataset_map(dg_dataset *base, dg_transform_fn fn, void *user, void (*free_user)(void *));
/* Built-in transforms on field 0, an f32 image [C, H, W] (or [H, W, C] where said). */
typedef enum dg_transform_kind {
    DG_TF_NORMALIZE,        /* (x - mean[c]) / std[c]; values: mean[0..C-1], std[0..C-1] */
    DG_TF_HWC_TO_CHW,       /* [H, W, C] -> [C, H, W] */
    DG_TF_GRAY_TO_RGB,      /* [1, H, W] -> [3, H, W] */
    DG_TF_RESIZE,           /* bilinear to size[0] x size[1] (H, W) */
    DG_TF_CENTER_CROP,      /* size[0] x size[1] */
    DG_TF_RANDOM_CROP,      /* size[0] x size[1], with `padding` zeros around first */
    DG_TF_RANDOM_HFLIP,     /* with probability p (0 means 0.5) */
    DG_TF_SCALE,            /* x * scale (e.g. 1/255 for to-tensor scaling) */
} dg_transform_kind;
typedef struct dg_transform {
    dg_transform_kind kind;
    int size[2];
    int padding;
    double p, scale;
    int channels;
    double mean[4], std[4];
} dg_transform;
/* Applies the transforms in order (a Compose). */
dg_dataset *dg_dataset_transform(dg_dataset *base, const dg_transform *tf, int n);

/* ---- built-in datasets: field 0 image f32 [C,H,W] in [0,1], field 1 label ---- */
/* MNIST / Fashion-MNIST IDX files, plain or gzip; label int64 0-d. */
dg_dataset *dg_mnist_idx_dataset(const char *images_path, const char *labels_path);
/* The seed-004 mnist.json(.gz): [train, valid, eval], each [images (784 floats), labels].
 * split: 0 train, 1 valid, 2 eval. Image [1, 28, 28] as stored in the file. */
dg_dataset *dg_mnist_json_dataset(const char *path, int split);
/* CIFAR-10 binary: dir holds data_batch_1..5.bin (train) or test_batch.bin; label int64 0-d. */
dg_dataset *dg_cifar10_dataset(const char *dir, bool train);
/* Kaggle facial keypoints CSV (30 float columns + Image of 96*96 space-separated pixels).
 * Rows with a missing value are dropped. Image [1, 96, 96] / 255; label f32 [30] / 96 (as the
 * seed). Without label columns (test.csv: ImageId,Image) the sample holds the image only. */
dg_dataset *dg_face_keypoints_dataset(const char *csv_path);
/* Image list (seed 003): lines `relative/path label` under root; JPEG or PNG decoded to
 * f32 [3, H, W] in [0, 1] (gray expanded to 3 channels); label int64 0-d. */
dg_dataset *dg_image_list_dataset(const char *root, const char *list_path);

/* ---- samplers ---- */
typedef struct dg_batch_sampler dg_batch_sampler;
typedef struct dg_batch_sampler_params {
    int64_t batch_size;    /* 0 means 1 */
    bool shuffle;          /* false: sequential; true: a permutation per epoch from (seed, epoch) */
    bool drop_last;
    uint64_t seed;
} dg_batch_sampler_params;
dg_batch_sampler *dg_batch_sampler_new(int64_t dataset_len, dg_batch_sampler_params p);

/* paddle.io.DistributedBatchSampler: every rank gets the same number of batches; the index list
 * is padded by repeating its head up to a multiple of num_replicas, then rank r takes every
 * num_replicas-th index starting at r (Paddle's layout), then batches. */
typedef struct dg_distributed_batch_sampler_params {
    int64_t batch_size;    /* 0 means 1 */
    int num_replicas;      /* 0: PADDLE_TRAINERS_NUM (or OMPI_COMM_WORLD_SIZE), else 1 */
    int rank;              /* used when num_replicas is given; else PADDLE_TRAINER_ID / OMPI_COMM_WORLD_RANK, else 0 */
    bool shuffle;
    bool drop_last;
    uint64_t seed;
} dg_distributed_batch_sampler_params;
dg_batch_sampler *dg_distributed_batch_sampler_new(int64_t dataset_len, dg_distributed_batch_sampler_params p);

int dg_batch_sampler_set_epoch(dg_batch_sampler *s, int64_t epoch);
int64_t dg_batch_sampler_num_batches(const dg_batch_sampler *s);
/* Indices of batch b of the current epoch; returns their count (<= cap) or a negative status. */
int64_t dg_batch_sampler_batch(const dg_batch_sampler *s, int64_t b, int64_t *indices, int64_t cap);
void dg_batch_sampler_free(dg_batch_sampler *s);

/* ---- DataLoader ---- */
typedef struct dg_dataloader dg_dataloader;
typedef struct dg_dataloader_params {
    int64_t batch_size;        /* 0 means 1; ignored when sampler is given */
    bool shuffle, drop_last;   /* ignored when sampler is given */
    int num_workers;           /* 0: load in the calling thread */
    int prefetch;              /* batches queued ahead; 0 means 2 per worker */
    uint64_t seed;
    dg_batch_sampler *sampler; /* optional, borrowed (e.g. a DistributedBatchSampler) */
    /* Optional hook for a device backend: allocate/release host memory for collated batches
     * (pinned memory under CUDA). NULL: ordinary memory. */
    void *(*host_alloc)(size_t bytes, void *user);
    void (*host_free)(void *p, void *user);
    void *host_user;
} dg_dataloader_params;

/* Takes a reference to ds. */
dg_dataloader *dg_dataloader_new(dg_dataset *ds, dg_dataloader_params p);
/* Starts (or restarts) an epoch: stops any batches in flight, reshuffles for this epoch. */
int dg_dataloader_start_epoch(dg_dataloader *dl, int64_t epoch);
/* 1 and a batch, 0 at the end of the epoch, or a negative status with the worker's message. */
int dg_dataloader_next(dg_dataloader *dl, dg_sample *batch);
int64_t dg_dataloader_num_batches(const dg_dataloader *dl);
void dg_dataloader_free(dg_dataloader *dl);   /* joins the workers, even mid-epoch */

#ifdef __cplusplus
}
#endif
#endif
