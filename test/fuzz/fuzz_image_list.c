/* test/fuzz/fuzz_image_list.c — libFuzzer target for the image list: the first byte picks what
 * the rest is. Even: a list file (`path label` lines, plain or gzip) under a root that does not
 * exist, parsed through the public buffer entry and again with a keep budget of 8 x the first
 * byte (so small lists reach the drop-and-count first pass and the second pass); the dataset's
 * first entries are then fetched, which must fail with a message naming the file and line. Odd: an image file's bytes, decoded as get() decodes them (JPEG via libjpeg-turbo, PNG via
 * libpng, capped at 65,536 pixels here to keep runs fast). Never a crash, leak, exit() or an out
 * of bounds read. Build and run: make fuzz-image-list FUZZ_SECONDS=600. test/test_fuzz_corpus.c
 * includes this file to replay the corpus. */
#include "../../data/formats/formats.h"
#include <assert.h>

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

int FUZZ_ENTRY(const unsigned char *data, size_t size);
int FUZZ_ENTRY(const unsigned char *data, size_t size) {
    if (size < 1) return 0;
    dgf_max_image_pixels = 1 << 16;
    if ((data[0] & 1) == 0) {
        for (int pass = 0; pass < 2; pass++) {
            dg_dataset *ds = NULL;
            if (pass == 0) {
                ds = dg_image_list_dataset_buffer("/nonexistent-dygraph-fuzz-root", data + 1, size - 1, "fuzz");
            } else {
                dgf_src src;
                if (dgf_src_open_buffer(&src, data + 1, size - 1, "image_list", "fuzz")) continue;
                src.keep_budget = (uint64_t)data[0] * 8;
                ds = dgf_image_list_parse(&src, "/nonexistent-dygraph-fuzz-root");
                dgf_src_close(&src);
            }
            /* a parser that refuses an input must say why */
            assert(ds || dg_last_error()[0]);
            for (int64_t i = 0; ds && i < dg_dataset_len(ds) && i < 4; i++) {
                dg_sample s;
                if (dg_dataset_get(ds, i, 0, &s) == 0) dg_sample_clear(&s);
                dg_clear_error();
            }
            dg_dataset_free(ds);
            dg_clear_error();
        }
    } else {
        dg_tensor *t = dg_decode_image(data + 1, size - 1, "fuzz");
        if (t) {
            double acc = 0;
            const float *x = dg_data(t);
            for (int64_t k = 0; k < dg_numel(t); k++) acc += x[k];
            (void)acc;
            dg_tensor_free(t);
        }
    }
    dgf_max_image_pixels = (int64_t)1 << 26;
    dg_clear_error();
    return 0;
}
