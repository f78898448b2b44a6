/* dygraph/data.h — datasets, samplers and the DataLoader (like paddle.io / torch.utils.data).
 *
 * A dataset maps an index to a sample: a few tensors (image, label, …) made fresh for the
 * caller. Users implement one in C with a vtable; the built-in ones read MNIST/Fashion-MNIST
 * IDX (plain or .gz), the mnist.json.gz of Paddle's MNIST tutorial, CIFAR-10 binary batches, the Kaggle facial
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
/* t[0..n-1] are distinct tensor references (the same tensor twice in one sample is not allowed). */
typedef struct dg_sample { int n; dg_tensor *t[DG_MAX_SAMPLE_FIELDS]; } dg_sample;
/* Releases the tensors of a sample and sets n to 0 (for samples got outside any scope). */
DG_API void dg_sample_clear(dg_sample *s);
/* Stacks field f of samples[0..n-1] along a new axis 0 into batch->t[f] (CPU tensors, like
 * torch's default_collate). Every sample must have the same field count and, per field, the same
 * shape and dtype: otherwise an error naming the sample positions and both shapes. The new
 * tensors follow the usual ownership rule (the open scope, else the caller). */
DG_API int dg_collate(const dg_sample *samples, int64_t n, dg_sample *batch);
/* Variable-length samples (torch.nn.utils.rnn.pad_sequence(batch_first=True) plus lengths):
 * field 0 of samples[0..n-1], shaped [L_k, ...] with L_k free and the dims after the first equal,
 * becomes batch->t[0] [n, max L_k, ...] with each sample's rows first and pad_value (in the
 * field's dtype) after them; the other fields are stacked as dg_collate stacks them; then
 * batch->t[nf] is an int64 [n] tensor of the lengths L_k (so samples have at most
 * DG_MAX_SAMPLE_FIELDS - 1 fields). Field 0 of every sample needs one dtype and at least one
 * dim; otherwise an error naming the sample index and both shapes. CPU tensors, owned as
 * dg_collate's. */
DG_API int dg_collate_pad(const dg_sample *samples, int64_t n, double pad_value, dg_sample *batch);
/* The DataLoader's collate hook signature (dg_dataloader_params.collate). */
typedef int (*dg_collate_fn)(const dg_sample *samples, int64_t n, dg_sample *batch, void *user);
/* dg_collate_pad as a collate hook: user points to the pad value, a double (NULL: 0). */
DG_API int dg_collate_pad_hook(const dg_sample *samples, int64_t n, dg_sample *batch, void *user);
/* The per-sample random key the DataLoader passes to get() for `index` in `epoch`: Philox keyed by the loader
 * seed, so a sample's random transforms do not depend on worker count or batch position. */
DG_API uint64_t dg_sample_seed(uint64_t loader_seed, int64_t epoch, int64_t index);

/* ---- datasets ---- */
typedef struct dg_dataset dg_dataset;
typedef struct dg_dataset_vtable {
    int64_t (*len)(void *self);
    /* Fill out with new tensors for sample `index`. Called from worker threads concurrently: it
     * must be thread-safe. `seed` is fixed by (loader seed, epoch, index): use it, not global
     * state, for any randomness. Return 0, or a negative dg_status after setting a message
     * (dg_dataset_error); tensors counted in out->n when it fails are released for it.
     * Temporaries it makes inside the DataLoader are freed after it returns (it runs inside a
     * scope there); the tensors it puts in `out` are kept. */
    int (*get)(void *self, int64_t index, uint64_t seed, dg_sample *out);
    void (*free)(void *self);           /* may be NULL */
} dg_dataset_vtable;

/* Datasets are refcounted: new returns one reference (the caller's); subset, map, transform and
 * the DataLoader take their own, so the caller may free its handle at once. vt is copied; self
 * is released with vt->free when the last reference goes (from whichever thread drops it). */
DG_API dg_dataset *dg_dataset_new(const dg_dataset_vtable *vt, void *self, const char *name);
DG_API dg_dataset *dg_dataset_ref(dg_dataset *ds);      /* another reference, released by dg_dataset_free */
DG_API void dg_dataset_free(dg_dataset *ds);
DG_API int64_t dg_dataset_len(const dg_dataset *ds);
DG_API const char *dg_dataset_name(const dg_dataset *ds);
/* Sample `index` (0 <= index < len) into out; its tensors follow the usual ownership rule (the
 * open scope, else the caller: dg_sample_clear). On failure out->n is 0 and the message names
 * the dataset and the index: "dataset 'NAME' index I: ...". */
DG_API int dg_dataset_get(dg_dataset *ds, int64_t index, uint64_t seed, dg_sample *out);
/* Sets the thread's error message from inside a get (printf-style); returns DG_EFORMAT. */
DG_API int dg_dataset_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A view of base through an index list (train/val splits). Takes a reference to base. */
DG_API dg_dataset *dg_dataset_subset(dg_dataset *base, const int64_t *indices, int64_t n);
/* Deterministic split: Fisher-Yates over 0..len-1 with the Philox stream keyed by seed (not the
 * global RNG); the first round(len*fraction) go to *first, the rest to *second. */
DG_API int dg_dataset_random_split(dg_dataset *base, double fraction, uint64_t seed, dg_dataset **first, dg_dataset **second);

/* ---- transforms: a dataset that applies fn to each sample of base (takes a reference) ---- */
/* fn edits s in place: to replace a field it frees the old tensor (dg_tensor_free) and stores a
 * new one. seed is derived from the sample's seed (base gets the sample's own seed). Called
 * concurrently from worker threads. free_user (may be NULL) runs when the dataset dies. */
typedef int (*dg_transform_fn)(dg_sample *s, uint64_t seed, void *user);
DG_API dg_dataset *dg_dataset_map(dg_dataset *base, dg_transform_fn fn, void *user, void (*free_user)(void *));
/* Built-in transforms on field 0, an f32 image [C, H, W] (or [H, W, C] where said); the other
 * fields pass through. Each makes a new contiguous f32 CPU tensor. */
typedef enum dg_transform_kind {
    DG_TF_NORMALIZE,        /* (x - mean[c]) / std[c]; values: mean[0..C-1], std[0..C-1];
                             * `channels` entries given (0 means C; 1 applies entry 0 to every channel) */
    DG_TF_HWC_TO_CHW,       /* [H, W, C] -> [C, H, W] */
    DG_TF_GRAY_TO_RGB,      /* [1, H, W] -> [3, H, W]; a 3-channel image passes unchanged */
    DG_TF_RESIZE,           /* bilinear to size[0] x size[1] (H, W; size[1] 0 means size[0]):
                             * torch interpolate(mode='bilinear', align_corners=False), no antialias */
    DG_TF_CENTER_CROP,      /* size[0] x size[1]; torchvision's offsets (round half to even), zero
                             * padding when the crop is larger than the image */
    DG_TF_RANDOM_CROP,      /* size[0] x size[1], with `padding` zeros around first; the offset is
                             * drawn from the sample seed */
    DG_TF_RANDOM_HFLIP,     /* with probability p in [0, 1] (0: never; torchvision's 0.5 in
                             * dg_transform_default), drawn from the sample seed */
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
/* A transform of `kind` with torchvision's defaults where it has them (p 0.5, scale 1); sizes,
 * padding, mean and std are 0, to be set. */
DG_API dg_transform dg_transform_default(dg_transform_kind kind);
/* Applies the transforms in order (a Compose). */
DG_API dg_dataset *dg_dataset_transform(dg_dataset *base, const dg_transform *tf, int n);

/* ---- built-in datasets: field 0 image f32 [C,H,W] in [0,1], field 1 label ---- */
/* MNIST / Fashion-MNIST IDX files, plain or gzip; label int64 0-d. */
DG_API dg_dataset *dg_mnist_idx_dataset(const char *images_path, const char *labels_path);
/* The mnist.json(.gz) of Paddle's multi-GPU MNIST tutorial: [train, valid, eval], each [images (784 floats), labels].
 * split: 0 train, 1 valid, 2 eval. Image [1, 28, 28] as stored in the file. */
DG_API dg_dataset *dg_mnist_json_dataset(const char *path, int split);
/* CIFAR-10 binary: dir holds data_batch_1..5.bin (train) or test_batch.bin, 10,000 records at most
 * each (plain or gzip); label int64 0-d. */
DG_API dg_dataset *dg_cifar10_dataset(const char *dir, bool train);
/* Kaggle facial keypoints CSV (30 float columns + Image of 96*96 space-separated pixels).
 * Rows with a missing value are dropped. Image [1, 96, 96] / 255; label f32 [30] / 96 (as the
 * seed). Without label columns (test.csv: ImageId,Image) the sample holds the image only. */
DG_API dg_dataset *dg_face_keypoints_dataset(const char *csv_path);
/* Image list (as in Paddle's collective FleetAPI guide): lines `relative/path label` under root; JPEG or PNG decoded to
 * f32 [3, H, W] in [0, 1] (gray expanded to 3 channels); label int64 0-d. */
DG_API dg_dataset *dg_image_list_dataset(const char *root, const char *list_path);
/* The same parsers over bytes in memory (gzip data is inflated within the size a header or the
 * format declares, or, for JSON, CSV and image lists, window by window as it is parsed), with the
 * same checks; `name` stands for the file in messages. The data is copied: buf may be freed
 * afterwards. For IDX both files are given; for CIFAR-10 one batch (at most 10,000 records). */
DG_API dg_dataset *dg_mnist_idx_dataset_buffer(const void *images, size_t images_len, const void *labels, size_t labels_len,
                                        const char *name);
DG_API dg_dataset *dg_mnist_json_dataset_buffer(const void *buf, size_t len, int split, const char *name);
DG_API dg_dataset *dg_cifar10_dataset_buffer(const void *buf, size_t len, const char *name);
DG_API dg_dataset *dg_face_keypoints_dataset_buffer(const void *buf, size_t len, const char *name);
DG_API dg_dataset *dg_image_list_dataset_buffer(const char *root, const void *list, size_t len, const char *name);
/* A JPEG or PNG (sniffed from its bytes) to f32 [3, H, W] in [0, 1] on the CPU, as the image list
 * decodes it (gray repeated to 3 channels, alpha dropped); NULL and a message naming `name` if the
 * bytes are not a whole, valid image. */
DG_API dg_tensor *dg_decode_image(const void *buf, size_t len, const char *name);

/* ---- samplers ---- */
typedef struct dg_batch_sampler dg_batch_sampler;
/* torch.utils.data.BatchSampler over a SequentialSampler or RandomSampler. */
typedef struct dg_batch_sampler_params {
    int64_t batch_size;    /* >= 1; default 1 (torch's DataLoader) */
    bool shuffle;          /* false (default): sequential; true: a permutation per epoch from (seed, epoch) */
    bool drop_last;        /* default false */
    uint64_t seed;         /* default 0 */
    uint32_t params_tag;     /* set by dg_batch_sampler_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_batch_sampler_params;
DG_API dg_batch_sampler_params dg_batch_sampler_default_params(void);
DG_API dg_batch_sampler *dg_batch_sampler_new(int64_t dataset_len, dg_batch_sampler_params p);

/* paddle.io.DistributedBatchSampler (Paddle 2.x __iter__, index for index): every rank gets the
 * same number of batches. indices = 0..n-1 padded by repeating its head up to
 * total = ceil(n / num_replicas) * num_replicas; with shuffle, the padded list is shuffled as
 * numpy.random.RandomState(seed + epoch).shuffle does (MT19937, so seed 0 gives Paddle's own
 * order, which seeds with the epoch); then, with more than one replica, rank r takes the
 * batch_size blocks starting at r*batch_size, r*batch_size + batch_size*num_replicas, ... and,
 * of the last total % (batch_size*num_replicas) indices, the r-th of num_replicas equal chunks;
 * then batches of batch_size (a last partial one unless drop_last). */
typedef struct dg_distributed_batch_sampler_params {
    int64_t batch_size;    /* >= 1; default 1 (Paddle's) */
    int num_replicas;      /* >= 1; DG_FROM_ENV (default, Paddle's None): PADDLE_TRAINERS_NUM (or
                              OMPI_COMM_WORLD_SIZE), else 1 */
    int rank;              /* in [0, num_replicas); DG_FROM_ENV (default, Paddle's None): PADDLE_TRAINER_ID
                              (or OMPI_COMM_WORLD_RANK), else 0 */
    bool shuffle;          /* default false */
    bool drop_last;        /* default false */
    uint64_t seed;         /* default 0: Paddle's order (RandomState(epoch)) */
    uint32_t params_tag;     /* set by dg_distributed_batch_sampler_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_distributed_batch_sampler_params;
DG_API dg_distributed_batch_sampler_params dg_distributed_batch_sampler_default_params(void);
/* Bad values (negative sizes, rank outside [0, num_replicas), a non-numeric or out-of-range
 * environment variable) give NULL and a message naming the value. */
DG_API dg_batch_sampler *dg_distributed_batch_sampler_new(int64_t dataset_len, dg_distributed_batch_sampler_params p);

/* The order of an epoch is a pure function of (seed, epoch); the sampler starts at epoch 0. */
DG_API int dg_batch_sampler_set_epoch(dg_batch_sampler *s, int64_t epoch);
DG_API int64_t dg_batch_sampler_num_batches(const dg_batch_sampler *s);
DG_API int64_t dg_batch_sampler_dataset_len(const dg_batch_sampler *s);   /* the length it was made for */
/* Indices of batch b of the current epoch; returns their count (<= cap) or a negative status. */
DG_API int64_t dg_batch_sampler_batch(const dg_batch_sampler *s, int64_t b, int64_t *indices, int64_t cap);
DG_API void dg_batch_sampler_free(dg_batch_sampler *s);

/* ---- DataLoader ---- */
typedef struct dg_dataloader dg_dataloader;
/* torch.utils.data.DataLoader / paddle.io.DataLoader; defaults are torch's. */
typedef struct dg_dataloader_params {
    int64_t batch_size;        /* >= 1; default 1; ignored when sampler is given */
    bool shuffle, drop_last;   /* default false; ignored when sampler is given */
    int num_workers;           /* 0 (default): load in the calling thread */
    int prefetch_factor;       /* batches queued ahead per worker, >= 1 with workers; default 2 */
    uint64_t seed;             /* default 0 */
    dg_batch_sampler *sampler; /* optional, borrowed (e.g. a DistributedBatchSampler); default NULL */
    /* Optional hook for a device backend: allocate/release host memory for collated batches
     * (pinned memory under CUDA). NULL: ordinary memory. Both or neither. The collated tensors'
     * storage comes from host_alloc (called on worker threads: it must be thread-safe) and goes
     * back through host_free when the last reference to the batch tensor dies, which may be after
     * dg_dataloader_free: host_user must outlive the batches. */
    void *(*host_alloc)(size_t bytes, void *user);
    void (*host_free)(void *p, void *user);
    void *host_user;
    bool pin_memory;           /* no hooks given: use dg_pinned_alloc/dg_pinned_free (torch's pin_memory); default false */
    /* Optional (torch's collate_fn): makes each batch from its samples instead of dg_collate, e.g.
     * dg_collate_pad_hook with collate_user pointing to a double pad value. Called on worker
     * threads (thread-safe; collate_user must outlive the loader) inside a scope that frees its
     * temporaries; it fills batch with 1..DG_MAX_SAMPLE_FIELDS new tensors (never a sample's own)
     * and returns 0, or a negative dg_status after setting a message, which ends the epoch as a
     * dataset error does ("dataloader: batch B: ..."). host_alloc / pin_memory apply to
     * dg_collate's batches only. Default NULL: dg_collate. */
    dg_collate_fn collate;
    void *collate_user;
    uint32_t params_tag;     /* set by dg_dataloader_default_params(); a literal leaves it 0 and is refused (core.h, DG_PARAMS_TAG) */
} dg_dataloader_params;
DG_API dg_dataloader_params dg_dataloader_default_params(void);

/* Takes a reference to ds. A given sampler must have been made for len(ds). */
DG_API dg_dataloader *dg_dataloader_new(dg_dataset *ds, dg_dataloader_params p);
/* Starts (or restarts) an epoch: stops any batches in flight (joining the workers), sets the
 * sampler's epoch (a given sampler too) and starts the workers on it. dg_dataloader_next without
 * a start_epoch starts epoch 0. */
DG_API int dg_dataloader_start_epoch(dg_dataloader *dl, int64_t epoch);
/* The same, handing out batches from first_batch on (0..num_batches): the batches an
 * uninterrupted epoch gives from there, byte for byte, without loading the ones before. How a
 * resume continues in the middle of an epoch (dg_train_state's epoch and batch). */
DG_API int dg_dataloader_start_epoch_at(dg_dataloader *dl, int64_t epoch, int64_t first_batch);
/* 1 and a batch, 0 at the end of the epoch, or a negative status with the worker's message
 * ("dataloader: batch B: dataset 'NAME' index I: ..."). Batches come in sampler order. The first
 * error ends the epoch (the workers stop; later calls return DG_ESTATE until start_epoch). The
 * thread's error slot is cleared on entry, so the message is the loader's own. The batch's
 * tensors are on the current device (dg_set_device), as Paddle's DataLoader places them. */
DG_API int dg_dataloader_next(dg_dataloader *dl, dg_sample *batch);
DG_API int64_t dg_dataloader_num_batches(const dg_dataloader *dl);
DG_API void dg_dataloader_free(dg_dataloader *dl);   /* joins the workers, even mid-epoch */

#ifdef __cplusplus
}
#endif
#endif
