/* test/install/gpu_request.c — run by test/install/run.sh against an install tree whose
 * modules were removed: a CPU program works, and asking for a GPU (setting the device, moving a
 * layer there) or for the MPI transport is an error that names the missing module, not a crash
 * or a failed link. */
#include <dygraph.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    if (dg_set_device("gpu:0") == 0) { fprintf(stderr, "gpu_request: gpu:0 was accepted without the CUDA module\n"); return 1; }
    if (!strstr(dg_last_error(), "libdygraph-cuda.so.0")) {
        fprintf(stderr, "gpu_request: the message does not name the CUDA module: %s\n", dg_last_error());
        return 1;
    }
    printf("gpu:0 without the module: %s\n", dg_last_error());
    dg_clear_error();
    /* moving a layer: refused, named, and the layer stays on the CPU */
    dg_layer *lin = dg_nn_linear(3, 2);
    dg_tensor *w = dg_layer_parameter(lin, "weight");
    void *before = dg_data(w);
    if (dg_layer_to(lin, (dg_device){ DG_CUDA, 0 }) == 0 || !strstr(dg_last_error(), "libdygraph-cuda.so.0") ||
        !strstr(dg_last_error(), "layer_to(gpu:0)") || dg_data(w) != before || dg_device_of(w).type != DG_CPU) {
        fprintf(stderr, "gpu_request: dg_layer_to(gpu:0) without the module: %s\n", dg_last_error());
        return 1;
    }
    printf("layer_to(gpu:0) without the module: refused, the layer stays on the CPU\n");
    dg_layer_free(lin);
    dg_clear_error();
    dg_tensor *t = dg_sum_all(dg_full(DG_SHAPE(4), 2.0, DG_F32));
    if (!t || dg_item(t) != 8.0) { fprintf(stderr, "gpu_request: CPU sum failed: %s\n", dg_last_error()); return 1; }
    printf("CPU without the modules: sum 8 ok\n");
    return 0;
}
