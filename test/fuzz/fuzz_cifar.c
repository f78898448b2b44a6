/* test/fuzz/fuzz_cifar.c — libFuzzer target for the CIFAR-10 binary parser: any byte string (one
 * batch, maybe gzip) must load and serve its samples, or fail with a message; never crash, leak or
 * read out of bounds. Build and run: make fuzz-cifar FUZZ_SECONDS=600. test/test_fuzz_corpus.c
 * includes this file with FUZZ_ENTRY renamed to replay the corpus. */
#include <dygraph.h>
#include <assert.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

int FUZZ_ENTRY(const unsigned char *data, size_t size);
int FUZZ_ENTRY(const unsigned char *data, size_t size) {
    dg_dataset *ds = dg_cifar10_dataset_buffer(data, size, "fuzz");
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
