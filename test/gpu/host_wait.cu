/*
 * host_wait.cu - host-side MPI request functions on stream-enqueued
 * requests (mpix_acc(3), Requests).
 *
 * Ring, device buffers, fill/check kernels on the stream:
 *   A  MPIX_Acc_Irecv / MPIX_Acc_Isend, host MPI_Wait on each      (200 it.)
 *   B  the same completed by an MPI_Test loop                        (200 it.)
 *   C  MPI_Waitall mixing stream requests with plain MPI requests on
 *      host buffers of MPI_COMM_WORLD                                (100 it.)
 *   D  host wait before the stream reached the operation: a 20 ms delay
 *      kernel precedes the fill and the Isend; MPI_Wait on the send must
 *      not return before the stream got there, and the data is right
 *   E  MPI_Waitany, MPI_Testall, MPI_Request_get_status               (100 it.)
 *   F  MPI_Request_free on a stream send; the data still arrives
 *
 * Options: --scale=F, --timeout=S
 */
#include "gpu_common.h"

static long scaled(long n, double f)
{
    long v = (long)((double)n * f);
    return v < 1 ? 1 : v;
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "host_wait", 240);
    gt_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    int next = (gt_rank + 1) % gt_size, prev = (gt_rank - 1 + gt_size) % gt_size;

    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);
    const size_t n = 65536;
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, n), *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);
    char what[128];

    /* A and B */
    for (int mode = 0; mode < 2; mode++) {
        long iters = scaled(200, scale);
        snprintf(what, sizeof what, "%s x %ld", mode == 0 ? "A: host MPI_Wait" : "B: MPI_Test loop",
                 iters);
        gt_phase(what);
        for (long it = 0; it < iters; it++) {
            int tag = mode * 10000 + (int)it;
            MPI_Request rreq, sreq;
            MPI_Status st;
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, tag), s);
            GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rreq));
            GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &sreq));
            if (mode == 0) {
                GT_MPI(MPI_Wait(&rreq, &st));
                GT_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
            } else {
                int fr = 0, fs = 0;
                double t0 = gt_now();
                while (!(fr && fs)) {
                    if (!fr)
                        GT_MPI(MPI_Test(&rreq, &fr, &st));
                    if (!fs)
                        GT_MPI(MPI_Test(&sreq, &fs, MPI_STATUS_IGNORE));
                    GT_CHECK(gt_now() - t0 < 30.0, "MPI_Test never completed (30 s)");
                }
            }
            GT_CHECK(rreq == MPI_REQUEST_NULL && sreq == MPI_REQUEST_NULL,
                     "completed requests not set to MPI_REQUEST_NULL");
            GT_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == tag,
                     "status %s, expected source %d "
                     "tag %d",
                     gt_status_str(&st), prev, tag);
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        if (gt_rank == 0)
            printf("[host_wait] ok %s\n", what);
    }

    /* C: mixed with plain MPI requests */
    {
        long iters = scaled(100, scale);
        snprintf(what, sizeof what, "C: MPI_Waitall mixed with plain requests x %ld", iters);
        gt_phase(what);
        long hs = 0, hr = -1;
        for (long it = 0; it < iters; it++) {
            int tag = 20000 + (int)it;
            MPI_Request req[4];
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, tag), s);
            GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &req[0]));
            GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &req[1]));
            hs = it * 7 + gt_rank;
            GT_MPI(MPI_Irecv(&hr, 1, MPI_LONG, prev, tag + 5000, MPI_COMM_WORLD, &req[2]));
            GT_MPI(MPI_Isend(&hs, 1, MPI_LONG, next, tag + 5000, MPI_COMM_WORLD, &req[3]));
            GT_MPI(MPI_Waitall(4, req, MPI_STATUSES_IGNORE));
            GT_CHECK(hr == it * 7 + prev, "plain message %ld, expected %ld", hr, it * 7 + prev);
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        if (gt_rank == 0)
            printf("[host_wait] ok %s\n", what);
    }

    /* D: host wait before the stream reaches the operation */
    {
        snprintf(what, sizeof what, "D: host wait on an operation the stream has not reached");
        gt_phase(what);
        GT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        MPI_Request rreq, sreq;
        int tag = 30000;
        const double delay_s = 0.020;
        gt_delay_kernel<<<1, 1, 0, s>>>((unsigned long long)(delay_s * 1e9));
        gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, 0, tag), s);
        double t0 = gt_now();
        GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &sreq));
        GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rreq));
        GT_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        double dt = gt_now() - t0;
        GT_MPI(MPI_Wait(&rreq, MPI_STATUS_IGNORE));
        GT_CHECK(dt >= 0.9 * delay_s,
                 "MPI_Wait on the send returned after %.1f ms, before the "
                 "stream reached the send (delay %.0f ms)",
                 dt * 1e3, delay_s * 1e3);
        gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, 0, tag), 0, s);
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        if (gt_rank == 0)
            printf("[host_wait] ok %s (send completed after %.1f ms)\n", what, dt * 1e3);
    }

    /* E: Waitany, Testall, Request_get_status */
    {
        long iters = scaled(100, scale);
        snprintf(what, sizeof what, "E: Waitany / Testall / Request_get_status x %ld", iters);
        gt_phase(what);
        for (long it = 0; it < iters; it++) {
            int tag = 40000 + (int)it;
            MPI_Request req[2];
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, tag), s);
            GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &req[0]));
            GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &req[1]));
            if (it % 2 == 0) {
                int idx = -1, idx2 = -1;
                GT_MPI(MPI_Waitany(2, req, &idx, MPI_STATUS_IGNORE));
                GT_CHECK(idx == 0 || idx == 1, "MPI_Waitany index %d", idx);
                GT_MPI(MPI_Waitany(2, req, &idx2, MPI_STATUS_IGNORE));
                GT_CHECK(idx2 == 1 - idx, "MPI_Waitany second index %d after %d", idx2, idx);
            } else {
                int flag = 0;
                MPI_Status st;
                double t0 = gt_now();
                do {
                    GT_MPI(MPI_Request_get_status(req[0], &flag, &st));
                    GT_CHECK(gt_now() - t0 < 30.0, "MPI_Request_get_status never true");
                } while (!flag);
                GT_CHECK(req[0] != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
                flag = 0;
                t0 = gt_now();
                while (!flag) {
                    GT_MPI(MPI_Testall(2, req, &flag, MPI_STATUSES_IGNORE));
                    GT_CHECK(gt_now() - t0 < 30.0, "MPI_Testall never true");
                }
            }
            GT_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
                     "requests not freed");
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        if (gt_rank == 0)
            printf("[host_wait] ok %s\n", what);
    }

    /* F: MPI_Request_free on a stream send */
    {
        snprintf(what, sizeof what, "F: MPI_Request_free on a stream send");
        gt_phase(what);
        MPI_Request rreq, sreq;
        int tag = 50000;
        gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, 1, tag), s);
        GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &rreq));
        GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &sreq));
        GT_MPI(MPI_Request_free(&sreq));
        GT_CHECK(sreq == MPI_REQUEST_NULL, "MPI_Request_free left the handle set");
        GT_MPI(MPIX_Acc_Wait(s, &rreq, MPI_STATUS_IGNORE));
        gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, 1, tag), 0, s);
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        /* the freed send must be complete before its buffer is reused: the
         * barrier after the peer's check makes sure it was received */
        GT_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (gt_rank == 0)
            printf("[host_wait] ok %s\n", what);
    }

    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    return gt_finish();
}
