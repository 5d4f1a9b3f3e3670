/*
 * call_order.cu - call-order matching with CUDA streams (mpix_acc(3),
 * "Ordering"): rank 0 enqueues send A (tag 5) on a stream that a kernel
 * holds for 300 ms, then send B (tag 5) on a free stream; rank 1's first
 * receive for tag 5 must get A, its second B -- whatever starts first. On a
 * communicator with mpix_acc_match=dynamic the first receive gets B (start
 * order). Then a channel alternating between the two streams, with the first
 * stream delayed by kernels now and then: every receive sees its message in
 * call order. Device buffers; checked on the host after a synchronize.
 *
 * Options: --scale=F (channel length), --timeout=S
 */
#include "gpu_common.h"

static void held_case(MPI_Comm comm, int dynamic, cudaStream_t s1, cudaStream_t s2, int *dbuf)
{
    const char *mode = dynamic ? "mpix_acc_match=dynamic" : "call order";
    int host[2] = {0, 0};
    if (t_rank == 0) {
        int ab[2] = {'A', 'B'};
        GT_CUDA(cudaMemcpy(dbuf, ab, sizeof ab, cudaMemcpyHostToDevice));
        MPI_Request r[2];
        gt_delay_kernel<<<1, 1, 0, s1>>>(300ull * 1000 * 1000);
        T_MPI(MPIX_Acc_Isend(s1, &dbuf[0], 1, MPI_INT, 1, 5, comm, &r[0]));
        T_MPI(MPIX_Acc_Isend(s2, &dbuf[1], 1, MPI_INT, 1, 5, comm, &r[1]));
        T_MPI(MPIX_Acc_Wait(s1, &r[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Wait(s2, &r[1], MPI_STATUS_IGNORE));
    } else if (t_rank == 1) {
        GT_CUDA(cudaMemset(dbuf, 0, 2 * sizeof(int)));
        MPI_Request r[2];
        T_MPI(MPIX_Acc_Irecv(s2, &dbuf[0], 1, MPI_INT, 0, 5, comm, &r[0]));
        T_MPI(MPIX_Acc_Irecv(s2, &dbuf[1], 1, MPI_INT, 0, 5, comm, &r[1]));
        T_MPI(MPIX_Acc_Waitall(s2, 2, r, MPI_STATUSES_IGNORE));
    }
    GT_CUDA(cudaStreamSynchronize(s1));
    GT_CUDA(cudaStreamSynchronize(s2));
    if (t_rank == 1) {
        GT_CUDA(cudaMemcpy(host, dbuf, sizeof host, cudaMemcpyDeviceToHost));
        int first = dynamic ? 'B' : 'A', second = dynamic ? 'A' : 'B';
        T_CHECK(host[0] == first && host[1] == second,
                "%s: first receive got '%c', second '%c'; expected '%c', '%c'", mode, host[0],
                host[1], first, second);
    }
    T_MPI(MPI_Barrier(comm));
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "call_order", 180);
    t_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    cudaStream_t s[2];
    GT_CUDA(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
    GT_CUDA(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
    int *dbuf;
    long ch = (long)(400 * scale);
    if (ch < 8)
        ch = 8;
    GT_CUDA(cudaMalloc(&dbuf, sizeof(int) * (size_t)(2 * ch + 2)));

    t_phase("held stream, call order");
    held_case(MPI_COMM_WORLD, 0, s[0], s[1], dbuf);

    t_phase("held stream, mpix_acc_match=dynamic");
    MPI_Info info;
    MPI_Comm dyn;
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPI_Info_set(info, MPIX_ACC_INFO_MATCH, "dynamic"));
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dyn));
    T_MPI(MPI_Info_free(&info));
    held_case(dyn, 1, s[0], s[1], dbuf);
    MPI_Comm_free(&dyn);

    t_phase("one channel alternating between streams");
    if (t_rank <= 1) {
        int peer = 1 - t_rank;
        int *sv = dbuf, *rv = dbuf + ch;
        int *h = (int *)malloc(sizeof(int) * (size_t)ch);
        for (long k = 0; k < ch; k++)
            h[k] = t_rank * 1000000 + (int)k;
        GT_CUDA(cudaMemcpy(sv, h, sizeof(int) * (size_t)ch, cudaMemcpyHostToDevice));
        GT_CUDA(cudaMemset(rv, 0xff, sizeof(int) * (size_t)ch));
        GT_CUDA(cudaDeviceSynchronize());
        MPI_Request *req = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)(2 * ch));
        for (long k = 0; k < ch; k++) {
            if (k % 32 == 0)
                gt_delay_kernel<<<1, 1, 0, s[0]>>>(2ull * 1000 * 1000);
            T_MPI(MPIX_Acc_Irecv(s[(k + 1) % 2], &rv[k], 1, MPI_INT, peer, 9, MPI_COMM_WORLD,
                                 &req[2 * k]));
            T_MPI(MPIX_Acc_Isend(s[k % 2], &sv[k], 1, MPI_INT, peer, 9, MPI_COMM_WORLD,
                                 &req[2 * k + 1]));
            if (k % 64 == 63) { /* keep the streams' queues short */
                T_MPI(MPIX_Acc_Waitall(s[0], 128, &req[2 * (k - 63)], MPI_STATUSES_IGNORE));
            }
        }
        long done = (ch / 64) * 64;
        if (done < ch)
            T_MPI(MPIX_Acc_Waitall(s[0], (int)(2 * (ch - done)), &req[2 * done],
                                   MPI_STATUSES_IGNORE));
        GT_CUDA(cudaStreamSynchronize(s[0]));
        GT_CUDA(cudaStreamSynchronize(s[1]));
        GT_CUDA(cudaMemcpy(h, rv, sizeof(int) * (size_t)ch, cudaMemcpyDeviceToHost));
        for (long k = 0; k < ch; k++)
            T_CHECK(h[k] == peer * 1000000 + (int)k,
                    "alternating streams: receive %ld got %d, expected %d", k, h[k],
                    peer * 1000000 + (int)k);
        free(h);
        free(req);
    }
    GT_CUDA(cudaFree(dbuf));
    GT_CUDA(cudaStreamDestroy(s[0]));
    GT_CUDA(cudaStreamDestroy(s[1]));
    return gt_finish();
}
