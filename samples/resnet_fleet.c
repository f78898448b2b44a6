/* samples/resnet_fleet.c — the collective guide's ResNet data-parallel training in C: ResNet18
 * (or ResNet50, --model) on CIFAR-10-format data (32x32, SYNTHETIC files from `make data` by
 * default; the real cifar-10-batches-bin by --data DIR), each worker reading its own share of
 * every epoch, Momentum SGD, DataParallel from fleet's strategy, the first worker evaluating and
 * saving. Batch size is per worker.
 *
 *   dgrun --nproc_per_node 2 build/bin/resnet_fleet [--epochs 1]     (CPU workers, MPI)
 *   dgrun --gpus 0,1 build/bin/resnet_fleet                          (one GPU each, NCCL)
 *
 *   options: [--model resnet18|resnet50] [--data DIR] [--epochs 2] [--batch-size 32] [--lr 0.05]
 *            [--momentum 0.9] [--workers 1] [--threads N] [--overlap 0|1] [--seed 1] [--max-steps N]
 *            [--save PREFIX] [--local-sgd-steps K [--local-sgd-warmup W] [--adaptive-local-sgd]]
 *            [--recompute] [--sync-bn]
 *
 * The strategy options are the guide's: Local SGD (use_local_sgd: K steps alone between
 * averagings, K growing 1, 2, 4, ... to K after W epochs, or from the adaptive rule on each epoch's
 * mean loss; BN running statistics averaged with the parameters), recompute with every
 * residual block as a checkpoint, and SyncBatchNorm (--sync-bn: every BatchNorm converted, so
 * the batch statistics are those of all workers' batches together). */
#include "sample_util.h"

static int mark_blocks(dg_layer *l, void *user) {
    if (!dg_layer_is(l, dg_resnet_basic_block_class()) && !dg_layer_is(l, dg_resnet_bottleneck_class())) return 0;
    (*(int *)user)++;
    return dg_layer_set_recompute(l, true);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--model=resnet18", "--data=build/data/cifar10-synthetic", "--batch-size=32", "--epochs=2", "--lr=0.05", "--momentum=0.9", "--max-steps=0 (no limit)",
                                         "--overlap=1", "--save=none", "--seed=1", "--workers=1", "--device=$DG_DEVICE, else FLAGS_selected_gpus, else cpu", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)",
                                         "--local-sgd-steps=0 (off)", "--local-sgd-warmup=0", "--adaptive-local-sgd!", "--recompute!", "--sync-bn!", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    const char *model_name = su_flag(argc, argv, "--model", "resnet18");
    const char *dir = su_flag(argc, argv, "--data", "build/data/cifar10-synthetic");
    int epochs = (int)su_flag_count(argc, argv, "--epochs", 2);
    int64_t batch = su_flag_count(argc, argv, "--batch-size", 32);
    double lr = su_flag_num(argc, argv, "--lr", 0.05);
    double momentum = su_flag_num(argc, argv, "--momentum", 0.9);
    int workers = (int)su_flag_count(argc, argv, "--workers", 1);
    int64_t max_steps = su_flag_count(argc, argv, "--max-steps", 0);
    uint64_t seed = (uint64_t)su_flag_count(argc, argv, "--seed", 1);
    const char *save = su_flag(argc, argv, "--save", NULL);
    if (strcmp(model_name, "resnet18") && strcmp(model_name, "resnet50")) {
        fprintf(stderr, "%s: error: --model must be resnet18 or resnet50, got '%s'\n", argv[0], model_name);
        return 2;
    }
    if (!(lr > 0) || !(momentum >= 0 && momentum < 1) || batch < 1) {
        fprintf(stderr, "%s: error: --lr must be > 0, --momentum in [0, 1) and --batch-size >= 1\n", argv[0]);
        return 2;
    }
    int local_k = (int)su_flag_count(argc, argv, "--local-sgd-steps", 0), local_warm = (int)su_flag_count(argc, argv, "--local-sgd-warmup", 0);
    bool adaptive = su_has(argc, argv, "--adaptive-local-sgd");
    if ((adaptive || su_flag(argc, argv, "--local-sgd-warmup", NULL)) && local_k < 1) {
        fprintf(stderr, "%s: error: --local-sgd-warmup and --adaptive-local-sgd need --local-sgd-steps K >= 1\n", argv[0]);
        return 2;
    }

    if (su_init(argc, argv, seed)) return su_die("init");
    dg_fleet_strategy strategy = dg_fleet_default_strategy();
    strategy.overlap = su_flag_num(argc, argv, "--overlap", 1) != 0;
    strategy.use_local_sgd = local_k >= 1;
    strategy.local_sgd_steps = local_k >= 1 ? local_k : 1;
    strategy.local_sgd_is_warm_steps = local_warm;
    if (dg_fleet_init(true, &strategy)) return su_die("fleet init");
    int rank = dg_fleet_worker_index(), world = dg_fleet_worker_num();

    dg_transform norm = { .kind = DG_TF_NORMALIZE, .channels = 3, .mean = { 0.5, 0.5, 0.5 }, .std = { 0.5, 0.5, 0.5 } };
    dg_dataset *train_raw = dg_cifar10_dataset(dir, true), *test_raw = train_raw ? dg_cifar10_dataset(dir, false) : NULL;
    if (!train_raw || !test_raw) return su_die("dataset (run `make data`, or pass --data DIR)");
    dg_dataset *train = dg_dataset_transform(train_raw, &norm, 1), *test = dg_dataset_transform(test_raw, &norm, 1);
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
    dg_dataloader *test_dl = su_eval_loader(test, 256, workers);
    dg_resnet_params rp = dg_resnet_default_params();
    rp.num_classes = 10;
    dg_layer *net = strcmp(model_name, "resnet50") == 0 ? dg_resnet50(rp) : dg_resnet18(rp);
    if (!sampler || !train_dl || !test_dl || !net) return su_die("setup");
    if (su_has(argc, argv, "--sync-bn") && !(net = dg_nn_convert_sync_batch_norm(net, dg_fleet_comm()))) return su_die("sync bn");
    int blocks = 0;
    if (su_has(argc, argv, "--recompute") && dg_layer_apply(net, mark_blocks, &blocks)) return su_die("recompute");
    int n;
    dg_tensor **params = dg_layer_parameters(net, &n);
    dg_momentum_params mp = dg_momentum_default_params();
    mp.lr = lr;
    mp.momentum = momentum;
    dg_optimizer *opt = dg_fleet_distributed_optimizer(dg_momentum(params, n, mp));
    free(params);
    dg_layer *model = dg_fleet_distributed_model(dg_layer_ref(net));
    if (!opt || !model) return su_die("distributed setup");
    /* BN's running statistics drift apart between averagings: they are averaged with the weights */
    if (strategy.use_local_sgd && dg_dp_set_local_sgd(model, 1, true)) return su_die("local sgd");
    if (rank == 0) {
        printf("%s, %d workers, %lld train images from %s, %lld batches of %lld per worker", model_name, world,
               (long long)dg_dataset_len(train), dir, (long long)dg_dataloader_num_batches(train_dl), (long long)batch);
        if (blocks) printf(", %d blocks recomputed", blocks);
        if (su_has(argc, argv, "--sync-bn")) printf(", SyncBatchNorm");
        printf("\n");
    }

    double t_train = 0, ini_loss = 0;
    int64_t steps = 0;
    int cur_k = 1;
    su_eval ev = { 0 };
    for (int64_t epoch = 0; epoch < epochs; epoch++) {
        double t0 = su_now(), loss_sum = 0;
        int64_t nb = 0, images = 0;
        if (strategy.use_local_sgd) {
            if (!adaptive) cur_k = dg_fleet_get_local_sgd_steps((int)epoch, local_k, local_warm);
            if (dg_dp_set_local_sgd(model, cur_k, true)) return su_die("local sgd");
        }
        if (dg_dataloader_start_epoch(train_dl, epoch)) return su_die("loader");
        for (;;) {
            dg_scope *s = dg_scope_begin();
            dg_sample b;
            int got = dg_dataloader_next(train_dl, &b);
            if (got < 0) return su_die("loader");
            if (got == 0 || (max_steps && steps >= max_steps)) { dg_scope_end(s); break; }
            dg_tensor *loss = dg_cross_entropy(dg_forward(model, b.t[0]), b.t[1]);
            if (!loss) return su_die("forward");
            double l = dg_item(loss);
            if (dg_backward(dg_dp_scale_loss(model, loss)) || dg_dp_apply_collective_grads(model) ||
                dg_optimizer_step(opt) || dg_optimizer_clear_grad(opt))
                return su_die("train step");
            loss_sum += l;
            images += dg_dim(b.t[0], 0);
            if (nb % 20 == 0) { printf("epoch: %lld, batch_id: %lld, loss is: [%.7g]\n", (long long)epoch, (long long)nb, l); fflush(stdout); }
            nb++;
            steps++;
            dg_scope_end(s);
        }
        if (strategy.use_local_sgd) {   /* every epoch ends averaged, so worker 0 evaluates the common model */
            if (su_local_sgd_end_epoch(model, rank, epoch, true, adaptive, loss_sum / (nb ? nb : 1), lr, local_k, &ini_loss, &cur_k))
                return 1;
        }
        double dt = su_now() - t0;
        t_train += dt;
        if (rank == 0) {
            if (su_evaluate(net, test_dl, true, &ev)) return su_die("evaluate");
            printf("epoch %lld: train loss %.4f, test accuracy %.4f (%lld images), %.1f img/s per worker, %.1f img/s in all\n",
                   (long long)epoch + 1, loss_sum / (nb ? nb : 1), ev.accuracy, (long long)ev.n, images / dt, images * world / dt);
        }
    }
    if (rank == 0) printf("test accuracy: %.4f\ntraining time: %.1f s\n", ev.accuracy, t_train);
    if (save) {
        char path[600];
        snprintf(path, sizeof path, "%s.model.safetensors", save);
        if (dg_fleet_save(net, path)) return su_die("save");
        if (rank == 0) printf("saved %s\n", path);
    }
    dg_optimizer_free(opt);
    dg_layer_free(model);
    dg_layer_free(net);
    dg_dataloader_free(train_dl);
    dg_dataloader_free(test_dl);
    dg_batch_sampler_free(sampler);
    dg_dataset_free(train);
    dg_dataset_free(test);
    dg_dataset_free(train_raw);
    dg_dataset_free(test_raw);
    dg_fleet_shutdown();
    dg_shutdown();
    return 0;
}
