/* data/formats/image_decode.c — JPEG (libjpeg-turbo) and PNG (libpng) from memory to f32
 * [3, H, W] in [0, 1], matching PIL's Image.open(f).convert('RGB') for the common cases: gray is
 * repeated into three channels, alpha is dropped (not composited), palettes expand, 16-bit samples
 * keep their high byte, Adobe CMYK/YCCK JPEGs are converted the way PIL does.
 *
 * Neither library may end the process or print: libjpeg's default error_exit terminates it, so both get error
 * handlers that longjmp back here with the message. A JPEG whose data ends early (libjpeg would
 * pad it with gray and warn) is an error, like PIL without LOAD_TRUNCATED_IMAGES; other libjpeg
 * warnings (e.g. extraneous bytes before a marker) are ignored as PIL ignores them. Every decoder
 * state is local to the call, so decoding is thread-safe. */
#include "formats.h"
#include <setjmp.h>
#include <stdio.h>
#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

int64_t dgf_max_image_pixels = (int64_t)1 << 26;   /* 64 megapixels (an 8192 x 8192 image) */

static dg_tensor *image_tensor(int64_t h, int64_t w) {
    int64_t shape[3] = { 3, h, w };
    return dgf_cpu_tensor(3, shape, DG_F32);
}

/* ---- JPEG ---- */
typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr;

static void j_error_exit(j_common_ptr ci) {
    jerr *e = (jerr *)ci->err;
    (*ci->err->format_message)(ci, e->msg);
    longjmp(e->jb, 1);
}

static void j_emit_message(j_common_ptr ci, int level) {
    if (level >= 0) return;   /* trace messages */
    int code = ci->err->msg_code;
    if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER) {   /* the data ends early: truncated file */
        jerr *e = (jerr *)ci->err;
        (*ci->err->format_message)(ci, e->msg);
        longjmp(e->jb, 1);
    }
    ci->err->num_warnings++;
}

static void j_output_message(j_common_ptr ci) { (void)ci; }

/* from buf (len bytes), or from f as libjpeg reads it when f is given */
static dg_tensor *decode_jpeg(const unsigned char *buf, size_t len, FILE *f, char *err, size_t errlen) {
    struct jpeg_decompress_struct ci;
    jerr je;
    dg_tensor *volatile t = NULL;
    unsigned char *volatile row = NULL;
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = j_error_exit;
    je.pub.emit_message = j_emit_message;
    je.pub.output_message = j_output_message;
    je.msg[0] = 0;
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&ci);
        free(row);
        if (t) dg_tensor_free(t);
        snprintf(err, errlen, "corrupt JPEG: %s", je.msg);
        return NULL;
    }
    jpeg_create_decompress(&ci);
    if (f) jpeg_stdio_src(&ci, f);
    else jpeg_mem_src(&ci, buf, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    if ((int64_t)ci.image_width * ci.image_height > dgf_max_image_pixels) {
        snprintf(err, errlen, "JPEG of %ux%u pixels exceeds the %lld-pixel limit", ci.image_width, ci.image_height,
                 (long long)dgf_max_image_pixels);
        jpeg_destroy_decompress(&ci);
        return NULL;
    }
    bool cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    bool adobe = ci.saw_Adobe_marker;
    ci.out_color_space = cmyk ? JCS_CMYK : ci.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&ci);
    int64_t w = ci.output_width, h = ci.output_height, nc = ci.output_components;
    t = image_tensor(h, w);
    row = malloc((size_t)(w * nc));
    if (!t || !row) {
        snprintf(err, errlen, "out of memory for a %lldx%lld image", (long long)w, (long long)h);
        jpeg_destroy_decompress(&ci);
        free(row);
        if (t) dg_tensor_free(t);
        return NULL;
    }
    float *r = dg_tensor_ptr(t), *g = r + h * w, *b = g + h * w;
    while (ci.output_scanline < ci.output_height) {
        int64_t y = ci.output_scanline;
        JSAMPROW rp = row;
        if (jpeg_read_scanlines(&ci, &rp, 1) != 1) {
            snprintf(err, errlen, "corrupt JPEG: no data for row %lld", (long long)y);
            jpeg_destroy_decompress(&ci);
            free(row);
            dg_tensor_free(t);
            return NULL;
        }
        float *ro = r + y * w, *go = g + y * w, *bo = b + y * w;
        for (int64_t x = 0; x < w; x++) {
            const unsigned char *p = row + x * nc;
            if (nc == 1) {
                ro[x] = go[x] = bo[x] = (float)p[0] / 255.0f;
            } else if (nc == 3) {
                ro[x] = (float)p[0] / 255.0f;
                go[x] = (float)p[1] / 255.0f;
                bo[x] = (float)p[2] / 255.0f;
            } else {
                /* CMYK: Adobe files store it inverted (PIL's "CMYK;I"): R = C*K/255 etc. */
                int c0 = p[0], m = p[1], yy = p[2], k = p[3];
                if (!adobe) { c0 = 255 - c0; m = 255 - m; yy = 255 - yy; k = 255 - k; }
                ro[x] = (float)(c0 * k / 255) / 255.0f;
                go[x] = (float)(m * k / 255) / 255.0f;
                bo[x] = (float)(yy * k / 255) / 255.0f;
            }
        }
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    free(row);
    return t;
}

/* ---- PNG ---- */
typedef struct pngsrc {
    const unsigned char *p;   /* memory, or */
    FILE *f;                  /* a file read as libpng asks */
    size_t len, pos;
    char msg[256];
} pngsrc;

static void p_read(png_structp png, png_bytep out, size_t n) {
    pngsrc *s = png_get_io_ptr(png);
    if (s->f) {
        if (fread(out, 1, n, s->f) != n) png_error(png, ferror(s->f) ? "read error" : "the data ends early (truncated file)");
        return;
    }
    if (s->len - s->pos < n) png_error(png, "the data ends early (truncated file)");
    memcpy(out, s->p + s->pos, n);
    s->pos += n;
}

static void p_error(png_structp png, png_const_charp msg) {
    pngsrc *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void p_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

static dg_tensor *decode_png(const unsigned char *buf, size_t len, FILE *f, char *err, size_t errlen) {
    pngsrc src = { .p = buf, .f = f, .len = len };
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, p_error, p_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!png || !info) {
        png_destroy_read_struct(png ? &png : NULL, NULL, NULL);
        snprintf(err, errlen, "out of memory starting the PNG decoder");
        return NULL;
    }
    dg_tensor *volatile t = NULL;
    unsigned char *volatile pix = NULL;
    png_bytep *volatile rows = NULL;
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        free(pix);
        free(rows);
        if (t) dg_tensor_free(t);
        snprintf(err, errlen, "corrupt PNG: %s", src.msg);
        return NULL;
    }
    png_set_read_fn(png, &src, p_read);
    png_set_user_limits(png, 1u << 20, 1u << 20);
    png_set_chunk_malloc_max(png, (png_alloc_size_t)64 << 20);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((int64_t)w * h > dgf_max_image_pixels) {
        snprintf(err, errlen, "PNG of %ux%u pixels exceeds the %lld-pixel limit", w, h, (long long)dgf_max_image_pixels);
        png_destroy_read_struct(&png, &info, NULL);
        return NULL;
    }
    png_set_expand(png);          /* palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha */
    png_set_strip_16(png);
    png_set_strip_alpha(png);
    png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    size_t rb = png_get_rowbytes(png, info);
    if (rb != (size_t)w * 3) {
        snprintf(err, errlen, "PNG rows are %zu bytes after conversion, expected %zu", rb, (size_t)w * 3);
        png_destroy_read_struct(&png, &info, NULL);
        return NULL;
    }
    t = image_tensor(h, w);
    pix = malloc(rb * h + 1);
    rows = malloc(sizeof(png_bytep) * (h ? h : 1));
    if (!t || !pix || !rows) {
        snprintf(err, errlen, "out of memory for a %ux%u image", w, h);
        png_destroy_read_struct(&png, &info, NULL);
        free(pix);
        free(rows);
        if (t) dg_tensor_free(t);
        return NULL;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pix + (size_t)y * rb;
    png_read_image(png, rows);
    png_destroy_read_struct(&png, &info, NULL);
    float *r = dg_tensor_ptr(t), *g = r + (size_t)h * w, *b = g + (size_t)h * w;
    for (size_t k = 0; k < (size_t)h * w; k++) {
        r[k] = (float)pix[3 * k] / 255.0f;
        g[k] = (float)pix[3 * k + 1] / 255.0f;
        b[k] = (float)pix[3 * k + 2] / 255.0f;
    }
    free(pix);
    free(rows);
    return t;
}

/* 'j' JPEG, 'p' PNG, or 0 after writing why into err, from the first bytes */
static int sniff(const unsigned char *buf, size_t len, char *err, size_t errlen) {
    static const unsigned char png_magic[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff) return 'j';
    if (len >= 8 && memcmp(buf, png_magic, 8) == 0) return 'p';
    if (len == 0) snprintf(err, errlen, "empty file, not a JPEG or PNG");
    else snprintf(err, errlen, "not a JPEG or PNG (first bytes %02x %02x %02x %02x)", buf[0], len > 1 ? buf[1] : 0,
                  len > 2 ? buf[2] : 0, len > 3 ? buf[3] : 0);
    return 0;
}

dg_tensor *dgf_decode_image(const unsigned char *buf, size_t len, char *err, size_t errlen) {
    int kind = sniff(buf, len, err, errlen);
    return kind == 'j' ? decode_jpeg(buf, len, NULL, err, errlen) : kind == 'p' ? decode_png(buf, len, NULL, err, errlen) : NULL;
}

dg_tensor *dgf_decode_image_file(FILE *f, char *err, size_t errlen) {
    unsigned char head[8];
    size_t n = fread(head, 1, sizeof head, f);
    if (ferror(f)) { snprintf(err, errlen, "read error in its first bytes"); return NULL; }
    int kind = sniff(head, n, err, errlen);
    if (!kind) return NULL;
    if (fseek(f, 0, SEEK_SET) != 0) { snprintf(err, errlen, "cannot go back to its first byte"); return NULL; }
    return kind == 'j' ? decode_jpeg(NULL, 0, f, err, errlen) : decode_png(NULL, 0, f, err, errlen);
}

dg_tensor *dg_decode_image(const void *buf, size_t len, const char *name) {
    DG_CHECK(buf || !len, "decode_image: buffer is NULL");
    char err[512];
    dg_tensor *t = dgf_decode_image(buf, len, err, sizeof err);
    if (!t) DG_ERR(DG_EFORMAT, "decode_image '%s': %s", name ? name : "(buffer)", err);
    return t;
}
