/* tools/dgplot.c — training curves of one or more runs in one picture: reads the metrics CSV
 * files the samples write (--metrics) and draws their training loss and test accuracy (or test
 * loss) against the optimizer step into an SVG (samples/svg_plot.h), one colour per run.
 *
 *   dgplot run1.csv run2.csv -o cmp.svg [--label f32 --label bf16] [--every N]
 *
 * --label names the runs in order (default: the file names); --every averages the training loss
 * over N steps (default: about 200 points per run). */
#include "../samples/svg_plot.h"

static void usage(FILE *to) {
    fprintf(to, "usage: dgplot RUN.csv [RUN.csv ...] -o OUT.svg [--label NAME ...] [--every N (auto)]\n");
}
static int usage_error(const char *fmt, const char *arg) {
    usage(stderr);
    fprintf(stderr, "dgplot: error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    return 2;
}

int main(int argc, char **argv) {
    const char *out = NULL, *files[16], *labels[16];
    int nf = 0, nl = 0, every = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        if (!strcmp(a, "-o") || !strcmp(a, "--out") || !strcmp(a, "--label") || !strcmp(a, "--every")) {
            if (i + 1 >= argc || !strncmp(argv[i + 1], "--", 2)) return usage_error("argument %s: expected one argument", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--label")) {
                if (nl == 16) return usage_error("at most 16 labels (%s)", v);
                labels[nl++] = v;
            } else if (!strcmp(a, "--every")) {
                char *end;
                long e = strtol(v, &end, 10);
                if (!*v || *end || e < 1 || e > 1000000) return usage_error("argument --every: a whole number in [1, 1000000], got '%s'", v);
                every = (int)e;
            } else out = v;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unrecognized arguments: %s", a);
        } else {
            if (nf == 16) return usage_error("at most 16 runs (%s)", a);
            files[nf++] = a;
        }
    }
    if (!nf) return usage_error("%s", "no metrics CSV given");
    if (!out) return usage_error("%s", "the output is missing: -o OUT.svg");
    if (nl && nl != nf) {
        char msg[64];
        snprintf(msg, sizeof msg, "%d labels for %d runs", nl, nf);
        return usage_error("%s", msg);
    }
    sp_run runs[16];
    char err[512] = "";
    for (int r = 0; r < nf; r++) {
        if (sp_read_metrics(files[r], every, &runs[r], err, sizeof err)) {
            fprintf(stderr, "dgplot: %s\n", err);
            for (int k = 0; k < r; k++) sp_run_free(&runs[k]);
            return 1;
        }
        if (nl) snprintf(runs[r].label, sizeof runs[r].label, "%s", labels[r]);
    }
    int rc = sp_write_svg(out, runs, nf, err, sizeof err);
    if (rc) fprintf(stderr, "dgplot: %s\n", err);
    else printf("dgplot: %d run%s -> %s\n", nf, nf == 1 ? "" : "s", out);
    for (int r = 0; r < nf; r++) sp_run_free(&runs[r]);
    return rc ? 1 : 0;
}
