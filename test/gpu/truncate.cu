/*
 * truncate.cu - truncation on a CUDA stream (mpix_acc(3): SEMANTICS, ERRORS): a
 * message longer than the receive buffer completes the receive with
 * MPI_ERR_TRUNCATE in its status, never leaves the stream waiting, never
 * writes past the receive buffer, and the sender completes normally.
 *
 * Ring (send to rank+1, receive from rank-1), device buffers, eager
 * (1024 B into 512 B) and rendezvous (1 MiB into 512 KiB) sizes:
 *   A  stream wait: Irecv ; Isend ; Wait(send) ; Wait(recv, status in pinned
 *      memory) ; a counter kernel proves the stream went on ; a check kernel
 *      proves the canary bytes behind the receive buffer are intact.
 *      Looped; the host checks statuses after the stream synchronized.
 *   B  host wait: MPIX_Acc_Irecv truncated, MPI_Wait on the host returns an
 *      error of class MPI_ERR_TRUNCATE (MPI_ERRORS_RETURN).
 *   C  a normal exchange afterwards still works.
 *
 * Options: --scale=F, --timeout=S
 */
#include "gpu_common.h"

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "truncate", 180);
    gt_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    int next = (gt_rank + 1) % gt_size, prev = (gt_rank - 1 + gt_size) % gt_size;

    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);
    unsigned long long *ctr;
    GT_CUDA(cudaMalloc(&ctr, sizeof(*ctr)));

    static const size_t msg[] = {1024, 1 << 20};
    for (int k = 0; k < 2; k++) {
        size_t n = msg[k], rn = n / 2;
        uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, n),
                *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);
        long iters = (long)(50 * scale);
        if (iters < 1)
            iters = 1;
        char what[128];
        snprintf(what, sizeof what, "A: stream wait, %zu B into %zu B x %ld", n, rn, iters);
        gt_phase(what);
        MPI_Status *st;
        GT_CUDA(cudaMallocHost(&st, sizeof(MPI_Status) * 2 * (size_t)iters));
        memset(st, 0, sizeof(MPI_Status) * 2 * (size_t)iters);
        GT_CUDA(cudaMemset(ctr, 0, sizeof(*ctr)));
        uint64_t canary = gt_seed(gt_rank, 4242, k);
        gt_fill(GT_DEVICE, rbuf + rn, n - rn, canary, s); /* canary behind the buffer */
        for (long it = 0; it < iters; it++) {
            MPI_Request rreq, sreq;
            int tag = (int)it;
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, 5), s);
            GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)rn, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rreq));
            GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &sreq));
            GT_MPI(MPIX_Acc_Wait(s, &sreq, &st[2 * it]));
            GT_MPI(MPIX_Acc_Wait(s, &rreq, &st[2 * it + 1]));
            gt_count_kernel<<<1, 1, 0, s>>>(ctr, 1);
            GT_CUDA(cudaGetLastError());
            /* bytes [rn, n) of rbuf must still hold the canary */
            gt_check_kernel<<<gt_blocks(n - rn), 256, 0, s>>>(rbuf + rn, n - rn, canary, it,
                                                              chk.dev);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, "canary behind the receive buffer (checked on the stream)");
        unsigned long long h = 0;
        GT_CUDA(cudaMemcpy(&h, ctr, sizeof h, cudaMemcpyDeviceToHost));
        GT_CHECK(h == (unsigned long long)iters, "%s: stream passed %llu of %ld waits", what, h,
                 iters);
        for (long it = 0; it < iters; it++) {
            int cls = -1;
            MPI_Error_class(st[2 * it + 1].MPI_ERROR, &cls);
            GT_CHECK(cls == MPI_ERR_TRUNCATE,
                     "%s: iteration %ld: receive status error %d (class %d), expected "
                     "MPI_ERR_TRUNCATE (%d); status %s",
                     what, it, st[2 * it + 1].MPI_ERROR, cls, MPI_ERR_TRUNCATE,
                     gt_status_str(&st[2 * it + 1]));
            GT_CHECK(st[2 * it].MPI_ERROR == MPI_SUCCESS,
                     "%s: iteration %ld: send status error %d, expected MPI_SUCCESS", what, it,
                     st[2 * it].MPI_ERROR);
        }
        /* canary once more from the host, after everything */
        uint8_t *tail = (uint8_t *)malloc(n - rn);
        GT_CUDA(cudaMemcpy(tail, rbuf + rn, n - rn, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n - rn; i++)
            GT_CHECK(tail[i] == gt_pat(canary, i),
                     "%s: byte %zu behind the %zu-byte receive buffer was overwritten", what,
                     rn + i, rn);
        free(tail);
        GT_CUDA(cudaFreeHost(st));
        if (gt_rank == 0)
            printf("[truncate] ok %s\n", what);

        /* B: host wait on a truncated stream receive */
        snprintf(what, sizeof what, "B: host MPI_Wait, %zu B into %zu B", n, rn);
        gt_phase(what);
        {
            MPI_Request rreq, sreq;
            MPI_Status rst;
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, 7, 7), s);
            GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)rn, MPI_BYTE, prev, 999, MPI_COMM_WORLD, &rreq));
            GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, 999, MPI_COMM_WORLD, &sreq));
            int rc = MPI_Wait(&rreq, &rst);
            int cls = -1;
            MPI_Error_class(rc, &cls);
            GT_CHECK(cls == MPI_ERR_TRUNCATE,
                     "%s: MPI_Wait returned %s, expected class "
                     "MPI_ERR_TRUNCATE",
                     what, gt_errstr(rc));
            GT_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
            GT_CUDA(cudaStreamSynchronize(s));
        }
        if (gt_rank == 0)
            printf("[truncate] ok %s\n", what);

        /* C: a normal exchange afterwards */
        snprintf(what, sizeof what, "C: normal exchange after truncation, %zu B", n);
        gt_phase(what);
        {
            MPI_Request req[2];
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, 8, 8), s);
            GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, 1000, MPI_COMM_WORLD, &req[0]));
            GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, 1000, MPI_COMM_WORLD, &req[1]));
            GT_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, 8, 8), 0, s);
            GT_CUDA(cudaStreamSynchronize(s));
            gt_checker_verify(&chk, what);
        }
        if (gt_rank == 0)
            printf("[truncate] ok %s\n", what);
        gt_free(GT_DEVICE, sbuf);
        gt_free(GT_DEVICE, rbuf);
    }
    GT_CUDA(cudaFree(ctr));
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    return gt_finish();
}
