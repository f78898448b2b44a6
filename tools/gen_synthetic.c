/* tools/gen_synthetic.c — deterministic synthetic data in real file formats, small enough to
 * train on quickly, with a rule a network can learn (fixed seeds, no input).
 *
 *   gen_synthetic cifar OUT_DIR   CIFAR-10 binary layout: data_batch_1..5.bin (2,000 records each)
 *                                 and test_batch.bin (2,000), batches.meta.txt, README.txt.
 *                                 Class c draws pattern c (stripes, checks, disc, ring, ...) in
 *                                 hue (c % 5) / 5 on a random dark background, random phase /
 *                                 position / size, Gaussian noise (sigma 18): colour alone
 *                                 separates 5 pairs, the pattern separates each pair.
 *   gen_synthetic face OUT_DIR    Kaggle facial keypoints layout: training.csv (2,000 rows, Kaggle's
 *                                 30 column names and order, then Image; every 10th row from row 3
 *                                 lacks its 8 eye-corner/eyebrow values and every 50th from row 17
 *                                 lacks one value, as Kaggle's partial labels) and test.csv
 *                                 (ImageId,Image; 300 rows). 96x96 gray faces: a noisy ellipse with
 *                                 dark eyes/brows/mouth, a bright dot at each of the 15 keypoints,
 *                                 keypoints = Kaggle's mean face under a random scale, rotation
 *                                 and shift.
 * Files are written under a temporary name and renamed. Build: cc -O2 tools/gen_synthetic.c -lm */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../samples/flags.h"

/* ---- a small deterministic generator (splitmix64) ---- */
static uint64_t rng_state;
static uint64_t next_u64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double unif(void) { return (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0); }
static double urange(double a, double b) { return a + (b - a) * unif(); }
static double gauss(void) {
    double u = unif(), v = unif();
    if (u < 1e-300) u = 1e-300;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static int clamp255(double v) { return v < 0 ? 0 : v > 255 ? 255 : (int)lround(v); }

static void die(const char *msg, const char *arg) {
    fprintf(stderr, "gen_synthetic: %s %s\n", msg, arg ? arg : "");
    exit(1);
}

static FILE *open_tmp(const char *dir, const char *name, char *path, char *tmp) {
    sprintf(path, "%s/%s", dir, name);
    sprintf(tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) die("cannot create", tmp);
    return f;
}
static void close_rename(FILE *f, const char *path, const char *tmp) {
    if (fclose(f) != 0 || rename(tmp, path) != 0) die("cannot write", path);
}

/* ---- CIFAR-10 ---- */
static void hsv(double h, double s, double v, double rgb[3]) {
    h = fmod(h, 1.0);
    if (h < 0) h += 1;
    double f = h * 6, c = v * s, x = c * (1 - fabs(fmod(f, 2.0) - 1)), m = v - c;
    double r = 0, g = 0, b = 0;
    switch ((int)f % 6) {
    case 0: r = c; g = x; break;
    case 1: r = x; g = c; break;
    case 2: g = c; b = x; break;
    case 3: g = x; b = c; break;
    case 4: r = x; b = c; break;
    default: r = c; b = x; break;
    }
    rgb[0] = (r + m) * 255;
    rgb[1] = (g + m) * 255;
    rgb[2] = (b + m) * 255;
}

static const char *cifar_names[10] = { "hstripes", "vstripes", "checks", "disc", "ring",
                                       "diagonal", "cross", "square", "blobs", "dots" };

/* pattern mask value in [0, 1] at (x, y) for class c with parameters q[] */
static double pattern(int c, double x, double y, const double *q) {
    double cx = q[0], cy = q[1], per = q[2], ph = q[3], r = q[4];
    switch (c) {
    case 0: return fmod(y + ph, per) < per / 2;
    case 1: return fmod(x + ph, per) < per / 2;
    case 2: return ((int)floor((x + ph) / (per * 0.7)) + (int)floor((y + ph) / (per * 0.7))) % 2 == 0;
    case 3: return hypot(x - cx, y - cy) < r;
    case 4: { double d = hypot(x - cx, y - cy); return d < r && d > r - 3.5; }
    case 5: return fmod(x + y + ph + 64, per) < per / 2;
    case 6: return fabs(x - cx) < 2.5 || fabs(y - cy) < 2.5;
    case 7: { double dx = fabs(x - cx), dy = fabs(y - cy), m = dx > dy ? dx : dy; return m < r && m > r - 3; }
    case 8: return hypot(x - cx + 6, y - cy + 4) < r * 0.55 || hypot(x - cx - 6, y - cy - 4) < r * 0.55;
    default: return fmod(x + ph, per) < 2.5 && fmod(y + ph, per) < 2.5;
    }
}

static void cifar_record(unsigned char *rec) {
    int c = (int)(next_u64() % 10);
    rec[0] = (unsigned char)c;
    double fg[3], bg[3];
    hsv((c % 5) / 5.0 + urange(-0.04, 0.04), urange(0.6, 1.0), urange(0.75, 1.0), fg);
    hsv(unif(), urange(0.0, 0.6), urange(0.05, 0.4), bg);
    double q[5] = { urange(11, 21), urange(11, 21), urange(6, 11), urange(0, 11), urange(7, 11) };
    for (int y = 0; y < 32; y++)
        for (int x = 0; x < 32; x++) {
            double m = pattern(c, x + 0.5, y + 0.5, q);
            for (int ch = 0; ch < 3; ch++)
                rec[1 + ch * 1024 + y * 32 + x] = (unsigned char)clamp255(bg[ch] * (1 - m) + fg[ch] * m + 18 * gauss());
        }
}

static void gen_cifar(const char *dir) {
    char path[4096], tmp[4200];
    unsigned char rec[3073];
    rng_state = 0xC1FA510ull;
    for (int b = 0; b < 6; b++) {
        char name[64];
        if (b < 5) snprintf(name, sizeof name, "data_batch_%d.bin", b + 1);
        else snprintf(name, sizeof name, "test_batch.bin");
        FILE *f = open_tmp(dir, name, path, tmp);
        for (int i = 0; i < 2000; i++) {
            cifar_record(rec);
            if (fwrite(rec, 1, sizeof rec, f) != sizeof rec) die("cannot write", tmp);
        }
        close_rename(f, path, tmp);
    }
    FILE *f = open_tmp(dir, "batches.meta.txt", path, tmp);
    for (int c = 0; c < 10; c++) fprintf(f, "%s\n", cifar_names[c]);
    close_rename(f, path, tmp);
    f = open_tmp(dir, "README.txt", path, tmp);
    fprintf(f, "SYNTHETIC data in the CIFAR-10 binary layout (not CIFAR-10), made by tools/gen_synthetic.c.\n"
               "Class c: pattern c (batches.meta.txt) in hue (c %% 5) / 5 on a random dark background, plus noise.\n"
               "data_batch_1..5.bin: 2,000 records each; test_batch.bin: 2,000.\n");
    close_rename(f, path, tmp);
    printf("gen_synthetic: %s: 5 x 2000 train + 2000 test records\n", dir);
}

/* ---- facial keypoints ---- */
static const char *kp_cols[30] = {
    "left_eye_center_x", "left_eye_center_y", "right_eye_center_x", "right_eye_center_y",
    "left_eye_inner_corner_x", "left_eye_inner_corner_y", "left_eye_outer_corner_x", "left_eye_outer_corner_y",
    "right_eye_inner_corner_x", "right_eye_inner_corner_y", "right_eye_outer_corner_x", "right_eye_outer_corner_y",
    "left_eyebrow_inner_end_x", "left_eyebrow_inner_end_y", "left_eyebrow_outer_end_x", "left_eyebrow_outer_end_y",
    "right_eyebrow_inner_end_x", "right_eyebrow_inner_end_y", "right_eyebrow_outer_end_x", "right_eyebrow_outer_end_y",
    "nose_tip_x", "nose_tip_y", "mouth_left_corner_x", "mouth_left_corner_y", "mouth_right_corner_x",
    "mouth_right_corner_y", "mouth_center_top_lip_x", "mouth_center_top_lip_y", "mouth_center_bottom_lip_x",
    "mouth_center_bottom_lip_y",
};
/* Kaggle's mean face (pixels); "left" is the subject's left, the image's right */
static const double mean_kp[15][2] = {
    {66.4, 37.7}, {30.3, 37.9}, {59.2, 37.9}, {73.3, 37.7}, {36.7, 37.9}, {22.4, 38.0}, {56.1, 29.3}, {79.5, 29.9},
    {39.3, 29.5}, {15.9, 30.4}, {48.4, 62.7}, {63.3, 75.9}, {32.9, 76.2}, {47.9, 72.9}, {48.6, 79.0},
};

static void dark_segment(double *img, double x0, double y0, double x1, double y1, double w, double amount) {
    for (int y = 0; y < 96; y++)
        for (int x = 0; x < 96; x++) {
            double dx = x1 - x0, dy = y1 - y0, l2 = dx * dx + dy * dy;
            double t = l2 > 0 ? ((x - x0) * dx + (y - y0) * dy) / l2 : 0;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            double d = hypot(x - (x0 + t * dx), y - (y0 + t * dy));
            if (d < w) img[y * 96 + x] -= amount * (1 - d / w);
        }
}

static void face_image(unsigned char *px, double kp[15][2]) {
    double s = urange(0.85, 1.1), th = urange(-0.21, 0.21), tx = urange(-6, 6), ty = urange(-6, 6);
    double cs = cos(th) * s, sn = sin(th) * s;
    for (int k = 0; k < 15; k++) {
        double x = mean_kp[k][0] - 48, y = mean_kp[k][1] - 48;
        kp[k][0] = 48 + cs * x - sn * y + tx;
        kp[k][1] = 48 + sn * x + cs * y + ty;
    }
    double img[96 * 96];
    double bg = urange(25, 70), face = urange(120, 170), gx = urange(-0.3, 0.3);
    double fcx = 48 + tx - sn * 6, fcy = 48 + ty + cs * 6, ax = 34 * s, ay = 45 * s;
    for (int y = 0; y < 96; y++)
        for (int x = 0; x < 96; x++) {
            double dx = x - fcx, dy = y - fcy;
            double u = (cos(th) * dx + sin(th) * dy) / ax, v = (-sin(th) * dx + cos(th) * dy) / ay;
            double r = u * u + v * v;
            double base = r < 1 ? face - 25 * r : bg + gx * (x - 48);
            img[y * 96 + x] = base;
        }
    /* eyes (between outer and inner corners), brows, mouth, nose */
    dark_segment(img, kp[3][0], kp[3][1], kp[2][0], kp[2][1], 3.2 * s, 60);
    dark_segment(img, kp[5][0], kp[5][1], kp[4][0], kp[4][1], 3.2 * s, 60);
    dark_segment(img, kp[6][0], kp[6][1], kp[7][0], kp[7][1], 2.0 * s, 45);
    dark_segment(img, kp[8][0], kp[8][1], kp[9][0], kp[9][1], 2.0 * s, 45);
    dark_segment(img, kp[11][0], kp[11][1], kp[12][0], kp[12][1], 2.5 * s, 55);
    dark_segment(img, (kp[2][0] + kp[4][0]) / 2, kp[2][1] + 8 * s, kp[10][0], kp[10][1], 1.5 * s, 25);
    for (int i = 0; i < 96 * 96; i++) img[i] += 12 * gauss();
    /* a bright dot at every keypoint */
    for (int k = 0; k < 15; k++)
        for (int y = (int)kp[k][1] - 4; y <= (int)kp[k][1] + 4; y++)
            for (int x = (int)kp[k][0] - 4; x <= (int)kp[k][0] + 4; x++) {
                if (x < 0 || y < 0 || x >= 96 || y >= 96) continue;
                double d2 = (x - kp[k][0]) * (x - kp[k][0]) + (y - kp[k][1]) * (y - kp[k][1]);
                img[y * 96 + x] += 140 * exp(-d2 / (2 * 1.2 * 1.2));
            }
    for (int i = 0; i < 96 * 96; i++) px[i] = (unsigned char)clamp255(img[i]);
}

static void put_pixels(FILE *f, const unsigned char *px) {
    char line[96 * 96 * 4 + 2], *p = line;
    for (int i = 0; i < 96 * 96; i++) {
        if (i) *p++ = ' ';
        int v = px[i];
        if (v >= 100) *p++ = (char)('0' + v / 100);
        if (v >= 10) *p++ = (char)('0' + v / 10 % 10);
        *p++ = (char)('0' + v % 10);
    }
    fwrite(line, 1, (size_t)(p - line), f);
}

static void gen_face(const char *dir) {
    char path[4096], tmp[4200];
    unsigned char px[96 * 96];
    double kp[15][2];
    rng_state = 0xFACE5EEDull;
    FILE *f = open_tmp(dir, "training.csv", path, tmp);
    for (int k = 0; k < 30; k++) fprintf(f, "%s,", kp_cols[k]);
    fprintf(f, "Image\n");
    int dropped = 0;
    for (int i = 0; i < 2000; i++) {
        face_image(px, kp);
        /* Kaggle-like partial labels: the eye corners and eyebrows (columns 4..19) missing */
        bool partial = i % 10 == 3;
        int one_missing = i % 50 == 17 ? (int)(next_u64() % 30) : -1;
        dropped += partial || one_missing >= 0;
        for (int k = 0; k < 30; k++) {
            bool miss = (partial && k >= 4 && k < 20) || k == one_missing;
            if (miss) fputc(',', f);
            else fprintf(f, "%.4f,", kp[k / 2][k % 2]);
        }
        put_pixels(f, px);
        fputc('\n', f);
    }
    close_rename(f, path, tmp);
    f = open_tmp(dir, "test.csv", path, tmp);
    fprintf(f, "ImageId,Image\n");
    for (int i = 0; i < 300; i++) {
        face_image(px, kp);
        fprintf(f, "%d,", i + 1);
        put_pixels(f, px);
        fputc('\n', f);
    }
    close_rename(f, path, tmp);
    f = open_tmp(dir, "README.txt", path, tmp);
    fprintf(f, "SYNTHETIC faces in the Kaggle facial keypoints CSV layout (not Kaggle's data), made by tools/gen_synthetic.c.\n"
               "training.csv: 2000 rows, %d with a missing value (dropped by the loader: %d usable); test.csv: 300 rows.\n",
               dropped, 2000 - dropped);
    close_rename(f, path, tmp);
    printf("gen_synthetic: %s: training.csv 2000 rows (%d with missing values), test.csv 300 rows\n", dir, dropped);
}

int main(int argc, char **argv) {
    static const char *const flags[] = { NULL };
    su_positional pos = { .usage = "cifar|face OUT_DIR", .min = 2, .max = 2 };
    su_args_pos(argc, argv, flags, &pos);
    if (strcmp(pos.args[0], "cifar") == 0) gen_cifar(pos.args[1]);
    else if (strcmp(pos.args[0], "face") == 0) gen_face(pos.args[1]);
    else su_usage_error(argv[0], flags, &pos, "argument KIND: '%s' is neither cifar nor face", pos.args[0]);
    free(pos.args);
    return 0;
}
