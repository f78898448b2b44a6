/* test/fuzz/fuzz_csv.c — libFuzzer target for the facial keypoints CSV parser. The input is
 * parsed twice: by the parser with 2x2-pixel images (so a whole valid row fits in a few hundred
 * bytes and the fuzzer reaches the row logic: missing values, quotes, CRLF, column counts; plain or
 * gzip, inflated window by window), with a keep budget the input's last byte picks when its size
 * is odd (so small inputs reach the drop-and-count first pass and the second pass), and through
 * the public buffer entry (96x96, gzip). It must load and serve its samples or fail with
 * a message; never crash, leak or read out of bounds. Build and run: make fuzz-csv
 * FUZZ_SECONDS=600. test/test_fuzz_corpus.c includes this file to replay the corpus. */
#include "../../data/formats/formats.h"
#include <assert.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

static void fuzz_csv_use(dg_dataset *ds) {
    assert(ds || dg_last_error()[0]);   /* a parser that refuses an input must say why */
    if (!ds) return;
    double acc = 0;
    for (int64_t i = 0; i < dg_dataset_len(ds) && i < 64; i++) {
        dg_sample s;
        if (dg_dataset_get(ds, i, 0, &s) == 0) {
            for (int f = 0; f < s.n; f++) {
                const float *x = dg_data(s.t[f]);
                for (int64_t k = 0; k < dg_numel(s.t[f]); k++) acc += x[k];
            }
            dg_sample_clear(&s);
        }
    }
    (void)acc;
    dg_dataset_free(ds);
}

int FUZZ_ENTRY(const unsigned char *data, size_t size);
int FUZZ_ENTRY(const unsigned char *data, size_t size) {
    dgf_src s;
    if (dgf_src_open_buffer(&s, data, size, "face_keypoints", "fuzz") == 0) {
        if (size & 1) s.keep_budget = (uint64_t)data[size - 1] * 8;
        fuzz_csv_use(dgf_face_csv_parse(&s, 2));
        dgf_src_close(&s);
    }
    dg_clear_error();
    fuzz_csv_use(dg_face_keypoints_dataset_buffer(data, size, "fuzz"));
    dg_clear_error();
    return 0;
}
