/* bench/dataloader.c — DataLoader throughput: images per second decoded, transformed and collated
 * into batches of 64, with 0, 1 and 2 worker threads, for
 *   synthetic28  an in-memory source of 60000 28x28 uint8 images (decode = u8 -> f32), then
 *                scale 1/255, random crop 28 with padding 2, normalize;
 *   fmnist       Fashion-MNIST train (IDX, gzip) from /usr/share/datasets/fashion-mnist, then
 *                random crop 28 with padding 2, random flip, normalize;
 *   jpeg96       400 96x96 RGB JPEGs written to /tmp with libjpeg, read through an image list,
 *                then resize 110x110, random crop 96, random flip, normalize.
 * Each configuration runs whole epochs (shuffled) for at least MIN_SECONDS after one warm-up
 * batch. Output: `<name>_w<k> <images/s> img/s`. A source that cannot be opened is skipped with
 * a note on stderr. Usage: bench_dataloader [min_seconds] */
#include <dygraph.h>
#include <stdio.h>      /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "../samples/flags.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the synthetic source ---- */
typedef struct synth { int64_t n; uint8_t *pix; } synth;
static int64_t synth_len(void *self) { return ((synth *)self)->n; }
static int synth_get(void *self, int64_t i, uint64_t seed, dg_sample *out) {
    synth *s = self;
    dg_tensor *img = dg_empty(DG_SHAPE(1, 28, 28), DG_F32);
    if (!img) return dg_last_status();
    float *p = dg_data(img);
    const uint8_t *src = s->pix + i * 784;
    for (int k = 0; k < 784; k++) p[k] = (float)src[k];
    out->t[0] = img;
    out->t[1] = dg_scalar((double)(i % 10), DG_I64);
    out->n = 2;
    return out->t[1] ? 0 : dg_last_status();
}
static void synth_free(void *self) { synth *s = self; free(s->pix); free(s); }
static const dg_dataset_vtable synth_vt = { synth_len, synth_get, synth_free };

static dg_dataset *synth_new(int64_t n) {
    synth *s = malloc(sizeof *s);
    s->n = n;
    s->pix = malloc((size_t)n * 784);
    uint32_t x = 12345;
    for (int64_t i = 0; i < n * 784; i++) { x = x * 1664525u + 1013904223u; s->pix[i] = (uint8_t)(x >> 24); }
    return dg_dataset_new(&synth_vt, s, "synthetic28");
}

/* ---- JPEG files ---- */
static int write_jpegs(const char *dir, int count) {
    mkdir(dir, 0755);
    char path[512];
    snprintf(path, sizeof path, "%s/list.txt", dir);
    FILE *list = fopen(path, "w");
    if (!list) return -1;
    unsigned char row[96 * 3];
    for (int i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/img_%04d.jpg", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f) { fclose(list); return -1; }
        struct jpeg_compress_struct c;
        struct jpeg_error_mgr err;
        c.err = jpeg_std_error(&err);
        jpeg_create_compress(&c);
        jpeg_stdio_dest(&c, f);
        c.image_width = 96;
        c.image_height = 96;
        c.input_components = 3;
        c.in_color_space = JCS_RGB;
        jpeg_set_defaults(&c);
        jpeg_set_quality(&c, 90, TRUE);
        jpeg_start_compress(&c, TRUE);
        for (int y = 0; y < 96; y++) {
            for (int x = 0; x < 96; x++) {   /* smooth gradients plus a per-image pattern */
                row[3 * x] = (unsigned char)((x * 2 + i * 7) & 255);
                row[3 * x + 1] = (unsigned char)((y * 2 + i * 13) & 255);
                row[3 * x + 2] = (unsigned char)(((x ^ y) * 3 + i) & 255);
            }
            JSAMPROW r = row;
            jpeg_write_scanlines(&c, &r, 1);
        }
        jpeg_finish_compress(&c);
        jpeg_destroy_compress(&c);
        fclose(f);
        fprintf(list, "img_%04d.jpg %d\n", i, i % 10);
    }
    fclose(list);
    return 0;
}

/* ---- the measurement ---- */
static void run(const char *name, dg_dataset *ds, int workers, double min_seconds) {
    dg_dataloader_params dlp = dg_dataloader_default_params();
    dlp.batch_size = 64;
    dlp.shuffle = true;
    dlp.num_workers = workers;
    dlp.seed = 1;
    dg_dataloader *dl = dg_dataloader_new(ds, dlp);
    if (!dl) { fprintf(stderr, "%s: %s\n", name, dg_last_error()); exit(1); }
    dg_sample b;
    if (dg_dataloader_start_epoch(dl, 0) || dg_dataloader_next(dl, &b) != 1) { fprintf(stderr, "%s: %s\n", name, dg_last_error()); exit(1); }
    dg_sample_clear(&b);   /* warm-up batch, not counted */
    int64_t images = 0;
    double t0 = now(), t = t0;
    for (int64_t epoch = 0; t - t0 < min_seconds; epoch++) {
        if (epoch > 0 && dg_dataloader_start_epoch(dl, epoch)) { fprintf(stderr, "%s: %s\n", name, dg_last_error()); exit(1); }
        int rc;
        while ((rc = dg_dataloader_next(dl, &b)) == 1) {
            images += dg_dim(b.t[0], 0);
            dg_sample_clear(&b);
        }
        if (rc < 0) { fprintf(stderr, "%s: %s\n", name, dg_last_error()); exit(1); }
        t = now();
    }
    dg_dataloader_free(dl);
    printf("%s_w%d %.0f img/s\n", name, workers, (double)images / (t - t0));
    fflush(stdout);
}

static void bench(const char *name, dg_dataset *ds, double min_seconds) {
    for (int w = 0; w <= 2; w++) run(name, ds, w, min_seconds);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { NULL };
    su_positional pos = { .usage = "[MIN_SECONDS (2)]", .min = 0, .max = 1 };
    su_args_pos(argc, argv, flags, &pos);
    char *end = NULL;
    double min_seconds = pos.n ? strtod(pos.args[0], &end) : 2.0;
    if (pos.n && (end == pos.args[0] || *end || !(min_seconds > 0 && min_seconds < 3600)))
        su_usage_error(argv[0], flags, &pos, "argument MIN_SECONDS: a number of seconds in (0, 3600), got '%s'", pos.args[0]);
    free(pos.args);
    dg_init_params ip = dg_init_default_params();
    ip.quiet = true;
    dg_init(&ip);

    dg_dataset *base = synth_new(60000);
    dg_transform mnist_tf[] = {
        { .kind = DG_TF_SCALE, .scale = 1.0 / 255 },
        { .kind = DG_TF_RANDOM_CROP, .size = { 28, 28 }, .padding = 2 },
        { .kind = DG_TF_NORMALIZE, .channels = 1, .mean = { 0.1307 }, .std = { 0.3081 } },
    };
    dg_dataset *ds = dg_dataset_transform(base, mnist_tf, 3);
    dg_dataset_free(base);
    bench("synthetic28", ds, min_seconds);
    dg_dataset_free(ds);

    base = dg_mnist_idx_dataset("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                                "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz");
    if (!base) fprintf(stderr, "fmnist: skipped: %s\n", dg_last_error());
    else {
        dg_transform tf[] = {
            { .kind = DG_TF_RANDOM_CROP, .size = { 28, 28 }, .padding = 2 },
            { .kind = DG_TF_RANDOM_HFLIP, .p = 0.5 },
            { .kind = DG_TF_NORMALIZE, .channels = 1, .mean = { 0.2860 }, .std = { 0.3530 } },
        };
        ds = dg_dataset_transform(base, tf, 3);
        dg_dataset_free(base);
        bench("fmnist", ds, min_seconds);
        dg_dataset_free(ds);
    }
    dg_clear_error();

    const char *dir = "/tmp/dg_bench_jpeg96";
    if (write_jpegs(dir, 400)) fprintf(stderr, "jpeg96: skipped: cannot write %s\n", dir);
    else {
        char list[512];
        snprintf(list, sizeof list, "%s/list.txt", dir);
        base = dg_image_list_dataset(dir, list);
        if (!base) fprintf(stderr, "jpeg96: skipped: %s\n", dg_last_error());
        else {
            dg_transform tf[] = {
                { .kind = DG_TF_RESIZE, .size = { 110, 110 } },
                { .kind = DG_TF_RANDOM_CROP, .size = { 96, 96 } },
                { .kind = DG_TF_RANDOM_HFLIP, .p = 0.5 },
                { .kind = DG_TF_NORMALIZE, .channels = 3, .mean = { 0.485, 0.456, 0.406 }, .std = { 0.229, 0.224, 0.225 } },
            };
            ds = dg_dataset_transform(base, tf, 4);
            dg_dataset_free(base);
            bench("jpeg96", ds, min_seconds);
            dg_dataset_free(ds);
        }
    }
    dg_shutdown();
    return 0;
}
