/*
 * deep_queue.cu - an application far ahead of its GPU (MPIX_ACC_STREAM_DEPTH
 * in mpix_acc(3), ENVIRONMENT: calls never block on communication, but a
 * stream's queue is finite).
 *
 * Regression test for a deadlock seen on 2xH200 (test/gpu/default_streams at
 * 300 iterations): with no limit, the application enqueued hundreds of
 * iterations behind a stream wait, the CUDA driver's queue filled, the
 * application thread blocked inside cuLaunchKernel holding a driver lock,
 * and the progress thread's next CUDA call (UCX's cuEventRecord for the
 * cuda_ipc copy that would release the wait) waited for that lock forever.
 *
 *   A  each rank delays its stream 200 ms, then enqueues N ring iterations
 *      (fill kernel, Irecv, Isend, Waitall, check kernel, 3 more small
 *      kernels) with no host synchronization: the library makes the calls
 *      wait once the stream is MPIX_ACC_STREAM_DEPTH points ahead, every
 *      message arrives intact, and the enqueue loop took at least the delay
 *      (it was throttled; printed).
 *   B  waits only: N one-request Waitalls of receives matched late (the peer
 *      sends after its own 200 ms delay).
 *
 * Options: --scale=F (N = 3000 x F), --timeout=S
 */
#include "gpu_common.h"

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "deep_queue", 240);
    gt_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    long iters = (long)(3000 * scale);
    if (iters < 20)
        iters = 20;
    const size_t n = 16384;
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, n), *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);
    unsigned long long *ctr;
    GT_CUDA(cudaMalloc(&ctr, sizeof(*ctr)));
    GT_CUDA(cudaMemset(ctr, 0, sizeof(*ctr)));
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);
    int next = (gt_rank + 1) % gt_size, prev = (gt_rank - 1 + gt_size) % gt_size;

    gt_phase("A: ring far ahead of a delayed stream");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = gt_now();
    gt_delay_kernel<<<1, 1, 0, s>>>(200ull * 1000 * 1000);
    for (long it = 0; it < iters; it++) {
        int tag = (int)(it & 0xffff);
        MPI_Request req[2];
        gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, tag), s);
        GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &req[0]));
        GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &req[1]));
        GT_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
        gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s);
        for (int k = 0; k < 3; k++)
            gt_count_kernel<<<1, 1, 0, s>>>(ctr, 1);
    }
    double t_enq = gt_now() - t0;
    GT_CUDA(cudaGetLastError());
    GT_CUDA(cudaStreamSynchronize(s));
    double t_all = gt_now() - t0;
    gt_checker_verify(&chk, "A");
    unsigned long long h = 0;
    GT_CUDA(cudaMemcpy(&h, ctr, sizeof h, cudaMemcpyDeviceToHost));
    GT_CHECK(h == 3ull * (unsigned long long)iters, "counter kernels ran %llu times, expected %llu",
             h, 3ull * (unsigned long long)iters);
    if (gt_rank == 0)
        printf(
            "[deep_queue] ok A: %ld iterations (5 kernels, 3 stream points each) behind a 200 ms "
            "delay: enqueued in %.1f ms, done in %.1f ms\n",
            iters, 1e3 * t_enq, 1e3 * t_all);

    gt_phase("B: waits only, matched late");
    MPI_Barrier(MPI_COMM_WORLD);
    long nb = iters / 4 < 16 ? 16 : iters / 4;
    uint8_t *rb = (uint8_t *)gt_alloc(GT_DEVICE, (size_t)nb);
    uint8_t *sb = (uint8_t *)gt_alloc(GT_DEVICE, (size_t)nb);
    GT_CUDA(cudaMemset(sb, 0x5a, (size_t)nb));
    GT_CUDA(cudaMemset(rb, 0, (size_t)nb));
    GT_CUDA(cudaDeviceSynchronize());
    t0 = gt_now();
    if (gt_rank == 1) {
        gt_delay_kernel<<<1, 1, 0, s>>>(200ull * 1000 * 1000);
        for (long i = 0; i < nb; i++) {
            MPI_Request r;
            GT_MPI(MPIX_Acc_Isend(s, sb + i, 1, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &r));
            GT_MPI(MPIX_Acc_Waitall(s, 1, &r, MPI_STATUSES_IGNORE));
        }
    } else if (gt_rank == 0) {
        for (long i = 0; i < nb; i++) {
            MPI_Request r;
            GT_MPI(MPIX_Acc_Irecv(s, rb + i, 1, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &r));
            GT_MPI(MPIX_Acc_Waitall(s, 1, &r, MPI_STATUSES_IGNORE));
            gt_count_kernel<<<1, 1, 0, s>>>(ctr, 1);
        }
    }
    t_enq = gt_now() - t0;
    GT_CUDA(cudaGetLastError());
    GT_CUDA(cudaStreamSynchronize(s));
    if (gt_rank == 0) {
        uint8_t *hb = (uint8_t *)malloc((size_t)nb);
        GT_CUDA(cudaMemcpy(hb, rb, (size_t)nb, cudaMemcpyDeviceToHost));
        long bad = 0;
        for (long i = 0; i < nb; i++)
            bad += hb[i] != 0x5a;
        free(hb);
        GT_CHECK(bad == 0, "%ld of %ld late-matched bytes wrong", bad, nb);
        printf("[deep_queue] ok B: %ld one-request waits matched late: enqueued in %.1f ms\n", nb,
               1e3 * t_enq);
    }

    GT_CUDA(cudaStreamDestroy(s));
    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_free(GT_DEVICE, sb);
    gt_free(GT_DEVICE, rb);
    GT_CUDA(cudaFree(ctr));
    gt_checker_free(&chk);
    return gt_finish();
}
