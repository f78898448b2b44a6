/* samples/face_keypoints.c — Paddle's Fleet collective tutorial's second example: FaceNet (ResNet18 backbone ->
 * Linear(1000,512) -> ReLU -> Dropout(0.1) -> Linear(512,30)) regressing 15 facial keypoints
 * with MSE and Adam 1e-3, batch 32, on the Kaggle facial-keypoints CSV layout split 80/20 with a
 * fixed shuffle (as Paddle's tutorial program does). The learning rate follows a per-step cosine from 1e-3 to 0
 * over the run (`--lr-schedule constant` keeps the tutorial's constant rate). Without the real training.csv it uses the synthetic set that
 * `make data` generates; pass --data FILE for Kaggle's.
 *
 *   face_keypoints [--data training.csv] [--epochs 6] [--batch-size 32] [--lr 1e-3] [--lr-schedule cosine|constant]
 *                  [--workers 2] [--threads N] [--device cpu|gpu] [--bf16] [--amp bf16|fp16] [--amp-level O1|O2] [--init-loss-scaling S] [--seed 1]
 *                  [--save PREFIX] [--save-every N] [--resume PREFIX] [--max-steps N] [--metrics FILE.csv] [--plot FILE.svg] [--export-onnx FILE.onnx]
 *
 * --save writes PREFIX.ckpt.safetensors (model, Adam, the cosine's position, the dropout
 * generator's position, the position in the epoch) at each epoch's end and every N steps with
 * --save-every; --resume continues from it bit for bit, mid-epoch included. --max-steps stops the
 * run at that optimizer step (counted over resumes), saving where it stopped. */
#include "sample_amp.h"

int main(int argc, char **argv) {
    static const char *const flags[] = { "--batch-size=32", "--data=build/data/face-synthetic/training.csv", "--epochs=6", "--lr=1e-3", "--lr-schedule=cosine", "--max-steps=0 (no limit)", "--metrics=none", "--plot=none", "--export-onnx=none", "--resume=none", "--save=none", "--save-every=0 (never)", "--seed=1", "--workers=2", "--device=$DG_DEVICE, else FLAGS_selected_gpus, else cpu", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)", "--bf16!", "--amp=none (float32)", "--amp-level=O1", "--init-loss-scaling=32768", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    const char *csv = su_flag(argc, argv, "--data", "build/data/face-synthetic/training.csv");
    int epochs = (int)su_flag_num(argc, argv, "--epochs", 6);
    bool cosine = strcmp(su_flag(argc, argv, "--lr-schedule", "cosine"), "cosine") == 0;
    int64_t batch = (int64_t)su_flag_num(argc, argv, "--batch-size", 32);
    double lr = su_flag_num(argc, argv, "--lr", 1e-3);
    int workers = (int)su_flag_num(argc, argv, "--workers", 2);
    uint64_t seed = (uint64_t)su_flag_num(argc, argv, "--seed", 1);
    su_run run = su_run_flags(argc, argv);
    su_amp amp = su_amp_flags(argc, argv);
    const char *resume = su_flag(argc, argv, "--resume", NULL);
    if (su_init(argc, argv, seed)) return su_die("init");

    dg_dataset *all = dg_face_keypoints_dataset(csv);
    if (!all) return su_die("dataset (run `make data`, or pass --data training.csv)");
    /* the backbone wants 3 channels: repeat the gray image, as the tutorial's transform does */
    dg_transform rgb = { .kind = DG_TF_GRAY_TO_RGB };
    dg_dataset *rgb_all = dg_dataset_transform(all, &rgb, 1), *train = NULL, *val = NULL;
    if (!rgb_all || dg_dataset_random_split(rgb_all, 0.8, seed, &train, &val)) return su_die("split");
    printf("facial keypoints: %lld train / %lld validation images from %s\n", (long long)dg_dataset_len(train),
           (long long)dg_dataset_len(val), csv);

    dg_dataloader *train_dl = su_train_loader(train, batch, workers, seed);
    dg_dataloader *val_dl = su_eval_loader(val, 64, workers);
    dg_layer *net = dg_facenet(15);
    if (!train_dl || !val_dl || !net) return su_die("setup");
    if (su_amp_model(&amp, net)) return su_die("amp");
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = lr;
    dg_optimizer *opt = dg_adam(params, n, adp);
    free(params);
    if (!opt || su_amp_optimizer(&amp, opt, NULL)) return su_die("optimizer");
    int64_t per_epoch = dg_dataloader_num_batches(train_dl);
    dg_cosine_annealing_lr_params calp = dg_cosine_annealing_lr_default_params();
    calp.base_lr = lr;
    calp.t_max = (int)(epochs * per_epoch);
    dg_lr_scheduler *sched = cosine ? dg_cosine_annealing_lr(opt, calp) : NULL;
    if (cosine && !sched) return su_die("schedule");
    su_position at = { 0, 0, 0 };
    if (resume && su_resume(resume, net, opt, sched, &at)) return su_die("resume");
    char plot_csv[1024];
    const char *metrics_path = su_metrics_path(argc, argv, plot_csv, sizeof plot_csv);
    FILE *metrics = su_metrics_open(metrics_path, resume != NULL);

    double first_val = -1;
    su_eval ev = {0};
    bool stopped = run.max_steps && at.step >= run.max_steps;
    for (int64_t epoch = at.epoch; epoch < epochs && !stopped; epoch++) {
        at.epoch = epoch;
        if (dg_dataloader_start_epoch_at(train_dl, epoch, at.batch)) return su_die("loader");
        su_progress bar;
        su_progress_start(&bar, (int)epoch + 1, epochs, per_epoch - at.batch);
        int err = 0;
        while (!stopped) {
            dg_scope *s = dg_scope_begin();
            dg_sample b;
            int got = dg_dataloader_next(train_dl, &b);
            if (got < 0) return su_die("loader");
            if (got == 0) { dg_scope_end(s); break; }
            su_amp_begin(&amp);
            dg_tensor *loss = dg_mse_loss(dg_forward(net, b.t[0]), b.t[1]);
            su_amp_end(&amp);
            if (!loss || su_amp_backward_step(&amp, loss, opt, NULL, NULL)) return su_die("train step");
            dg_optimizer_clear_grad(opt);
            if (sched) dg_lr_scheduler_step(sched);
            su_progress_step(&bar, dg_item(loss), dg_dim(b.t[0], 0));
            at.step++;
            at.batch++;
            su_metrics_row(metrics, at.step, (int)epoch + 1, dg_item(loss), 0, bar.images / (su_now() - bar.t0));
            dg_scope_end(s);
            stopped = su_after_step(&run, net, opt, sched, at, &err);
            if (err) return su_die("save");
        }
        su_amp_begin(&amp);
        int erc = su_evaluate(net, val_dl, false, &ev);
        su_amp_end(&amp);
        if (erc) return su_die("evaluate");
        if (first_val < 0) first_val = ev.loss;
        if (at.batch >= per_epoch) su_metrics_eval(metrics, at.step, (int)epoch + 1, ev.loss, -1);   /* whole epochs only: a resumed run logs the same rows */
        printf("epoch %lld%s: train MSE %.6f, validation MSE %.6f\n", (long long)epoch + 1,
               at.batch < per_epoch ? " (stopped by --max-steps)" : "", bar.loss_sum / (bar.loss_n ? bar.loss_n : 1), ev.loss);
        if (su_end_epoch(&run, net, opt, sched, at, per_epoch)) return su_die("save");
        if (at.batch >= per_epoch) at.batch = 0;
    }
    if (first_val > 0) printf("validation MSE: first epoch %.6f, last epoch %.6f (%.1fx lower)\n", first_val, ev.loss, first_val / ev.loss);
    if (metrics) fclose(metrics);
    if (metrics_path && su_plot(argc, argv, metrics_path)) return 1;
    if (su_export_onnx(argc, argv, net, val)) return 1;
    dg_lr_scheduler_free(sched);
    su_amp_free(&amp);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_dataloader_free(train_dl);
    dg_dataloader_free(val_dl);
    dg_dataset_free(train); dg_dataset_free(val); dg_dataset_free(rgb_all); dg_dataset_free(all);
    dg_shutdown();
    return 0;
}
