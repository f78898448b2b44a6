/* test/fuzz/fuzz_idx.c — libFuzzer target for the IDX (MNIST) parser: any pair of byte strings
 * must load (and serve every sample) or fail with a message; never crash, leak or read out of
 * bounds. Input: 2 bytes little-endian n, then n bytes of images file, then the labels file
 * (either may be gzip). Build and run: make fuzz-idx FUZZ_SECONDS=600. test/test_fuzz_corpus.c
 * includes this file with FUZZ_ENTRY renamed to replay the corpus. */
#include <dygraph.h>
#include <assert.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

int FUZZ_ENTRY(const unsigned char *data, size_t size);
int FUZZ_ENTRY(const unsigned char *data, size_t size) {
    if (size < 2) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    if (n > size - 2) n = size - 2;
    dg_dataset *ds = dg_mnist_idx_dataset_buffer(data + 2, n, data + 2 + n, size - 2 - n, "fuzz");
    /* a parser that refuses an input must say why */
    assert(ds || dg_last_error()[0]);
    if (ds) {
        double acc = 0;
        for (int64_t i = 0; i < dg_dataset_len(ds) && i < 64; i++) {
            dg_sample s;
            if (dg_dataset_get(ds, i, 0, &s) == 0) {
                const float *x = dg_data(s.t[0]);
                for (int64_t k = 0; k < dg_numel(s.t[0]); k++) acc += x[k];
                acc += (double)*(const int64_t *)dg_data(s.t[1]);
                dg_sample_clear(&s);
            }
        }
        (void)acc;
        dg_dataset_free(ds);
    }
    dg_clear_error();
    return 0;
}
