/*
 * dtype_attr.cu - the datatype attribute (mpix_acc(3), Datatype attribute) with a cudaStream_t:
 * MPI_Type_set_attr(dup of MPI_BYTE, MPIX_ACC_STREAM_KEYVAL, stream) makes
 * ordinary MPI_Isend / MPI_Irecv on MPI_COMM_WORLD stream-ordered on that
 * stream; MPI_Waitall on such requests is a stream wait (as on a stream
 * communicator), MPIX_Acc_Waitall too. Kernels produce and check the data on
 * the stream; no host synchronization inside the loop.
 *
 * A second typed datatype, a dup of MPI_INT carrying a second stream, checks
 * that counts are scaled by the type size and that each type uses its own
 * stream.
 *
 * Options: --scale=F, --timeout=S
 */
#include "gpu_common.h"

static const size_t sizes[] = {1, 4096, 8193, 1 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "dtype_attr", 300);
    gt_need_ranks(2);
    gt_warmup();
    double scale = atof(gt_opt("--scale", "1"));
    int next = (gt_rank + 1) % gt_size, prev = (gt_rank - 1 + gt_size) % gt_size;

    cudaStream_t s, s2;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    GT_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);
    size_t maxn = sizes[NSIZES - 1];
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, maxn),
            *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, maxn);

    MPI_Datatype tbyte, tint;
    GT_MPI(MPI_Type_dup(MPI_BYTE, &tbyte));
    GT_MPI(MPI_Type_set_attr(tbyte, MPIX_ACC_STREAM_KEYVAL, (void *)s));
    GT_MPI(MPI_Type_dup(MPI_INT, &tint));
    GT_MPI(MPI_Type_set_attr(tint, MPIX_ACC_STREAM_KEYVAL, (void *)s2));

    for (size_t si = 0; si < NSIZES; si++) {
        size_t n = sizes[si];
        long iters = (long)(1000 * scale);
        if (iters < 1)
            iters = 1;
        int tag = (int)si;
        char what[128];
        snprintf(what, sizeof what, "typed MPI_BYTE size %zu x %ld", n, iters);
        gt_phase(what);
        for (long it = 0; it < iters; it++) {
            MPI_Request req[2];
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, tag), s);
            GT_MPI(MPI_Irecv(rbuf, (int)n, tbyte, prev, tag, MPI_COMM_WORLD, &req[0]));
            GT_MPI(MPI_Isend(sbuf, (int)n, tbyte, next, tag, MPI_COMM_WORLD, &req[1]));
            if (it % 2 == 0)
                GT_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
            else
                GT_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
            GT_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
                     "waitall on typed requests left handles set");
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s);
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        if (gt_rank == 0)
            printf("[dtype_attr] ok %s\n", what);
    }

    /* MPI_INT dup on stream s2: count in ints. */
    {
        int count = 65536 / 4;
        size_t n = (size_t)count * sizeof(int);
        long iters = (long)(300 * scale);
        if (iters < 1)
            iters = 1;
        int tag = 77;
        gt_phase("typed MPI_INT on a second stream");
        for (long it = 0; it < iters; it++) {
            MPI_Request req[2];
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, tag), s2);
            GT_MPI(MPI_Irecv(rbuf, count, tint, prev, tag, MPI_COMM_WORLD, &req[0]));
            GT_MPI(MPI_Isend(sbuf, count, tint, next, tag, MPI_COMM_WORLD, &req[1]));
            GT_MPI(MPI_Waitall(2, req, MPI_STATUSES_IGNORE));
            gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, tag), it, s2);
        }
        GT_CUDA(cudaStreamSynchronize(s2));
        gt_checker_verify(&chk, "typed MPI_INT on a second stream");
        if (gt_rank == 0)
            printf("[dtype_attr] ok typed MPI_INT count %d x %ld on a second stream\n", count,
                   iters);
    }

    GT_MPI(MPI_Type_free(&tbyte));
    GT_MPI(MPI_Type_free(&tint));
    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    GT_CUDA(cudaStreamDestroy(s2));
    return gt_finish();
}
