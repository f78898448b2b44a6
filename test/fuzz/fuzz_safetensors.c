/* test/fuzz/fuzz_safetensors.c — libFuzzer target for the safetensors reader: any byte string
 * must load cleanly or fail with a message, never crash, leak or read out of bounds.
 * Build and run: make fuzz-safetensors FUZZ_SECONDS=600 (clang, libFuzzer, ASan/UBSan). */
#include <dygraph.h>
#include <assert.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
    dg_tensor_dict *d = dg_load_safetensors_buffer(data, size, "fuzz");
    /* a parser that refuses an input must say why */
    assert(d || dg_last_error()[0]);
    if (d) {
        /* touch every loaded value so a wrong offset would be caught by ASan */
        double acc = 0;
        for (int i = 0; i < dg_tensor_dict_size(d); i++) {
            dg_tensor *t = dg_tensor_dict_tensor(d, i);
            const unsigned char *p = dg_data(t);
            for (int64_t k = 0; k < dg_numel(t) * (int64_t)dg_dtype_size(dg_dtype_of(t)); k++) acc += p[k];
        }
        (void)acc;
    }
    dg_tensor_dict_free(d);
    dg_clear_error();
    return 0;
}
