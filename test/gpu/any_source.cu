/*
 * any_source.cu - MPI_ANY_SOURCE / MPI_ANY_TAG receives on a CUDA stream,
 * with statuses that the GPU reads after the stream wait.
 *
 * Every rank sends one message per iteration to every other rank (tag = the
 * iteration, data = pattern(sender, iteration)) and posts size-1 receives
 * with MPI_ANY_SOURCE and MPI_ANY_TAG; MPIX_Acc_Waitall(stream, ..., statuses)
 * with the statuses in pinned host memory. A kernel enqueued after the wait
 * reads each receive's MPI_SOURCE / MPI_TAG from its status and checks the
 * received data against pattern(MPI_SOURCE, MPI_TAG): this proves that the
 * statuses are written before the stream passes the wait (MPIX_Acc_Wait(3)). After
 * the loop the host checks that every (source, iteration) arrived exactly
 * once. No host synchronization inside the loop.
 *
 * Options: --scale=F, --timeout=S
 */
#include "gpu_common.h"

__global__ static void status_check_kernel(const uint8_t *buf, size_t n, const MPI_Status *st,
                                           int self, int nranks, long iters, gt_err_t *err)
{
    const volatile MPI_Status *vs = st;
    int src = vs->MPI_SOURCE, tag = vs->MPI_TAG;
    if (src < 0 || src >= nranks || src == self || tag < 0 || tag >= iters) {
        if (threadIdx.x == 0 && blockIdx.x == 0) {
            atomicAdd(&err->count, 1ull);
            if (atomicCAS(&err->recorded, 0u, 1u) == 0u) {
                err->first_idx = (unsigned long long)-1; /* marks a bad status */
                err->first_iter = tag;
                err->expected = (unsigned)self;
                err->got = (unsigned)src;
            }
        }
        return;
    }
    uint64_t seed = gt_seed(src, tag, 9);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint8_t e = gt_pat(seed, i), g = buf[i];
        if (e != g) {
            atomicAdd(&err->count, 1ull);
            if (atomicCAS(&err->recorded, 0u, 1u) == 0u) {
                err->first_idx = i;
                err->first_iter = tag;
                err->expected = e;
                err->got = g;
            }
        }
    }
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "any_source", 300);
    gt_need_ranks(2);
    gt_warmup();
    {
        gt_err_t *e;
        MPI_Status *st;
        GT_CUDA(cudaMalloc(&e, sizeof(*e)));
        GT_CUDA(cudaMallocHost(&st, sizeof(*st)));
        st->MPI_SOURCE = 1;
        st->MPI_TAG = 0;
        status_check_kernel<<<1, 32>>>((const uint8_t *)e, 0, st, 0, 2, 1, e);
        GT_CUDA(cudaDeviceSynchronize());
        GT_CUDA(cudaFree(e));
        GT_CUDA(cudaFreeHost(st));
    }
    double scale = atof(gt_opt("--scale", "1"));
    int peers = gt_size - 1;

    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    gt_checker_t chk;
    gt_checker_init(&chk);
    static const size_t sizes[] = {4096, 65536};
    for (size_t si = 0; si < 2; si++) {
        size_t n = sizes[si];
        long iters = (long)(500 * scale);
        if (iters < 1)
            iters = 1;
        char what[128];
        snprintf(what, sizeof what, "any-source size %zu x %ld", n, iters);
        gt_phase(what);
        uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);
        uint8_t *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, n * (size_t)peers);
        MPI_Status *st;
        size_t nst = (size_t)iters * (size_t)(2 * peers);
        GT_CUDA(cudaMallocHost(&st, nst * sizeof(MPI_Status)));
        memset(st, 0xff, nst * sizeof(MPI_Status));
        MPI_Request *req = (MPI_Request *)malloc(sizeof(MPI_Request) * 2 * (size_t)peers);
        for (long it = 0; it < iters; it++) {
            MPI_Status *ist = st + (size_t)it * (size_t)(2 * peers);
            gt_fill(GT_DEVICE, sbuf, n, gt_seed(gt_rank, it, 9), s);
            for (int j = 0; j < peers; j++)
                GT_MPI(MPIX_Acc_Irecv(s, rbuf + (size_t)j * n, (int)n, MPI_BYTE, MPI_ANY_SOURCE,
                                      MPI_ANY_TAG, MPI_COMM_WORLD, &req[j]));
            for (int j = 0, k = 0; j < gt_size; j++)
                if (j != gt_rank)
                    GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, j, (int)it, MPI_COMM_WORLD,
                                          &req[peers + k++]));
            GT_MPI(MPIX_Acc_Waitall(s, 2 * peers, req, ist));
            for (int j = 0; j < peers; j++) {
                status_check_kernel<<<gt_blocks(n), 256, 0, s>>>(rbuf + (size_t)j * n, n, &ist[j],
                                                                 gt_rank, gt_size, iters, chk.dev);
                GT_CUDA(cudaGetLastError());
            }
        }
        GT_CUDA(cudaStreamSynchronize(s));
        gt_checker_verify(&chk, what);
        /* every (source, iteration) exactly once */
        char *seen = (char *)calloc((size_t)gt_size * (size_t)iters, 1);
        for (long it = 0; it < iters; it++) {
            for (int j = 0; j < peers; j++) {
                const MPI_Status *x = &st[(size_t)it * (size_t)(2 * peers) + (size_t)j];
                GT_CHECK(x->MPI_SOURCE >= 0 && x->MPI_SOURCE < gt_size && x->MPI_TAG >= 0 &&
                             x->MPI_TAG < iters,
                         "%s: iteration %ld receive %d: bad status (%s)", what, it, j,
                         gt_status_str(x));
                GT_CHECK(x->MPI_ERROR == MPI_SUCCESS, "%s: receive status error %d", what,
                         x->MPI_ERROR);
                int cnt = -1;
                MPI_Get_count(x, MPI_BYTE, &cnt);
                GT_CHECK(cnt == (int)n, "%s: status count %d, expected %zu", what, cnt, n);
                char *p = &seen[(size_t)x->MPI_SOURCE * (size_t)iters + (size_t)x->MPI_TAG];
                GT_CHECK(*p == 0, "%s: message (source %d, tag %d) received twice", what,
                         x->MPI_SOURCE, x->MPI_TAG);
                *p = 1;
            }
        }
        for (int r = 0; r < gt_size; r++)
            for (long it = 0; it < iters; it++)
                GT_CHECK(r == gt_rank || seen[(size_t)r * (size_t)iters + (size_t)it],
                         "%s: message (source %d, tag %ld) never received", what, r, it);
        free(seen);
        free(req);
        GT_CUDA(cudaFreeHost(st));
        gt_free(GT_DEVICE, sbuf);
        gt_free(GT_DEVICE, rbuf);
        if (gt_rank == 0)
            printf("[any_source] ok %s\n", what);
    }
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    return gt_finish();
}
