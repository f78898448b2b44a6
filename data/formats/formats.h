/* data/formats/formats.h — shared helpers of the built-in dataset parsers (not public API):
 * header-first whole-file reads with transparent gzip (IDX, CIFAR), a buffered, rewindable byte
 * source for the streaming parsers (JSON, CSV, image lists), locale-independent number parsing,
 * JPEG/PNG decoding from memory or a file, and the parsers' internal
 * entry points with a configurable image size (the fuzz targets use small images so that a
 * complete valid record fits in a few kilobytes). */
#ifndef DG_DATA_FORMATS_H
#define DG_DATA_FORMATS_H

#include "../data_util.h"
#include <zlib.h>

/* Largest decompressed size accepted from a gzip file or buffer, whatever a header declares or
 * the compressed size allows (a zip bomb guard). */
#define DGF_MAX_INFLATE ((size_t)4 << 30)
/* What a file may hold beyond the size its header declares before reading stops: enough to
 * report a few trailing bytes exactly, too little to matter for memory. */
#define DGF_INFLATE_SLACK ((uint64_t)1 << 20)
/* A gzip stream with no header to declare its size (mnist.json.gz, a CSV, an image list) may
 * inflate to at most max(64 MiB, 64 x its compressed size): real data compresses 5-20:1, a bomb
 * 1000:1. This bounds the time spent inflating; memory is bounded by DGF_KEEP_UNVALIDATED, which
 * does not depend on the compressed size (padding a bomb with incompressible bytes lifts this cap). */
#define DGF_STREAM_RATIO 64
#define DGF_STREAM_FLOOR ((uint64_t)64 << 20)
uint64_t dgf_stream_limit(uint64_t compressed_len);
/* What a streaming parser (JSON, CSV, image list) keeps of a file it has not yet checked whole.
 * Records are checked as they stream and kept while they fit in this; past it the parser drops
 * them, checks the rest keeping only counts and, once the whole file is valid, reads it again
 * (dgf_src_rewind) keeping exactly the records it counted. Rejecting a file thus costs at most
 * this much memory whatever its size or compression, and memory beyond it follows validated
 * records only; files whose records fit (the npm digits, a Kaggle CSV) are read once. */
#define DGF_KEEP_UNVALIDATED ((uint64_t)32 << 20)

/* ---- header-first reads ---- */
/* Given the first bytes of the (inflated) data (n may be short of what was asked for at the end of
 * the data), checks them, setting an error naming the file and byte on failure, and stores in
 * *limit the size the header declares for the whole data. */
typedef int (*dgf_head_fn)(const unsigned char *head, size_t n, void *ctx, uint64_t *limit);
/* Reads path into a malloc'd buffer (a gzip file, magic 1f 8b, is inflated; *gz tells whether it
 * was) with the header checked first: reads `head` bytes (inflated for gzip), calls check, then
 * reads the rest, never more than *limit + DGF_INFLATE_SLACK bytes (more is an error naming
 * the byte where the data goes past the header's size); a plain file larger than that is refused
 * from its size, unread. `declares` says where the limit comes from in those messages, followed
 * by the number: "its header at byte 0 declares" (IDX), "a CIFAR-10 batch ... holds at most". */
int dgf_read_file_head(const char *path, const char *what, size_t head, dgf_head_fn check, void *ctx, const char *declares,
                       unsigned char **buf, size_t *len, bool *gz);
/* The same for a memory buffer: check sees its first bytes (inflated when it is gzip, without
 * inflating the rest), then the buffer is inflated within the header's size plus the slack. */
int dgf_maybe_gunzip_head(const unsigned char *buf, size_t len, const char *what, const char *name, size_t head,
                          dgf_head_fn check, void *ctx, const char *declares, const unsigned char **out, size_t *out_len,
                          bool *owned);

bool dgf_is_gzip(const unsigned char *buf, size_t len);

/* ---- a buffered byte source over a memory buffer or a (maybe gzip) file ---- */
typedef struct dgf_src {
    const unsigned char *p, *end;   /* current window */
    uint64_t base;                  /* stream offset of the window start */
    const unsigned char *win;       /* window start */
    gzFile gz;                      /* a file source, or NULL */
    z_stream *zs;                   /* a gzip memory buffer inflated window by window, or NULL */
    const unsigned char *mem;       /* a memory source's bytes (plain, or gzip for zs) */
    size_t mem_len, mem_pos;        /* ... their length and, for zs, how far inflate has read */
    bool zdone;                     /* zs: the last gzip member ended at the end of the buffer */
    unsigned char *buf;
    size_t cap;
    bool is_gz;                     /* the data is gzip-compressed (offsets are of the inflated stream) */
    uint64_t limit;                 /* most bytes the stream may yield (dgf_stream_limit for gzip) */
    uint64_t keep_budget;           /* DGF_KEEP_UNVALIDATED; the fuzz targets lower it */
    int io_error;                   /* a read error happened (message already set) */
    const char *what, *name;
} dgf_src;
int dgf_src_open_file(dgf_src *s, const char *path, const char *what);
/* A plain memory source: the bytes as they are (gzip or not). */
void dgf_src_open_mem(dgf_src *s, const void *buf, size_t len, const char *what, const char *name);
/* A memory buffer that is inflated window by window when it starts with the gzip magic (so a
 * bomb is never held inflated), with the streaming cap of a gzip file; else dgf_src_open_mem. */
int dgf_src_open_buffer(dgf_src *s, const void *buf, size_t len, const char *what, const char *name);
void dgf_src_close(dgf_src *s);
int dgf_src_fill(dgf_src *s);  /* refills the window; 0 at end of stream or error */
/* Back to byte 0 for a parser's second pass; an error naming the source on failure. */
int dgf_src_rewind(dgf_src *s);
static inline int dgf_peek(dgf_src *s) { return s->p < s->end || dgf_src_fill(s) ? *s->p : -1; }
static inline int dgf_next(dgf_src *s) { return s->p < s->end || dgf_src_fill(s) ? *s->p++ : -1; }
static inline uint64_t dgf_pos(const dgf_src *s) { return s->base + (uint64_t)(s->p - s->win); }

/* ---- numbers: locale-independent strtod over a token (NUL-terminated) ---- */
/* Parses all of tok as a finite decimal number. Returns 0 or -1. */
int dgf_parse_double(const char *tok, double *out);

/* ---- images ---- */
/* Largest image (width * height) a decoder accepts; the fuzz targets lower it. */
extern int64_t dgf_max_image_pixels;
/* Decodes a JPEG or PNG (sniffed from its bytes) to f32 [3, H, W] in [0, 1] on the CPU; gray is
 * expanded to three channels and alpha dropped (like PIL's convert('RGB')). On failure writes
 * why into err and returns NULL without touching the thread's error. */
dg_tensor *dgf_decode_image(const unsigned char *buf, size_t len, char *err, size_t errlen);
/* The same from an open file, read as the decoder goes: the magic is checked from the first bytes
 * and no more of the file is read than the image its header declares, so a large file is never
 * held in memory. The caller closes f. */
dg_tensor *dgf_decode_image_file(FILE *f, char *err, size_t errlen);

/* dg_dataset_new, and on failure vt->free(self) (dg_dataset_new leaves self to its caller). */
dg_dataset *dgf_dataset_wrap(const dg_dataset_vtable *vt, void *self, const char *name);
/* Tensors for get(): allocated on the CPU whatever the current device (the loader moves batches). */
dg_tensor *dgf_cpu_tensor(int ndim, const int64_t *shape, dg_dtype dtype);
dg_tensor *dgf_label_i64(int64_t v);
/* "what '<name>'" buffers: dataset names are copied into the dataset's own struct. */
char *dgf_strdup(const char *s);

/* ---- parsers with a configurable image size (side x side) ---- */
dg_dataset *dgf_mnist_json_parse(dgf_src *s, int split, int side);
dg_dataset *dgf_face_csv_parse(dgf_src *s, int side);
/* the image list's parser over any source (the fuzz target lowers its keep budget) */
dg_dataset *dgf_image_list_parse(dgf_src *s, const char *root);

#endif
