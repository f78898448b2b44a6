/* samples/svg_plot.h — training curves as a picture: reads the samples' metrics CSV files
 * (step,epoch,loss,accuracy,img_per_s,test_loss,test_accuracy; a step row has its training loss,
 * an epoch's last row its test figures) and writes one SVG with two panels against the optimizer
 * step: the training loss (averaged over logging intervals of a few steps) and the test accuracy
 * per epoch (the test loss where a run has no accuracy, e.g. keypoint regression), each run in
 * its own colour, with ticks, axis labels and a legend. Used by the samples' --plot and by
 * tools/dgplot.c.
 *
 * SVG written directly: a few hundred lines of text need no plotting stack, the file is
 * readable and diffable, and any browser renders it. The panels carry their data ranges and
 * pixel boxes as attributes (data-x0 ... data-box) so a test can check every point lands where
 * its value says. Header-only (static functions), like sample_util.h. */
#ifndef DG_SVG_PLOT_H
#define DG_SVG_PLOT_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sp_run {
    char label[128];
    int n_loss, n_test;
    double *loss_x, *loss_y;     /* step, training loss (one per logging interval) */
    double *test_x, *test_y;     /* step, test accuracy (or test loss) per epoch */
    bool test_is_loss;           /* the run logged test loss but no accuracy */
} sp_run;

static void sp_run_free(sp_run *r) {
    free(r->loss_x); free(r->loss_y); free(r->test_x); free(r->test_y);
    memset(r, 0, sizeof *r);
}

/* One CSV field of line (0-based) into out ("" when absent). */
static void sp_field(const char *line, int k, char *out, size_t len) {
    const char *p = line;
    for (int i = 0; i < k && p; i++) { p = strchr(p, ','); if (p) p++; }
    size_t n = 0;
    if (p) while (p[n] && p[n] != ',' && p[n] != '\n' && p[n] != '\r') n++;
    if (n >= len) n = len - 1;
    memcpy(out, p ? p : "", n);
    out[n] = 0;
}

static bool sp_push(double **x, double **y, int *n, int *cap, double a, double b) {
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 256;
        double *nx = realloc(*x, sizeof(double) * (size_t)c), *ny = nx ? realloc(*y, sizeof(double) * (size_t)c) : NULL;
        if (nx) *x = nx;
        if (ny) *y = ny;
        if (!nx || !ny) return false;
        *cap = c;
    }
    (*x)[*n] = a; (*y)[(*n)++] = b;
    return true;
}

/* Reads a metrics CSV into r (label: the file name without folders and ".csv"); 0, or -1 with a
 * message in err naming the file and line. `every` > 0: training loss averaged over that many
 * steps; 0: chosen so a run has at most about 200 points. */
static int sp_read_metrics(const char *path, int every, sp_run *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    const char *base = strrchr(path, '/');
    snprintf(r->label, sizeof r->label, "%.127s", base ? base + 1 : path);
    char *dot = strstr(r->label, ".csv");
    if (dot && dot[4] == 0) *dot = 0;
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, errlen, "cannot open %.300s", path); return -1; }
    char line[1024], cell[64];
    int col_step = -1, col_loss = -1, col_tacc = -1, col_tloss = -1, lineno = 1;
    if (!fgets(line, sizeof line, f)) { fclose(f); snprintf(err, errlen, "%.300s is empty", path); return -1; }
    for (int k = 0; k < 16; k++) {
        sp_field(line, k, cell, sizeof cell);
        if (!strcmp(cell, "step")) col_step = k;
        else if (!strcmp(cell, "loss")) col_loss = k;
        else if (!strcmp(cell, "test_accuracy")) col_tacc = k;
        else if (!strcmp(cell, "test_loss")) col_tloss = k;
    }
    if (col_step < 0 || col_loss < 0) {
        fclose(f);
        snprintf(err, errlen, "%.300s line 1: not a metrics log (want columns step and loss, got '%.60s')", path, line);
        return -1;
    }
    /* all rows first, then the averaging (its interval depends on the count) */
    double *sx = NULL, *sy = NULL, *tx = NULL, *ta = NULL, *tl = NULL, *tl_x = NULL;
    int ns = 0, cs = 0, nta = 0, cta = 0, ntl = 0, ctl = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '\n' || line[0] == 0) continue;
        char *end;
        sp_field(line, col_step, cell, sizeof cell);
        double step = strtod(cell, &end);
        if (!*cell || *end) { snprintf(err, errlen, "%.300s line %d: step '%s' is not a number", path, lineno, cell); ok = false; break; }
        sp_field(line, col_loss, cell, sizeof cell);
        if (*cell) {
            double v = strtod(cell, &end);
            if (*end) { snprintf(err, errlen, "%.300s line %d: loss '%s' is not a number", path, lineno, cell); ok = false; break; }
            ok = sp_push(&sx, &sy, &ns, &cs, step, v);
        }
        if (col_tacc >= 0) {
            sp_field(line, col_tacc, cell, sizeof cell);
            if (*cell) ok = ok && sp_push(&tx, &ta, &nta, &cta, step, strtod(cell, NULL));
        }
        if (col_tloss >= 0) {
            sp_field(line, col_tloss, cell, sizeof cell);
            if (*cell) ok = ok && sp_push(&tl_x, &tl, &ntl, &ctl, step, strtod(cell, NULL));
        }
        if (!ok && !*err) snprintf(err, errlen, "%.300s: out of memory", path);
    }
    fclose(f);
    if (ok && ns == 0) { snprintf(err, errlen, "%.300s: no training-loss rows", path); ok = false; }
    if (ok) {
        int k = every > 0 ? every : (ns + 199) / 200;
        int cap = 0;
        for (int i = 0; ok && i < ns; i += k) {
            double s = 0, x = 0;
            int m = 0;
            for (int j = i; j < ns && j < i + k; j++, m++) { s += sy[j]; x = sx[j]; }
            ok = sp_push(&r->loss_x, &r->loss_y, &r->n_loss, &cap, x, s / m);
        }
        /* accuracy where the run has it, else its test loss */
        r->test_is_loss = nta == 0 && ntl > 0;
        r->test_x = r->test_is_loss ? tl_x : tx;
        r->test_y = r->test_is_loss ? tl : ta;
        r->n_test = r->test_is_loss ? ntl : nta;
        if (r->test_is_loss) { tl_x = tl = NULL; } else { tx = ta = NULL; }
    }
    free(sx); free(sy); free(tx); free(ta); free(tl); free(tl_x);
    if (!ok) sp_run_free(r);
    return ok ? 0 : -1;
}

/* Tick spacing of 1, 2 or 5 times a power of ten giving about five ticks over [lo, hi]. */
static double sp_tick_step(double lo, double hi) {
    double span = hi - lo > 0 ? hi - lo : 1, raw = span / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}
/* [lo, hi] widened to whole ticks. */
static void sp_nice(double *lo, double *hi) {
    if (!(*hi > *lo)) { *hi = *lo + 1; }
    double st = sp_tick_step(*lo, *hi);
    *lo = floor(*lo / st) * st;
    *hi = ceil(*hi / st) * st;
}

static const char *const sp_colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf" };
#define SP_NCOLORS 8

/* One panel: box at (px, py) of pw x ph pixels; which = 0 training loss, 1 test figure; both
 * panels span the steps [x0, x1] so that an epoch's mark stands under its part of the loss. */
static void sp_panel(FILE *f, const sp_run *runs, int n, int which, double x0, double x1, double px, double py, double pw,
                     double ph, const char *title, const char *ylabel) {
    double y0 = INFINITY, y1 = -INFINITY;
    int pts = 0;
    for (int r = 0; r < n; r++) {
        int m = which ? runs[r].n_test : runs[r].n_loss;
        const double *ys = which ? runs[r].test_y : runs[r].loss_y;
        for (int i = 0; i < m; i++) {
            if (!isfinite(ys[i])) continue;
            y0 = fmin(y0, ys[i]); y1 = fmax(y1, ys[i]);
            pts++;
        }
    }
    if (!pts) { y0 = 0; y1 = 1; }
    sp_nice(&y0, &y1);
    fprintf(f, "<g class=\"panel\" id=\"%s\" data-x0=\"%.17g\" data-x1=\"%.17g\" data-y0=\"%.17g\" data-y1=\"%.17g\" "
               "data-box=\"%.1f %.1f %.1f %.1f\">\n", which ? "test" : "loss", x0, x1, y0, y1, px, py, pw, ph);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">%s</text>\n",
            px + pw / 2, py - 12, title);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" stroke=\"#444444\"/>\n", px, py, pw, ph);
#define SP_X(v) (px + ((v) - x0) / (x1 - x0) * pw)
#define SP_Y(v) (py + ph - ((v) - y0) / (y1 - y0) * ph)
    double st = sp_tick_step(x0, x1);
    for (double t = x0; t <= x1 + st * 1e-6; t += st) {
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>", SP_X(t), py, SP_X(t), py + ph);
        fprintf(f, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>", SP_X(t), py + ph, SP_X(t), py + ph + 5);
        fprintf(f, "<text class=\"xtick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">%g</text>\n", SP_X(t), py + ph + 19, t);
    }
    st = sp_tick_step(y0, y1);
    for (double t = y0; t <= y1 + st * 1e-6; t += st) {
        fprintf(f, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e6e6\"/>", px, SP_Y(t), px + pw, SP_Y(t));
        fprintf(f, "<line class=\"tick\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444444\"/>", px - 5, SP_Y(t), px, SP_Y(t));
        fprintf(f, "<text class=\"ytick\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">%g</text>\n", px - 8, SP_Y(t) + 4, t);
    }
    fprintf(f, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">optimizer step</text>\n",
            px + pw / 2, py + ph + 40);
    fprintf(f, "<text class=\"ylabel\" transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">%s</text>\n",
            px - 52, py + ph / 2, ylabel);
    for (int r = 0; r < n; r++) {
        int m = which ? runs[r].n_test : runs[r].n_loss;
        const double *xs = which ? runs[r].test_x : runs[r].loss_x, *ys = which ? runs[r].test_y : runs[r].loss_y;
        const char *c = sp_colors[r % SP_NCOLORS];
        fprintf(f, "<polyline class=\"curve\" data-run=\"%d\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", r, c);
        for (int i = 0; i < m; i++)
            if (isfinite(ys[i])) fprintf(f, "%s%.2f,%.2f", i ? " " : "", SP_X(xs[i]), SP_Y(ys[i]));
        fprintf(f, "\"/>\n");
        if (which)   /* one mark per epoch */
            for (int i = 0; i < m; i++)
                if (isfinite(ys[i])) fprintf(f, "<circle class=\"mark\" data-run=\"%d\" cx=\"%.2f\" cy=\"%.2f\" r=\"4\" fill=\"%s\"/>\n",
                                             r, SP_X(xs[i]), SP_Y(ys[i]), c);
    }
#undef SP_X
#undef SP_Y
    fprintf(f, "</g>\n");
}

static void sp_escape(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* Writes the runs' curves to path (written to path.tmp, then renamed); 0, or -1 with err. */
static int sp_write_svg(const char *path, const sp_run *runs, int n, char *err, size_t errlen) {
    const double W = 1000, pw = 380, ph = 300, top = 60, left1 = 90, left2 = 580;
    int rows = 1;   /* legend rows, laid out as below */
    for (double lx = left1, r = 0; r < n; r++) {
        lx += 36 + 8.0 * (double)strlen(runs[(int)r].label) + 40;
        if (lx > W - 200 && r + 1 < n) { lx = left1; rows++; }
    }
    const double H = top + ph + 95 + 20.0 * (rows - 1);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { snprintf(err, errlen, "cannot write %.400s", tmp); return -1; }
    bool all_loss = n > 0;
    for (int r = 0; r < n; r++) all_loss = all_loss && runs[r].test_is_loss;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
               "font-family=\"DejaVu Sans, Arial, sans-serif\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            W, H, W, H);
    double x0 = INFINITY, x1 = -INFINITY;
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < runs[r].n_loss; i++) { x0 = fmin(x0, runs[r].loss_x[i]); x1 = fmax(x1, runs[r].loss_x[i]); }
        for (int i = 0; i < runs[r].n_test; i++) { x0 = fmin(x0, runs[r].test_x[i]); x1 = fmax(x1, runs[r].test_x[i]); }
    }
    if (!(x1 >= x0)) { x0 = 0; x1 = 1; }
    if (x0 > 0 && x0 < (x1 - x0) * 0.2) x0 = 0;   /* steps start near 0: show the origin */
    sp_nice(&x0, &x1);
    sp_panel(f, runs, n, 0, x0, x1, left1, top, pw, ph, "training loss", "loss (mean per logging interval)");
    sp_panel(f, runs, n, 1, x0, x1, left2, top, pw, ph, all_loss ? "test loss per epoch" : "test accuracy per epoch",
             all_loss ? "test loss" : "test accuracy");
    /* legend: below the panels, one entry per run */
    double lx = left1, ly = top + ph + 75;
    fprintf(f, "<g class=\"legend\">\n");
    for (int r = 0; r < n; r++) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>", lx, ly, lx + 28, ly,
                sp_colors[r % SP_NCOLORS]);
        fprintf(f, "<text class=\"label\" data-run=\"%d\" x=\"%.1f\" y=\"%.1f\" font-size=\"13\">", r, lx + 36, ly + 4);
        sp_escape(f, runs[r].label);
        fprintf(f, "%s</text>\n", runs[r].test_is_loss && !all_loss ? " (test loss)" : "");
        lx += 36 + 8.0 * (double)strlen(runs[r].label) + 40;
        if (lx > W - 200 && r + 1 < n) { lx = left1; ly += 20; }
    }
    fprintf(f, "</g>\n</svg>\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) { snprintf(err, errlen, "cannot write %.400s", path); remove(tmp); return -1; }
    return 0;
}

#endif
