/* test/test_fuzz_corpus.c — replays the committed fuzz corpora (test/fuzz/corpus/<target>/)
 * through the parsers, so every input the fuzzers kept stays a regression test. */
#include "test_util.h"
#include <dirent.h>

/* Calls one(bytes, len, path, ctx) for every file of dir; returns how many. */
typedef void (*corpus_fn)(const unsigned char *buf, size_t len, const char *path, void *ctx);
static int for_each_input(const char *dir, corpus_fn one, void *ctx) {
    DIR *d = opendir(dir);
    cr_assert(d, "corpus folder %s missing (run from the repo root)", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        unsigned char *buf = malloc((size_t)len + 1);
        cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        one(buf, (size_t)len, path, ctx);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

typedef dg_tensor_dict *(*dict_loader)(const void *, size_t, const char *);
static void load_one(const unsigned char *buf, size_t len, const char *path, void *ctx) {
    dg_tensor_dict_free((*(dict_loader *)ctx)(buf, len, path));
    dg_clear_error();
}
static int replay(const char *dir, dict_loader load) {
    int n = for_each_input(dir, load_one, &load);
    cr_assert_eq(dg_live_tensors(), 0, "a corpus input leaked tensors");
    return n;
}

Test(fuzz_corpus, safetensors) {
    int n = replay("test/fuzz/corpus/safetensors", dg_load_safetensors_buffer);
    cr_assert(n >= 5, "only %d corpus files", n);
}

/* ---- the dataset parsers' corpora, through the fuzz targets themselves (same input layout) ---- */
#define FUZZ_ENTRY fuzz_idx_one
#include "fuzz/fuzz_idx.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_cifar_one
#include "fuzz/fuzz_cifar.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_csv_one
#include "fuzz/fuzz_csv.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_json_one
#include "fuzz/fuzz_json.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_image_list_one
#include "fuzz/fuzz_image_list.c"
#undef FUZZ_ENTRY
#define FUZZ_ENTRY fuzz_ps_server_one
#include "fuzz/fuzz_ps_server.c"
#undef FUZZ_ENTRY

typedef int (*fuzz_entry)(const unsigned char *, size_t);
static void fuzz_one(const unsigned char *buf, size_t len, const char *path, void *ctx) {
    (*(fuzz_entry *)ctx)(buf, len);
    cr_assert_eq(dg_live_tensors(), 0, "corpus input %s leaked tensors", path);
}
static int replay_bytes(const char *dir, fuzz_entry one) { return for_each_input(dir, fuzz_one, &one); }

Test(fuzz_corpus, idx) { int n = replay_bytes("test/fuzz/corpus/idx", fuzz_idx_one); cr_assert(n >= 5, "only %d corpus files", n); }
Test(fuzz_corpus, cifar) { int n = replay_bytes("test/fuzz/corpus/cifar", fuzz_cifar_one); cr_assert(n >= 4, "only %d corpus files", n); }
Test(fuzz_corpus, csv) { int n = replay_bytes("test/fuzz/corpus/csv", fuzz_csv_one); cr_assert(n >= 5, "only %d corpus files", n); }
Test(fuzz_corpus, json) { int n = replay_bytes("test/fuzz/corpus/json", fuzz_json_one); cr_assert(n >= 5, "only %d corpus files", n); }
Test(fuzz_corpus, image_list) {
    int n = replay_bytes("test/fuzz/corpus/image_list", fuzz_image_list_one);
    cr_assert(n >= 10, "only %d corpus files", n);
}
Test(fuzz_corpus, ps_server) {
    int n = replay_bytes("test/fuzz/corpus/ps_server", fuzz_ps_server_one);
    cr_assert(n >= 15, "only %d corpus files", n);
}
