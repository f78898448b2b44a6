/* test/fuzz/fuzz_json.c — libFuzzer target for mnist.json parser (Paddle's multi-GPU MNIST tutorial's format). The input is
 * parsed twice: by the parser with 2x2-value images (so valid splits fit in a few bytes; split
 * size % 3 is kept; plain or gzip, inflated window by window), with a keep budget the input's last
 * byte picks when its size is odd (so small inputs reach the drop-and-count first pass and the
 * second pass), and through the public buffer entry (784 values, gzip). It must load and serve its
 * samples or fail with a message; never crash, leak or read out of bounds. Build and run:
 * make fuzz-json FUZZ_SECONDS=600. test/test_fuzz_corpus.c includes this file to replay the corpus. */
#include "../../data/formats/formats.h"
#include <assert.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

static void fuzz_json_use(dg_dataset *ds) {
    assert(ds || dg_last_error()[0]);   /* a parser that refuses an input must say why */
    if (!ds) return;
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

int FUZZ_ENTRY(const unsigned char *data, size_t size);
int FUZZ_ENTRY(const unsigned char *data, size_t size) {
    dgf_src s;
    if (dgf_src_open_buffer(&s, data, size, "mnist_json", "fuzz") == 0) {
        if (size & 1) s.keep_budget = (uint64_t)data[size - 1] * 8;
        fuzz_json_use(dgf_mnist_json_parse(&s, (int)(size % 3), 2));
        dgf_src_close(&s);
    }
    dg_clear_error();
    fuzz_json_use(dg_mnist_json_dataset_buffer(data, size, 0, "fuzz"));
    dg_clear_error();
    return 0;
}
