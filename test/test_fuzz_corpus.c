/* test/test_fuzz_corpus.c — replays the committed fuzz corpora (test/fuzz/corpus/<target>/)
 * through the parsers, so every input the fuzzers kept stays a regression test. */
#include "test_util.h"
#include <dirent.h>

static int replay(const char *dir, dg_tensor_dict *(*load)(const void *, size_t, const char *)) {
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
        dg_tensor_dict_free(load(buf, (size_t)len, path));
        dg_clear_error();
        free(buf);
        n++;
    }
    closedir(d);
    cr_assert_eq(dg_live_tensors(), 0, "a corpus input leaked tensors");
    return n;
}

Test(fuzz_corpus, safetensors) {
    int n = replay("test/fuzz/corpus/safetensors", dg_load_safetensors_buffer);
    cr_assert(n >= 5, "only %d corpus files", n);
}
