/* test/fuzz/fuzz_image_list.c — libFuzzer target for the image list: the first byte picks what
 * the rest is. Even: a list file (`path label` lines) under a root that does not exist; the
 * dataset's first entries are then fetched, which must fail with a message naming the file and
 * line. Odd: an image file's bytes, decoded as get() decodes them (JPEG via libjpeg-turbo, PNG via
 * libpng, capped at 65,536 pixels here to keep runs fast). Never a crash, leak, exit() or an out
 * of bounds read. Build and run: make fuzz-image-list FUZZ_SECONDS=600. test/test_fuzz_corpus.c
 * includes this file to replay the corpus. */
#include "../../data/formats/formats.h"

#ifndef FUZZ_ENTRY
#define FUZZ_ENTRY LLVMFuzzerTestOneInput
#endif

int FUZZ_ENTRY(const unsigned char *data, size_t size);
int FUZZ_ENTRY(const unsigned char *data, size_t size) {
    if (size < 1) return 0;
    dgf_max_image_pixels = 1 << 16;
    if ((data[0] & 1) == 0) {
        dg_dataset *ds = dg_image_list_dataset_buffer("/nonexistent-dygraph-fuzz-root", data + 1, size - 1, "fuzz");
    /* a parser that refuses an input must say why */
    assert(ds || dg_last_error()[0]);
        for (int64_t i = 0; ds && i < dg_dataset_len(ds) && i < 4; i++) {
            dg_sample s;
            if (dg_dataset_get(ds, i, 0, &s) == 0) dg_sample_clear(&s);
            dg_clear_error();
        }
        dg_dataset_free(ds);
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
