/* test/cuda_emu/detector_kernels.h — the programs of detector_kernels.cu, for the C tests. */
#ifndef DGEMU_DETECTOR_KERNELS_H
#define DGEMU_DETECTOR_KERNELS_H
#include <stdbool.h>
#ifdef __cplusplus
extern "C" {
#endif
int dgd_read_after_copy(bool synchronise);          /* element 1000 as the host saw it (7 once copied) */
float dgd_host_reads_device_pointer(void);         /* faults under the emulator */
int dgd_two_streams(bool with_event);              /* y[300] read back (42 when ordered) */
int dgd_barrier(int quit, int *out_value);         /* cudaError_t of the read-back; value of out[266] */
int dgd_warp_sum(int blocks, int *out_total);      /* cudaError_t; sum of all warp sums */
int dgd_atomics(int n, int *out_count);            /* cudaError_t; the counter */
int dgd_overrun(void);                             /* cudaError_t of the synchronise after the launch */
int dgd_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz);   /* cudaGetLastError */
/* right programs: what a GPU gives */
int dgd_event_rerecorded_elsewhere(void);          /* 1 */
int dgd_wait_chain(int n);                         /* 5, n <= 64 streams each waiting on the next */
int dgd_legacy_stream_orders_blocking_streams(void); /* 7 */
int dgd_shuffle_groups(int *partial0, int *partial16, int *half0, int *half17);   /* 16, 1, 1, 16 */
int dgd_barrier_only_in_later_blocks(int *value);  /* cudaSuccess; 28 */
void dgd_plain_kernel_twice(void);                 /* 64 blocks, twice */
#ifdef __cplusplus
}
#endif
#endif
