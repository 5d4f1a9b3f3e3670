/*
 * stream_comm.cu - a stream communicator (info key mpix_acc_stream) on a
 * cudaStream_t: unmodified MPI_Isend / MPI_Irecv / MPI_Waitall (and
 * MPI_Send / MPI_Recv, MPI_Sendrecv) inside a CUDA loop, with kernels
 * producing and checking the data on the same stream and no host
 * synchronization inside the loops.
 *
 *   A  MPI_Comm_dup_with_info(MPI_COMM_WORLD, {mpix_acc_stream: s}):
 *      fill ; MPI_Irecv ; MPI_Isend ; MPI_Waitall ; check     (ring, 1000 it.)
 *   B  same communicator: MPI_Send / MPI_Recv (even ranks send first),
 *      MPI_Sendrecv and MPI_Sendrecv_replace (through the stream's
 *      device scratch), with fill and check kernels            (200 it.)
 *   C  MPIX_Acc_Comm_set_stream on a plain duplicate with a second stream,
 *      MPI_Comm_get_info returns the key                        (200 it.)
 *
 * Options: --scale=F (iteration counts), --max-size=N (default 1 MiB),
 *          --timeout=S
 */
#include "gpu_common.h"

static const size_t sizes[] = {8, 8193, 65536, 1 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static long scaled(long n, double f)
{
    long v = (long)((double)n * f);
    return v < 1 ? 1 : v;
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "stream_comm", 300);
    t_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    size_t max_size = (size_t)gt_opt_long("--max-size", 1 << 20);
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;

    cudaStream_t s, s2;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    GT_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);
    size_t maxn = sizes[NSIZES - 1];
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, maxn),
            *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, maxn);

    t_phase("A: dup_with_info");
    MPI_Comm scomm = gt_stream_comm(s);
    MPI_Comm_set_errhandler(scomm, MPI_ERRORS_RETURN);

    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        if (n > max_size)
            continue;
        long iters = scaled(1000, scale);
        int tag = (int)si;
        char what[128];
        snprintf(what, sizeof what, "A: Isend/Irecv/Waitall size %zu x %ld", n, iters);
        t_phase(what);
        double t0 = t_now();
        for (long it = 0; it < iters; it++) {
            MPI_Request req[2];
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, tag), s);
            T_MPI(MPI_Irecv(rbuf, (int)n, MPI_BYTE, prev, tag, scomm, &req[0]));
            T_MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, next, tag, scomm, &req[1]));
            T_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
            T_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
                    "MPI_Waitall on a stream communicator left handles set");
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        if (t_rank == 0)
            printf("[stream_comm] ok %s: %.1f us/iter\n", what,
                   1e6 * (t_now() - t0) / (double)iters);
    }

    /* B: blocking-style calls, stream-ordered (return at once on the host). */
    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        if (n > max_size)
            continue;
        long iters = scaled(200, scale);
        int tag = (int)(100 + si);
        char what[128];
        snprintf(what, sizeof what, "B: Send/Recv + Sendrecv + Sendrecv_replace size %zu x %ld", n,
                 iters);
        t_phase(what);
        for (long it = 0; it < iters; it++) {
            /* ring shift with Send/Recv: even ranks send first */
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, tag), s);
            if (t_rank % 2 == 0) {
                T_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, next, tag, scomm));
                T_MPI(MPI_Recv(rbuf, (int)n, MPI_BYTE, prev, tag, scomm, MPI_STATUS_IGNORE));
            } else {
                T_MPI(MPI_Recv(rbuf, (int)n, MPI_BYTE, prev, tag, scomm, MPI_STATUS_IGNORE));
                T_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, next, tag, scomm));
            }
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s);
            /* the same with MPI_Sendrecv, the other direction */
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, tag + 50), s);
            T_MPI(MPI_Sendrecv(sbuf, (int)n, MPI_BYTE, prev, tag + 50, rbuf, (int)n, MPI_BYTE, next,
                               tag + 50, scomm, MPI_STATUS_IGNORE));
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(next, it, tag + 50), it, s);
            /* and MPI_Sendrecv_replace, in place in sbuf */
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, tag + 70), s);
            T_MPI(MPI_Sendrecv_replace(sbuf, (int)n, MPI_BYTE, next, tag + 70, prev, tag + 70,
                                       scomm, MPI_STATUS_IGNORE));
            gt_check(&chk, GT_DEVICE, sbuf, n, gt_seed(prev, it, tag + 70), it, s);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        if (t_rank == 0)
            printf("[stream_comm] ok %s\n", what);
    }

    /* C: MPIX_Acc_Comm_set_stream on a plain duplicate, second stream. */
    t_phase("C: Comm_set_stream");
    MPI_Comm c2;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
    MPI_Comm_set_errhandler(c2, MPI_ERRORS_RETURN);
    T_MPI(MPIX_Acc_Comm_set_stream(c2, s2));
    MPI_Info got;
    T_MPI(MPI_Comm_get_info(c2, &got));
    char val[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    T_MPI(MPI_Info_get(got, MPIX_ACC_INFO_STREAM, MPI_MAX_INFO_VAL, val, &flag));
    T_CHECK(flag, "MPI_Comm_get_info lacks %s after MPIX_Acc_Comm_set_stream",
            MPIX_ACC_INFO_STREAM);
    T_CHECK(strtoull(val, NULL, 16) == (unsigned long long)(uintptr_t)s2,
            "MPI_Comm_get_info: %s = '%s', expected %p", MPIX_ACC_INFO_STREAM, val, (void *)s2);
    T_MPI(MPI_Info_free(&got));
    {
        size_t n = 65536 <= max_size ? 65536 : max_size;
        long iters = scaled(200, scale);
        int tag = 300;
        for (long it = 0; it < iters; it++) {
            MPI_Request req[2];
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, tag), s2);
            T_MPI(MPI_Irecv(rbuf, (int)n, MPI_BYTE, prev, tag, c2, &req[0]));
            T_MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, next, tag, c2, &req[1]));
            T_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s2);
        }
        GT_CUDA(cudaStreamSynchronize(s2));
        gt_checker_verify(&chk, "C: Comm_set_stream loop");
        if (t_rank == 0)
            printf("[stream_comm] ok C: Comm_set_stream, size %zu x %ld\n", n, iters);
    }

    T_MPI(MPI_Comm_free(&c2));
    T_MPI(MPI_Comm_free(&scomm));
    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    GT_CUDA(cudaStreamDestroy(s2));
    return gt_finish();
}
