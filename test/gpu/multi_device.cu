/*
 * multi_device.cu - streams of two GPUs in one process (needs >= 2 visible
 * GPUs): each rank drives stream A on its own GPU and stream B on the next
 * GPU, with buffers on the stream's GPU, and makes every MPIX_Acc_* call
 * while the OTHER device is current, so the library must use each stream's
 * own context.
 *
 * Per iteration (ring): A: fill ; Irecv ; Isend ; Waitall ; check  (tag 1)
 *                       B: the same                                (tag 2)
 * No host synchronization inside the loop.
 *
 * Options: --scale=F, --timeout=S
 */
#include "gpu_common.h"

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "multi_device", 240);
    t_need_ranks(2);
    if (gt_ndev < 2)
        t_fail("needs at least 2 visible GPUs, found %d", gt_ndev);
    double scale = atof(gt_opt("--scale", "1"));
    long iters = (long)(500 * scale);
    if (iters < 1)
        iters = 1;
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    int dev[2] = {gt_dev, (gt_dev + 1) % gt_ndev};
    cudaStream_t st[2];
    gt_checker_t chk[2];
    uint8_t *sbuf[2], *rbuf[2];
    const size_t n = 1 << 20;
    for (int k = 0; k < 2; k++) {
        GT_CUDA(cudaSetDevice(dev[k]));
        gt_warmup();
        GT_CUDA(cudaStreamCreateWithFlags(&st[k], cudaStreamNonBlocking));
        gt_checker_init(&chk[k]);
        sbuf[k] = (uint8_t *)gt_alloc(GT_DEVICE, n);
        rbuf[k] = (uint8_t *)gt_alloc(GT_DEVICE, n);
    }
    char what[128];
    snprintf(what, sizeof what, "GPUs %d and %d, %zu B x %ld", dev[0], dev[1], n, iters);
    t_phase(what);
    for (long it = 0; it < iters; it++) {
        for (int k = 0; k < 2; k++) {
            int tag = 1 + k;
            MPI_Request req[2];
            GT_CUDA(cudaSetDevice(dev[k]));
            gt_fill(GT_DEVICE, sbuf[k], n, gt_seed(t_rank, it, tag), st[k]);
            GT_CUDA(cudaSetDevice(dev[1 - k])); /* the other device is current */
            T_MPI(MPIX_Acc_Irecv(st[k], rbuf[k], (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD,
                                 &req[0]));
            T_MPI(MPIX_Acc_Isend(st[k], sbuf[k], (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD,
                                 &req[1]));
            T_MPI(MPIX_Acc_Waitall(st[k], 2, req, MPI_STATUSES_IGNORE));
            GT_CUDA(cudaSetDevice(dev[k]));
            gt_check(&chk[k], GT_DEVICE, rbuf[k], n, gt_seed(prev, it, tag), it, st[k]);
        }
    }
    for (int k = 0; k < 2; k++) {
        GT_CUDA(cudaSetDevice(dev[k]));
        GT_CUDA(cudaStreamSynchronize(st[k]));
        gt_checker_verify(&chk[k], k == 0 ? "stream A (own GPU)" : "stream B (next GPU)");
    }
    if (t_rank == 0)
        printf("[multi_device] ok %s\n", what);
    for (int k = 0; k < 2; k++) {
        GT_CUDA(cudaSetDevice(dev[k]));
        gt_free(GT_DEVICE, sbuf[k]);
        gt_free(GT_DEVICE, rbuf[k]);
        gt_checker_free(&chk[k]);
        GT_CUDA(cudaStreamDestroy(st[k]));
    }
    GT_CUDA(cudaSetDevice(dev[0]));
    return gt_finish();
}
