/*
 * default_streams.cu - the CUDA default streams and stream validation
 * (mpix_acc(3): Streams, ERRORS):
 *   A  NULL = the legacy default stream: kernels on stream 0, MPIX_Acc_*
 *      with a NULL stream                                          (300 it.)
 *   B  cudaStreamPerThread                                         (300 it.)
 *   C  NULL and cudaStreamLegacy name the same stream: Isend/Irecv on one,
 *      Waitall on the other                                        (300 it.)
 *   D  an invalid stream handle is refused at call time with an error of
 *      class MPI_ERR_ARG (MPI_ERRORS_RETURN), and nothing is left behind
 *
 * Options: --scale=F, --timeout=S
 */
#include "gpu_common.h"

static void ring_loop(const char *what, cudaStream_t ks, MPIX_Acc_stream post, MPIX_Acc_stream wait,
                      long iters, int tagbase, gt_checker_t *chk, uint8_t *sbuf, uint8_t *rbuf,
                      size_t n)
{
    t_phase(what);
    for (long it = 0; it < iters; it++)
        gt_ring_step(ks, post, wait, sbuf, rbuf, n, tagbase + (int)it, it, chk);
    GT_CUDA(cudaStreamSynchronize(ks));
    gt_checker_verify(chk, what);
    if (t_rank == 0)
        printf("[default_streams] ok %s x %ld\n", what, iters);
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "default_streams", 180);
    t_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    long iters = (long)(300 * scale);
    if (iters < 1)
        iters = 1;
    gt_checker_t chk;
    gt_checker_init(&chk);
    const size_t n = 16384;
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, n), *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);

    ring_loop("A: NULL (legacy default stream)", (cudaStream_t)0, NULL, NULL, iters, 0, &chk, sbuf,
              rbuf, n);
    ring_loop("B: cudaStreamPerThread", cudaStreamPerThread, (MPIX_Acc_stream)cudaStreamPerThread,
              (MPIX_Acc_stream)cudaStreamPerThread, iters, 100000, &chk, sbuf, rbuf, n);
    ring_loop("C: NULL and cudaStreamLegacy are one stream", cudaStreamLegacy, NULL,
              (MPIX_Acc_stream)cudaStreamLegacy, iters, 200000, &chk, sbuf, rbuf, n);

    t_phase("D: invalid stream handle");
    {
        MPI_Request req = MPI_REQUEST_NULL;
        MPIX_Acc_stream bad = (MPIX_Acc_stream)(uintptr_t)0x10;
        int rc =
            MPIX_Acc_Isend(bad, sbuf, 1, MPI_BYTE, (t_rank + 1) % t_size, 1, MPI_COMM_WORLD, &req);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_ARG,
                "MPIX_Acc_Isend with stream %p returned %s, expected class MPI_ERR_ARG", bad,
                t_errstr(rc));
        rc = MPIX_Acc_Irecv(bad, rbuf, 1, MPI_BYTE, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &req);
        MPI_Error_class(rc, &cls);
        T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_ARG,
                "MPIX_Acc_Irecv with stream %p returned %s, expected class MPI_ERR_ARG", bad,
                t_errstr(rc));
        /* nothing was posted: a normal exchange with tag 1 still matches 1:1 */
        ring_loop("D: exchange after refused calls", (cudaStream_t)0, NULL, NULL, 1, 1, &chk, sbuf,
                  rbuf, n);
    }

    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_checker_free(&chk);
    return gt_finish();
}
