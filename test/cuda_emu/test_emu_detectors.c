/* test/cuda_emu/test_emu_detectors.c — the emulator's detectors, each shown to catch its broken
 * program (detector_kernels.cu) and to pass the right one: a read without its synchronise sees
 * stale data, a host dereference of a device pointer faults, a stream that lacks the event on
 * another stream's result reads it unwritten (also under DGEMU_INTERLEAVE=random), a barrier
 * some threads skip and a write past an allocation are sticky errors, launches over the limits
 * fail; and barriers, shuffles and atomics compute what they should. Criterion runs every test
 * in its own process, so one test's sticky error does not reach another. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include "detector_kernels.h"
#include "emu_internal.h"

Test(emu_detectors, read_without_synchronise_sees_stale_data) {
    cr_expect_eq(dgd_read_after_copy(true), 7, "with the synchronise the copy must have landed");
    cr_expect_neq(dgd_read_after_copy(false), 7, "without the synchronise the host must not see the copy yet");
}

Test(emu_detectors, host_dereference_of_device_pointer_faults, .signal = SIGSEGV) {
    dgd_host_reads_device_pointer();
}

Test(emu_detectors, missing_event_between_streams_reads_unwritten_data) {
    cr_expect_eq(dgd_two_streams(true), 42, "ordered by the event, the second stream reads the first one's result");
    cr_expect_neq(dgd_two_streams(false), 42, "without the event the second stream must run before the first one's result");
}

Test(emu_detectors, missing_event_is_caught_under_random_interleaving) {
    setenv("DGEMU_INTERLEAVE", "random", 1);
    /* each try draws its own interleaving from the process's seed (random per run): 64 tries make
     * missing every order that exposes the race vanishingly unlikely (8 were seen to miss) */
    int wrong = 0;
    for (int try = 0; try < 64; try++) {
        cr_expect_eq(dgd_two_streams(true), 42, "events are honoured under random interleaving");
        wrong += dgd_two_streams(false) != 42;
    }
    cr_expect_gt(wrong, 0, "some interleaving must expose the missing event");
}

Test(emu_detectors, divergent_barrier_is_an_error) {
    cr_expect_eq(dgd_barrier(16, NULL), cudaErrorLaunchFailure, "16 threads leave before __syncthreads");
    cr_expect_eq(cudaGetLastError(), cudaErrorLaunchFailure, "the error is sticky");
}

Test(emu_detectors, full_barrier_exchanges_shared_memory) {
    int v = -1;
    cr_assert_eq(dgd_barrier(0, &v), cudaSuccess);
    cr_expect_eq(v, 255 - 10, "thread 10 reads what thread 245 wrote before the barrier");
}

Test(emu_detectors, warp_shuffles_and_atomics) {
    int total = 0, count = 0;
    cr_assert_eq(dgd_warp_sum(40, &total), cudaSuccess);
    long long want = 0;
    for (int i = 0; i < 40 * 256; i++) want += i % 97;
    cr_expect_eq(total, (int)want, "warp sums add up to the input's sum");
    cr_assert_eq(dgd_atomics(100000, &count), cudaSuccess);
    cr_expect_eq(count, 100000, "every atomicAdd counted across blocks on several OS threads");
}

Test(emu_detectors, write_past_an_allocation_is_an_illegal_address) {
    cr_expect_eq(dgd_overrun(), cudaErrorIllegalAddress);
    void *p = NULL;
    cr_expect_eq(cudaMalloc(&p, 16), cudaErrorIllegalAddress, "every later call returns the sticky error");
}

Test(emu_detectors, launches_over_the_device_limits_fail) {
    cr_expect_eq(dgd_launch(1, 1, 1, 256, 1, 1), cudaSuccess);
    cr_expect_eq(dgd_launch(1, 1, 1, 2048, 1, 1), cudaErrorInvalidConfiguration, "2048 threads per block");
    cr_expect_eq(dgd_launch(1, 1, 1, 32, 32, 2), cudaErrorInvalidConfiguration, "2048 threads in 3 dims");
    cr_expect_eq(dgd_launch(1, 1, 1, 1, 1, 65), cudaErrorInvalidConfiguration, "block z > 64");
    cr_expect_eq(dgd_launch(1, 70000, 1, 32, 1, 1), cudaErrorInvalidConfiguration, "grid y > 65535");
    cr_expect_eq(dgd_launch(0, 1, 1, 32, 1, 1), cudaErrorInvalidConfiguration, "empty grid");
    cr_expect_eq(dgd_launch(1, 1, 1, 32, 1, 1), cudaSuccess, "a launch error is not sticky");
}

Test(emu_detectors, memory_limit_gives_out_of_memory) {
    setenv("DGEMU_MEMORY_MB", "8", 1);
    void *a = NULL, *b = NULL;
    cr_assert_eq(cudaMalloc(&a, 6 << 20), cudaSuccess);
    cr_expect_eq(cudaMalloc(&b, 6 << 20), cudaErrorMemoryAllocation, "8 MB device: the second 6 MB must fail");
    cr_expect_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "out of memory is not sticky");
    cr_assert_eq(cudaFree(a), cudaSuccess);
    cr_expect_eq(cudaMalloc(&b, 6 << 20), cudaSuccess, "freed memory is available again");
}

/* ---- right programs run as a GPU runs them ---- */

Test(emu_semantics, a_wait_is_for_the_record_it_saw) {
    cr_expect_eq(dgd_event_rerecorded_elsewhere(), 1, "a later record on another stream must not release the wait");
}

Test(emu_semantics, long_wait_chains_complete) {
    cr_expect_eq(dgd_wait_chain(40), 5, "40 streams each waiting on the next");
}

Test(emu_semantics, legacy_default_stream_waits_for_blocking_streams) {
    cr_expect_eq(dgd_legacy_stream_orders_blocking_streams(), 7);
}

Test(emu_semantics, shuffle_groups_and_parities) {
    int p0 = -1, p16 = -1, h0 = -1, h17 = -1;
    cr_assert_eq(dgd_shuffle_groups(&p0, &p16, &h0, &h17), cudaSuccess);
    cr_expect_eq(p0, 16, "lane 0 reads lane 16's unchanged value after a half-warp shuffle");
    cr_expect_eq(p16, 1, "lane 16 reads lane 0's value, which came from lane 1");
    cr_expect_eq(h0, 1, "lower half exchanged within itself");
    cr_expect_eq(h17, 16, "upper half exchanged within itself");
}

Test(emu_semantics, barrier_met_only_by_later_blocks) {
    int v = -1;
    cr_assert_eq(dgd_barrier_only_in_later_blocks(&v), cudaSuccess, "block 0 may leave before the barrier the others meet");
    cr_expect_eq(v, 28);
}

Test(emu_semantics, barrier_free_kernels_run_as_plain_loops_after_their_first_launch) {
    dgemu_stats a, b;
    dgemu_get_stats(&a);
    dgd_plain_kernel_twice();
    dgemu_get_stats(&b);
    cr_expect_eq(b.fiber_blocks - a.fiber_blocks, 64, "the first launch runs as fibers");
    cr_expect_eq(b.plain_blocks - a.plain_blocks, 64, "the second as plain loops");
}
