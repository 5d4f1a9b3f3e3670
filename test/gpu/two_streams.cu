/*
 * two_streams.cu - two CUDA streams per rank with cross-stream waits: a
 * request created on one stream is waited on the other (MPIX_Acc_Wait(3)).
 *
 * Per iteration (ring: send to rank+1, receive from rank-1):
 *   even iterations                         odd iterations
 *   A: wait event eB (previous send done)   A: wait event eB
 *   A: fill sbuf ; Isend(A) -> sreq         A: fill sbuf ; Isend(A) -> sreq
 *   B: wait event eA (previous check done)  B: wait event eA
 *   B: Irecv(B) -> rreq                     B: Irecv(B) -> rreq
 *   A: MPIX_Acc_Wait(A, rreq)   [cross]     A: MPIX_Acc_Waitall(A, {sreq, rreq}) [mixed]
 *   A: check rbuf ; record eA               A: check rbuf ; record eA
 *   B: MPIX_Acc_Wait(B, sreq)   [cross]
 *   B: count sends ; record eB
 * The events are the CUDA-visible dependencies that make buffer reuse safe;
 * no host synchronization inside the loop. Afterwards: no mismatch, and the
 * send counter on B equals the number of even iterations.
 *
 * Options: --scale=F, --timeout=S
 */
#include "gpu_common.h"

static const size_t sizes[] = {8, 65536, 4 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "two_streams", 300);
    t_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;

    cudaStream_t A, B;
    GT_CUDA(cudaStreamCreateWithFlags(&A, cudaStreamNonBlocking));
    GT_CUDA(cudaStreamCreateWithFlags(&B, cudaStreamNonBlocking));
    cudaEvent_t eA, eB;
    GT_CUDA(cudaEventCreateWithFlags(&eA, cudaEventDisableTiming));
    GT_CUDA(cudaEventCreateWithFlags(&eB, cudaEventDisableTiming));
    unsigned long long *ctr;
    GT_CUDA(cudaMalloc(&ctr, sizeof(*ctr)));
    gt_checker_t chk;
    gt_checker_init(&chk);
    size_t maxn = sizes[NSIZES - 1];
    void *sbuf = gt_alloc(GT_DEVICE, maxn), *rbuf = gt_alloc(GT_DEVICE, maxn);

    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        long iters = (long)(1000 * scale);
        if (iters < 2)
            iters = 2;
        int tag = (int)si;
        char what[128];
        snprintf(what, sizeof what, "cross-stream size %zu x %ld", n, iters);
        t_phase(what);
        GT_CUDA(cudaMemset(ctr, 0, sizeof(*ctr)));
        GT_CUDA(cudaDeviceSynchronize());
        for (long it = 0; it < iters; it++) {
            MPI_Request sreq, rreq;
            GT_CUDA(cudaStreamWaitEvent(A, eB, 0));
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, tag), A);
            T_MPI(MPIX_Acc_Isend(A, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &sreq));
            GT_CUDA(cudaStreamWaitEvent(B, eA, 0));
            T_MPI(MPIX_Acc_Irecv(B, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rreq));
            if (it % 2 == 0) {
                T_MPI(MPIX_Acc_Wait(A, &rreq, MPI_STATUS_IGNORE));
                gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, A);
                GT_CUDA(cudaEventRecord(eA, A));
                T_MPI(MPIX_Acc_Wait(B, &sreq, MPI_STATUS_IGNORE));
                gt_count_kernel<<<1, 1, 0, B>>>(ctr, 1);
                GT_CUDA(cudaGetLastError());
                GT_CUDA(cudaEventRecord(eB, B));
            } else {
                MPI_Request both[2] = {sreq, rreq};
                T_MPI(MPIX_Acc_Waitall(A, 2, both, MPI_STATUSES_IGNORE));
                gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, A);
                GT_CUDA(cudaEventRecord(eA, A));
            }
        }
        GT_CUDA(cudaStreamSynchronize(A));
        GT_CUDA(cudaStreamSynchronize(B));
        gt_checker_verify(&chk, what);
        unsigned long long h = 0;
        GT_CUDA(cudaMemcpy(&h, ctr, sizeof h, cudaMemcpyDeviceToHost));
        T_CHECK(h == (unsigned long long)((iters + 1) / 2),
                "%s: stream B passed %llu send waits, expected %ld", what, h, (iters + 1) / 2);
        if (t_rank == 0)
            printf("[two_streams] ok %s\n", what);
    }

    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_checker_free(&chk);
    GT_CUDA(cudaFree(ctr));
    GT_CUDA(cudaEventDestroy(eA));
    GT_CUDA(cudaEventDestroy(eB));
    GT_CUDA(cudaStreamDestroy(A));
    GT_CUDA(cudaStreamDestroy(B));
    return gt_finish();
}
