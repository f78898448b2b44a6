/* tools/dgplot.c — training curves of one or more runs in one picture: reads the metrics CSV
 * files the samples write (--metrics) and draws their training loss and test accuracy (or test
 * loss) against the optimizer step into an SVG (samples/svg_plot.h), one colour per run.
 *
 *   dgplot run1.csv run2.csv -o cmp.svg [--label f32 --label bf16] [--every N]
 *
 * --label names the runs in order (default: the file names); --every averages the training loss
 * over N steps (default: about 200 points per run). */
#include "../samples/flags.h"
#include "../samples/svg_plot.h"

int main(int argc, char **argv) {
    static const char *const flags[] = { "-o|--out=none: required", "--label=the file names", "--every=about 200 points per run", NULL };
    su_positional pos = { .usage = "RUN.csv [RUN.csv ...]", .min = 1, .max = 16 };
    su_args_pos(argc, argv, flags, &pos);
    const char *out = su_flag(argc, argv, "-o", NULL), *labels[16];
    if (!out) su_usage_error(argv[0], flags, &pos, "the following arguments are required: %s", "-o/--out OUT.svg");
    int nl = su_flag_all(argc, argv, "--label", labels, 16);
    int every = su_flag(argc, argv, "--every", NULL) ? (int)su_flag_range(argc, argv, "--every", 0, 1, 1000000) : 0;
    if (every && every != su_flag_num(argc, argv, "--every", 0))
        su_usage_error(argv[0], flags, &pos, "argument --every: a whole number, got '%s'", su_flag(argc, argv, "--every", ""));
    if (nl && nl != pos.n) {
        char msg[64];
        snprintf(msg, sizeof msg, "%d labels for %d runs", nl, pos.n);
        su_usage_error(argv[0], flags, &pos, "%s", msg);
    }
    sp_run runs[16];
    char err[512] = "";
    for (int r = 0; r < pos.n; r++) {
        if (sp_read_metrics(pos.args[r], every, &runs[r], err, sizeof err)) {
            fprintf(stderr, "dgplot: %s\n", err);
            for (int k = 0; k < r; k++) sp_run_free(&runs[k]);
            return 1;
        }
        if (nl) snprintf(runs[r].label, sizeof runs[r].label, "%s", labels[r]);
    }
    int rc = sp_write_svg(out, runs, pos.n, err, sizeof err);
    if (rc) fprintf(stderr, "dgplot: %s\n", err);
    else printf("dgplot: %d run%s -> %s\n", pos.n, pos.n == 1 ? "" : "s", out);
    for (int r = 0; r < pos.n; r++) sp_run_free(&runs[r]);
    free(pos.args);
    return rc ? 1 : 0;
}
