/* samples/time_sequence_prediction.c — pytorch/examples' time_sequence_prediction (train.py and
 * generate_sine_wave.py) in C: two LSTM cells learn sine waves and then generate their future.
 *
 *   time_sequence_prediction [--steps 15] [--length 1000] [--device cpu] [--no-plot] [--threads N] [--max-steps N]
 *                            [--save-init FILE] [--dump-batches FILE] [--loss-log FILE] [--profile FILE]
 *
 * Data, as generate_sine_wave.py makes traindata.pt: T = 20, L = 1000, N = 100 waves,
 * x[n][j] = j + shift[n] with shift[n] drawn uniformly from [-4T, 4T) (numpy's randint(-80, 80,
 * N) under np.random.seed(2) there; here dg_randint from dygraph's generator seeded 2, so the
 * shifts differ from numpy's: --dump-batches writes them), data = sin(x / 1.0 / T) in float64.
 * --length sets L (the original's is fixed; shorter waves train faster: test/seq_parity.py uses
 * 120). Waves 3.. are the training set (input data[3:, :-1], target data[3:, 1:]), waves 0..2 the test.
 *
 * Model (train.py's Sequence, float64, the generator then seeded 0 as torch.manual_seed(0)):
 * lstm1 LSTMCell(1, 51), lstm2 LSTMCell(51, 51), linear Linear(51, 1) and dummy_param (an empty
 * parameter the original keeps to find its device); each time step feeds the wave's value
 * through both cells and the linear layer; with future > 0 the model then feeds its own output
 * back for that many more steps. Training: LBFGS(lr=0.8) with torch's defaults (max_iter 20, at
 * most 25 closure evaluations per step), MSELoss; each of --steps steps prints "STEP: i", every
 * closure evaluation's "loss: ..." and, after the step, "test loss: ..." of the three test waves
 * predicted 1000 steps into the future, as the original. The original's predict%d.pdf plots are
 * written as predict%d.svg (the test waves, dotted where predicted) unless --no-plot.
 * --device: LBFGS runs on the CPU in dygraph, so cpu is its only value (the original's default
 * is cuda).
 *
 * For checking against PyTorch (test/seq_parity.py): --save-init writes the initial state dict
 * (torch's names: lstm1.weight_ih, ..., linear.bias, dummy_param), --dump-batches the random
 * shifts ("shifts" i64 [N]) and the data ("data" f64 [N, L]), --loss-log one line per closure
 * evaluation ("<evaluation> <loss>") and one per step's test ("test <step> <loss>"), with 17
 * significant digits (the model is float64). --max-steps N stops after N steps (as --steps N). */
#include "sample_util.h"
#include <math.h>

enum { T = 20, N = 100, HIDDEN = 51, FUTURE = 1000 };
static int L = 1000;   /* --length */

static const dg_layer_class sequence_class = DG_LAYER_CLASS("Sequence");

static dg_layer *sequence_new(void) {
    dg_layer *l = dg_layer_new(&sequence_class, NULL, NULL, NULL);
    dg_nn_rnn_params cp = dg_nn_rnn_default_params();
    cp.dtype = DG_F64;   /* Sequence().double() */
    dg_nn_linear_params lp = dg_nn_linear_default_params();
    lp.dtype = DG_F64;
    if (!l || dg_layer_add_parameter(l, "dummy_param", dg_zeros(DG_SHAPE(0), DG_F64)) ||
        dg_layer_add_sublayer(l, "lstm1", dg_nn_rnn_cell(DG_RNN_LSTM, 1, HIDDEN, cp)) ||
        dg_layer_add_sublayer(l, "lstm2", dg_nn_rnn_cell(DG_RNN_LSTM, HIDDEN, HIDDEN, cp)) ||
        dg_layer_add_sublayer(l, "linear", dg_nn_linear_ext(HIDDEN, 1, lp))) {
        dg_layer_free(l);
        return NULL;
    }
    return l;
}

/* Sequence.forward(input, future): input [n, steps] -> [n, steps + future]. */
static dg_tensor *sequence_forward(dg_layer *seq, const dg_tensor *input, int64_t future) {
    dg_layer *lstm1 = dg_layer_sublayer(seq, "lstm1"), *lstm2 = dg_layer_sublayer(seq, "lstm2"), *linear = dg_layer_sublayer(seq, "linear");
    int64_t n = dg_dim(input, 0), steps = dg_dim(input, 1), k = 0;
    dg_tensor **outputs = malloc(sizeof *outputs * (size_t)(steps + future));
    if (!outputs) return NULL;
    dg_tensor *h_t = dg_zeros(DG_SHAPE(n, HIDDEN), DG_F64), *c_t = dg_zeros(DG_SHAPE(n, HIDDEN), DG_F64);
    dg_tensor *h_t2 = dg_zeros(DG_SHAPE(n, HIDDEN), DG_F64), *c_t2 = dg_zeros(DG_SHAPE(n, HIDDEN), DG_F64), *output = NULL;
    for (int64_t i = 0; i < steps + future; i++) {
        dg_tensor *input_t = i < steps ? dg_slice(input, 1, i, i + 1, 1) : output;   /* input.split(1, dim=1), then the prediction */
        dg_rnn_result r1, r2;
        if (dg_nn_rnn_cell_forward(lstm1, input_t, h_t, c_t, &r1)) { free(outputs); return NULL; }
        h_t = r1.h_n;
        c_t = r1.c_n;
        if (dg_nn_rnn_cell_forward(lstm2, h_t, h_t2, c_t2, &r2)) { free(outputs); return NULL; }
        h_t2 = r2.h_n;
        c_t2 = r2.c_n;
        output = dg_forward(linear, h_t2);
        if (!output) { free(outputs); return NULL; }
        outputs[k++] = output;
    }
    dg_tensor *out = dg_concat(outputs, (int)k, 1);
    free(outputs);
    return out;
}

/* A double as Python's print shows it (the shortest repr that reads back the same). */
static const char *pyfloat(double v, char *buf, size_t len) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".eni")) snprintf(buf + strlen(buf), len - strlen(buf), ".0");
    return buf;
}

/* data[rows a..b), columns from..from + L - 1) as a tensor: data[a:b, :-1] (from 0), data[a:b, 1:] (from 1) */
static dg_tensor *window(const double *data, int a, int b, int from) {
    double *buf = malloc(sizeof *buf * (size_t)((b - a) * (L - 1)));
    if (!buf) return NULL;
    for (int r = a; r < b; r++) memcpy(buf + (r - a) * (L - 1), data + r * L + from, sizeof *buf * (L - 1));
    dg_tensor *t = dg_from_data(DG_SHAPE(b - a, L - 1), DG_F64, buf);
    free(buf);
    return t;
}

typedef struct closure_ctx {
    dg_layer *seq;
    dg_optimizer *optimizer;
    dg_tensor *input, *target;
    FILE *log;
    int64_t evals;
} closure_ctx;

/* train.py's closure: zero_grad, out = seq(input), loss = criterion(out, target), print, backward */
static int closure(void *user, double *loss) {
    closure_ctx *c = user;
    dg_optimizer_clear_grad(c->optimizer);
    dg_tensor *out = sequence_forward(c->seq, c->input, 0);
    dg_tensor *l = dg_mse_loss(out, c->target);
    if (!l) return -1;
    *loss = dg_item(l);
    char b[40];
    printf("loss: %s\n", pyfloat(*loss, b, sizeof b));
    if (c->log) fprintf(c->log, "%lld %.17g\n", (long long)++c->evals, *loss);
    return dg_backward(l);
}

/* predict%d.svg: the three test waves, solid over the input's steps, dotted over the future. */
static int draw(const char *path, const double *y, int64_t steps, int64_t future) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    const double W = 1500, H = 500, m = 40, total = (double)(steps + future);
    static const char *const colors[3] = { "red", "green", "blue" };
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"24\" font-size=\"18\" text-anchor=\"middle\">Predict future values for time sequences (dotted lines are predicted values)</text>\n", W / 2);
    for (int w = 0; w < 3; w++)
        for (int part = 0; part < 2; part++) {
            int64_t a = part ? steps - 1 : 0, b = part ? steps + future : steps;
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"", colors[w], part ? " stroke-dasharray=\"2,3\"" : "");
            for (int64_t i = a < 0 ? 0 : a; i < b; i++) {
                double v = y[w * (steps + future) + i];
                v = v > 1.5 ? 1.5 : v < -1.5 ? -1.5 : v;
                fprintf(f, "%.1f,%.1f ", m + (W - 2 * m) * (double)i / total, H / 2 - (H / 2 - m) * v / 1.5);
            }
            fprintf(f, "\"/>\n");
        }
    fprintf(f, "</svg>\n");
    return fclose(f);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { "--steps=15", "--length=1000", "--device=cpu (the only one LBFGS runs on)", "--no-plot!", "--threads=automatic ($DG_NUM_THREADS, $OMP_NUM_THREADS)",
                                         "--max-steps=0 (no limit)", "--save-init=none", "--dump-batches=none", "--loss-log=none", SU_PROFILE_FLAG, NULL };
    su_args(argc, argv, flags);
    int64_t steps = su_flag_count(argc, argv, "--steps", 15), max_steps = su_flag_count(argc, argv, "--max-steps", 0);
    if (max_steps && max_steps < steps) steps = max_steps;
    L = (int)su_flag_range(argc, argv, "--length", 1000, 2, 1000000);
    const char *device = su_flag(argc, argv, "--device", "cpu");
    if (strcmp(device, "cpu") != 0) {
        fprintf(stderr, "%s: error: argument --device: '%s': dygraph's LBFGS runs on the CPU only (use cpu)\n", argv[0], device);
        return 2;
    }
    const char *init_path = su_flag(argc, argv, "--save-init", NULL), *dump_path = su_flag(argc, argv, "--dump-batches", NULL);
    const char *log_path = su_flag(argc, argv, "--loss-log", NULL);
    dg_init_params ip = dg_init_default_params();
    ip.device = "cpu";
    ip.num_threads = (int)su_flag_num(argc, argv, "--threads", DG_FROM_ENV);
    ip.seed = 2;   /* generate_sine_wave.py: np.random.seed(2) */
    if (dg_init(&ip) || su_profile_start(argc, argv)) return su_die("init");

    /* generate_sine_wave.py */
    double *data = malloc(sizeof *data * (size_t)(N * L));
    if (!data) return 1;
    int64_t shift[N];
    dg_tensor *shifts = dg_randint(-4 * T, 4 * T, DG_SHAPE(N));
    if (!shifts || dg_to_host(shifts, shift, sizeof shift)) return su_die("shifts");
    for (int n = 0; n < N; n++)
        for (int j = 0; j < L; j++) data[n * L + j] = sin((double)(j + shift[n]) / 1.0 / T);
    if (dump_path) {
        dg_scope *s = dg_scope_begin();
        dg_tensor_dict *d = dg_tensor_dict_new();
        if (!d || dg_tensor_dict_set(d, "shifts", dg_from_data(DG_SHAPE(N), DG_I64, shift)) ||
            dg_tensor_dict_set(d, "data", dg_from_data(DG_SHAPE(N, L), DG_F64, data)) || dg_save_safetensors(dump_path, d))
            return su_die("dump-batches");
        dg_tensor_dict_free(d);
        dg_scope_end(s);
    }
    dg_tensor_free(shifts);

    /* train.py: torch.manual_seed(0); input = data[3:, :-1], target = data[3:, 1:], test: data[:3] */
    dg_manual_seed(0);
    dg_tensor *input = window(data, 3, N, 0), *target = window(data, 3, N, 1);
    dg_tensor *test_input = window(data, 0, 3, 0), *test_target = window(data, 0, 3, 1);
    dg_layer *seq = sequence_new();
    if (!input || !target || !test_input || !test_target || !seq) return su_die("setup");
    if (init_path && dg_layer_save(seq, init_path)) return su_die("save-init");
    int n;
    dg_tensor **params = dg_layer_parameters(seq, &n);
    dg_lbfgs_params lp = dg_lbfgs_default_params();
    lp.lr = 0.8;
    dg_optimizer *optimizer = dg_lbfgs(params, n, lp);
    free(params);
    if (!optimizer) return su_die("optimizer");
    FILE *log = log_path ? fopen(log_path, "w") : NULL;
    if (log_path && !log) { fprintf(stderr, "error: cannot write %s\n", log_path); return 1; }
    closure_ctx ctx = { seq, optimizer, input, target, log, 0 };
    double *y = malloc(sizeof *y * 3 * (L - 1 + FUTURE));
    if (!y) return 1;

    for (int64_t i = 0; i < steps; i++) {
        printf("STEP:  %lld\n", (long long)i);
        if (dg_lbfgs_step(optimizer, closure, &ctx, NULL)) return su_die("LBFGS step");
        /* begin to predict, no need to track gradient here */
        dg_scope *s = dg_scope_begin();
        dg_no_grad_begin();
        dg_tensor *pred = sequence_forward(seq, test_input, FUTURE);
        dg_tensor *loss = dg_mse_loss(dg_slice(pred, 1, 0, L - 1, 1), test_target);
        dg_no_grad_end();
        if (!loss || dg_to_host(dg_contiguous(pred), y, sizeof *y * 3 * (L - 1 + FUTURE))) return su_die("predict");
        char b[40];
        printf("test loss: %s\n", pyfloat(dg_item(loss), b, sizeof b));
        fflush(stdout);
        if (log) fprintf(log, "test %lld %.17g\n", (long long)i, dg_item(loss));
        dg_scope_end(s);
        char path[64];
        snprintf(path, sizeof path, "predict%lld.svg", (long long)i);
        if (!su_has(argc, argv, "--no-plot") && draw(path, y, L - 1, FUTURE)) fprintf(stderr, "warning: cannot write %s\n", path);
    }
    if (log) fclose(log);
    free(y);
    free(data);
    dg_optimizer_free(optimizer);
    dg_layer_free(seq);
    dg_tensor_free(input); dg_tensor_free(target); dg_tensor_free(test_input); dg_tensor_free(test_target);
    dg_shutdown();
    return 0;
}
