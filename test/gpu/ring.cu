/*
 * ring.cu - the GPU data path: kernel writes -> MPIX_Acc_Isend on the same
 * stream -> peer MPIX_Acc_Irecv -> MPIX_Acc_Wait(all) -> kernel checks,
 * looped with buffer reuse and no host synchronization inside the loop.
 *
 * Ring of all ranks (send to rank+1, receive from rank-1). For each memory
 * combination (send buffer kind -> receive buffer kind) and each size from
 * 1 B to 64 MiB, every iteration enqueues on one stream:
 *     fill(sbuf, pattern(rank, it)) ; Irecv(rbuf) ; Isend(sbuf) ;
 *     Waitall (even it) or two Waits in reverse order (odd it) ;
 *     check(rbuf, pattern(prev, it))
 * and the host synchronizes the stream only after the last iteration. A
 * send that reads its buffer before the fill finished, a receive that writes
 * before the previous check finished, or a wait released too early shows up
 * as a mismatch (neighbouring iterations use different patterns).
 *
 * Options: --combos=dd,dh,hd,mm,pd,dp  (d device, h pinned host, p pageable
 *          host, m managed; first letter: send buffer, second: receive)
 *          --scale=F      multiply the iteration counts (default 1; >= 1 it.)
 *          --max-size=N   largest message (default 64 MiB)
 *          --timeout=S
 * Default iterations: 1000 per size for dd/dh/hd/mm (64 MiB: 1000 for dd, 100
 * for the others); 100 for pageable combinations (64 MiB: 2), since their
 * fill/check run on the host.
 */
#include "gpu_common.h"

struct combo_t {
    const char *name;
    gt_mem_t s, r;
    long iters, big_iters;
};

static const combo_t combos[] = {
    {"dd", GT_DEVICE, GT_DEVICE, 1000, 1000}, {"dh", GT_DEVICE, GT_PINNED, 1000, 100},
    {"hd", GT_PINNED, GT_DEVICE, 1000, 100},  {"mm", GT_MANAGED, GT_MANAGED, 1000, 100},
    {"pd", GT_PAGEABLE, GT_DEVICE, 100, 2},   {"dp", GT_DEVICE, GT_PAGEABLE, 100, 2},
};

static const size_t sizes[] = {1, 8, 8192, 8193, 65536, 1 << 20, 64 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "ring", 300);
    gt_need_ranks(2);
    gt_warmup();
    const char *sel = gt_opt("--combos", "dd,dh,hd,mm,pd,dp");
    double scale = atof(gt_opt("--scale", "1"));
    size_t max_size = (size_t)gt_opt_long("--max-size", 64 << 20);
    int next = (gt_rank + 1) % gt_size, prev = (gt_rank - 1 + gt_size) % gt_size;

    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);

    for (size_t ci = 0; ci < sizeof combos / sizeof combos[0]; ci++) {
        const combo_t *c = &combos[ci];
        if (strstr(sel, c->name) == NULL)
            continue;
        size_t maxn = 0;
        for (size_t si = 0; si < NSIZES; si++)
            if (sizes[si] <= max_size && sizes[si] > maxn)
                maxn = sizes[si];
        void *sbuf = gt_alloc(c->s, maxn), *rbuf = gt_alloc(c->r, maxn);
        for (size_t si = 0; si < NSIZES; si++) {
            size_t n = sizes[si];
            if (n > max_size)
                continue;
            long iters = (long)((double)(n > (1 << 20) ? c->big_iters : c->iters) * scale);
            if (iters < 1)
                iters = 1;
            int tag = (int)(ci * 100 + si);
            char what[160];
            snprintf(what, sizeof what, "%s (%s -> %s) size %zu x %ld iterations", c->name,
                     gt_mem_name[c->s], gt_mem_name[c->r], n, iters);
            gt_phase(what);
            double t0 = gt_now();
            for (long it = 0; it < iters; it++) {
                MPI_Request req[2];
                gt_fill(c->s, sbuf, n, gt_seed(gt_rank, it, tag), s);
                GT_MPI(
                    MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, tag, MPI_COMM_WORLD, &req[0]));
                GT_MPI(
                    MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, tag, MPI_COMM_WORLD, &req[1]));
                if (it % 2 == 0) {
                    GT_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
                } else {
                    GT_MPI(MPIX_Acc_Wait(s, &req[1], MPI_STATUS_IGNORE));
                    GT_MPI(MPIX_Acc_Wait(s, &req[0], MPI_STATUS_IGNORE));
                }
                GT_CHECK(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
                         "stream wait did not set the handles to MPI_REQUEST_NULL");
                gt_check(&chk, c->r, rbuf, n, gt_seed(prev, it, tag), it, s);
            }
            double t_enq = gt_now() - t0;
            GT_CUDA(cudaStreamSynchronize(s));
            double t_all = gt_now() - t0;
            gt_checker_verify(&chk, what);
            gt_hostfn_reset();
            if (gt_rank == 0) {
                printf("[ring] ok %-2s %8s -> %-8s %9zu B x %5ld: %8.1f us/iter (enqueue %.2f "
                       "us/iter)\n",
                       c->name, gt_mem_name[c->s], gt_mem_name[c->r], n, iters,
                       1e6 * t_all / (double)iters, 1e6 * t_enq / (double)iters);
                fflush(stdout);
            }
        }
        gt_free(c->s, sbuf);
        gt_free(c->r, rbuf);
    }
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    return gt_finish();
}
