/* samples/cifar10.c — Paddle's Fleet collective tutorial's first example: MyNet (3 convs, 2 linears) on CIFAR-10 binary
 * batches with Adam 1e-3, batch 32, validation loss and accuracy every epoch. Without the real
 * files it trains on the synthetic CIFAR-format set that `make data` generates (a learnable
 * colour/pattern rule, clearly not CIFAR); pass --data DIR for the real data_batch_*.bin.
 *
 *   cifar10 [--data DIR] [--epochs 5] [--batch-size 32] [--lr 1e-3] [--workers 2] [--threads N]
 *           [--device cpu|gpu] [--bf16] [--amp bf16|fp16] [--amp-level O1|O2] [--init-loss-scaling S] [--seed 1] [--save PREFIX] [--save-every N] [--resume PREFIX]
 *           [--max-steps N] [--metrics FILE.csv] [--plot FILE.svg] [--export-onnx FILE.onnx]
 *
 * --save / --save-every / --resume / --max-steps as in mnist.c: one checkpoint file, resumable
 * in the middle of an epoch. */
#include "sample_amp.h"

int main(int argc, char **argv) {
    static const char *const flags[] = { "--batch-size=32", "--data=build/data/cifar10-synthetic", "--epochs=5", "--lr=1e-3", "--max-steps=0 (no limit)", "--metrics=none", "--plot=none", "--export-onnx=none", "--resume=none", "--save=none", "--save-every=0 (never)", "--seed=1", "--workers=2", "--device=$DG_DEVICE, else FLAGS_selected_gpus, else cpu", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)", "--bf16!", "--amp=none (float32)", "--amp-level=O1", "--init-loss-scaling=32768", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    const char *dir = su_flag(argc, argv, "--data", "build/data/cifar10-synthetic");
    int epochs = (int)su_flag_num(argc, argv, "--epochs", 5);
    int64_t batch = (int64_t)su_flag_num(argc, argv, "--batch-size", 32);
    double lr = su_flag_num(argc, argv, "--lr", 1e-3);
    int workers = (int)su_flag_num(argc, argv, "--workers", 2);
    uint64_t seed = (uint64_t)su_flag_num(argc, argv, "--seed", 1);
    su_run run = su_run_flags(argc, argv);
    su_amp amp = su_amp_flags(argc, argv);
    const char *resume = su_flag(argc, argv, "--resume", NULL);
    if (su_init(argc, argv, seed)) return su_die("init");

    /* Paddle's tutorial normalises with mean 0.5, std 0.5 per channel */
    dg_transform norm = { .kind = DG_TF_NORMALIZE, .channels = 3, .mean = {0.5, 0.5, 0.5}, .std = {0.5, 0.5, 0.5} };
    dg_dataset *train_raw = dg_cifar10_dataset(dir, true), *val_raw = train_raw ? dg_cifar10_dataset(dir, false) : NULL;
    if (!train_raw || !val_raw) return su_die("dataset (run `make data`, or pass --data DIR)");
    dg_dataset *train = dg_dataset_transform(train_raw, &norm, 1), *val = dg_dataset_transform(val_raw, &norm, 1);
    printf("CIFAR-10 format: %lld train / %lld validation images from %s\n", (long long)dg_dataset_len(train),
           (long long)dg_dataset_len(val), dir);

    dg_dataloader *train_dl = su_train_loader(train, batch, workers, seed);
    dg_dataloader *val_dl = su_eval_loader(val, 256, workers);
    dg_layer *net = dg_cifar_mynet(10);
    if (!train_dl || !val_dl || !net) return su_die("setup");
    if (su_amp_model(&amp, net)) return su_die("amp");
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = lr;
    dg_optimizer *opt = dg_adam(params, n, adp);
    free(params);
    if (!opt || su_amp_optimizer(&amp, opt, NULL)) return su_die("optimizer");
    su_position at = { 0, 0, 0 };
    if (resume && su_resume(resume, net, opt, NULL, &at)) return su_die("resume");
    char plot_csv[1024];
    const char *metrics_path = su_metrics_path(argc, argv, plot_csv, sizeof plot_csv);
    FILE *metrics = su_metrics_open(metrics_path, resume != NULL);

    su_eval ev = {0};
    int64_t nb = dg_dataloader_num_batches(train_dl);
    bool stopped = run.max_steps && at.step >= run.max_steps;
    for (int64_t epoch = at.epoch; epoch < epochs && !stopped; epoch++) {
        at.epoch = epoch;
        if (dg_dataloader_start_epoch_at(train_dl, epoch, at.batch)) return su_die("loader");
        su_progress bar;
        su_progress_start(&bar, (int)epoch + 1, epochs, nb - at.batch);
        int err = 0;
        while (!stopped) {
            dg_scope *s = dg_scope_begin();
            dg_sample b;
            int got = dg_dataloader_next(train_dl, &b);
            if (got < 0) return su_die("loader");
            if (got == 0) { dg_scope_end(s); break; }
            su_amp_begin(&amp);
            dg_tensor *logits = dg_forward(net, b.t[0]);
            dg_tensor *loss = dg_cross_entropy(logits, b.t[1]);
            su_amp_end(&amp);
            if (!loss || su_amp_backward_step(&amp, loss, opt, NULL, NULL)) return su_die("train step");
            dg_optimizer_clear_grad(opt);
            at.step++;   /* optimizer steps, whether or not a metrics log is kept: a resume continues it */
            at.batch++;
            su_progress_step(&bar, dg_item(loss), dg_dim(b.t[0], 0));
            if (metrics) {
                dg_no_grad_begin();
                double acc = dg_item(dg_accuracy(logits, b.t[1], 1));
                dg_no_grad_end();
                su_metrics_row(metrics, at.step, (int)epoch + 1, dg_item(loss), acc, bar.images / (su_now() - bar.t0));
            }
            dg_scope_end(s);
            stopped = su_after_step(&run, net, opt, NULL, at, &err);
            if (err) return su_die("save");
        }
        su_amp_begin(&amp);
        int erc = su_evaluate(net, val_dl, true, &ev);
        su_amp_end(&amp);
        if (erc) return su_die("evaluate");
        if (at.batch >= nb) su_metrics_eval(metrics, at.step, (int)epoch + 1, ev.loss, ev.accuracy);   /* whole epochs only: a resumed run logs the same rows */
        printf("epoch %lld%s: train loss %.4f, validation loss %.4f, validation accuracy %.4f\n", (long long)epoch + 1,
               at.batch < nb ? " (stopped by --max-steps)" : "", bar.loss_sum / (bar.loss_n ? bar.loss_n : 1), ev.loss, ev.accuracy);
        if (su_end_epoch(&run, net, opt, NULL, at, nb)) return su_die("save");
        if (at.batch >= nb) at.batch = 0;
    }
    printf("validation accuracy: %.4f\n", ev.accuracy);
    if (metrics) fclose(metrics);
    if (metrics_path && su_plot(argc, argv, metrics_path)) return 1;
    if (su_export_onnx(argc, argv, net, val)) return 1;
    su_amp_free(&amp);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_dataloader_free(train_dl);
    dg_dataloader_free(val_dl);
    dg_dataset_free(train); dg_dataset_free(val); dg_dataset_free(train_raw); dg_dataset_free(val_raw);
    dg_shutdown();
    return 0;
}
