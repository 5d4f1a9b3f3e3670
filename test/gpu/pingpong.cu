/*
 * pingpong.cu - first stream-ordered point-to-point measurements (a
 * benchmark program, not a timed test: it never fails on a number, only on
 * wrong data or an MPI/CUDA error). Ranks 0 and 1; other ranks idle.
 *
 * Latency: rank 0 enqueues N round trips ahead on one stream
 *   (Isend ; Irecv ; Waitall) x N, rank 1 (Irecv ; Wait ; Isend ; Wait) x N
 *   sending back the buffer it received; half-RTT = GPU time between two
 *   events on rank 0's stream / (2 N). Repeated R times after a warm-up;
 *   median / min / max printed. The echoed data is checked after every
 *   repetition (pattern changes per repetition).
 * Bandwidth: rank 0 enqueues W sends of S bytes then waits for a 1-byte ack
 *   from rank 1 (which posted W receives and a Waitall), K times per
 *   repetition; GB/s = W*K*S / GPU time on rank 0's stream. Data of the
 *   last window is checked.
 * Reference: the same 8 B ping-pong staged through the host (cudaMemcpy +
 *   plain MPI_Send/MPI_Recv + cudaStreamSynchronize), in the same run.
 * Host cost: median host time of one MPIX_Acc_Isend / Irecv / Waitall call
 *   in the first 32 iterations of the latency loop (before the stream is
 *   MPIX_ACC_STREAM_DEPTH points ahead and calls wait for the GPU).
 *
 * Options: --lat-sizes=8,65536,1048576  --bw-size=67108864  --iters=1000
 *          --reps=7  --window=8  --bw-iters=10  --timeout=S
 */
#include "gpu_common.h"

#include <algorithm>
#include <vector>

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

static double vmin(const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); }
static double vmax(const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); }

static std::vector<size_t> parse_sizes(const char *s)
{
    std::vector<size_t> v;
    while (s && *s) {
        char *end;
        unsigned long long x = strtoull(s, &end, 0);
        if (end == s)
            break;
        v.push_back((size_t)x);
        s = *end == ',' ? end + 1 : end;
    }
    return v;
}

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "pingpong", 300);
    gt_need_ranks(2);
    gt_warmup();
    std::vector<size_t> lat_sizes = parse_sizes(gt_opt("--lat-sizes", "8,65536,1048576"));
    size_t bw_size = (size_t)gt_opt_long("--bw-size", 64 << 20);
    long iters = gt_opt_long("--iters", 1000);
    int reps = (int)gt_opt_long("--reps", 7);
    int window = (int)gt_opt_long("--window", 8);
    int bw_iters = (int)gt_opt_long("--bw-iters", 10);
    int me = gt_rank, peer = 1 - gt_rank;
    bool active = gt_rank < 2;

    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    GT_CUDA(cudaEventCreate(&e0));
    GT_CUDA(cudaEventCreate(&e1));
    gt_checker_t chk;
    gt_checker_init(&chk);
    size_t maxn = bw_size;
    for (size_t x : lat_sizes)
        maxn = std::max(maxn, x);
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, maxn);
    uint8_t *rbuf = (uint8_t *)gt_alloc(
        GT_DEVICE, (size_t)window * bw_size > maxn ? (size_t)window * bw_size : maxn);
    uint8_t *ack = (uint8_t *)gt_alloc(GT_DEVICE, 1);
    std::vector<double> host_call_ns;

    if (gt_rank == 0) {
        printf("[pingpong] stream-ordered, device buffers, GPU %d <-> peer; N=%ld round trips x "
               "%d repetitions (median/min/max)\n",
               gt_dev, iters, reps);
        printf("%-12s %-34s %s\n", "size", "half-RTT us (med / min / max)", "note");
        fflush(stdout);
    }

    /* ---- latency ---- */
    for (size_t li = 0; li < lat_sizes.size(); li++) {
        size_t n = lat_sizes[li];
        char what[64];
        snprintf(what, sizeof what, "latency %zu B", n);
        gt_phase(what);
        std::vector<double> half;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
            int tag = 1000 + (int)li;
            uint64_t seed = gt_seed(0, r + 10, tag);
            GT_MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (!active)
                continue;
            if (me == 0) {
                gt_fill(GT_DEVICE, sbuf, n, seed, s);
                GT_CUDA(cudaEventRecord(e0, s));
                for (long i = 0; i < iters; i++) {
                    MPI_Request req[2];
                    double t0 = gt_now();
                    GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                                          &req[0]));
                    double t1 = gt_now();
                    GT_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD,
                                          &req[1]));
                    double t2 = gt_now();
                    GT_MPI(MPIX_Acc_Waitall(s, 2, req, MPI_STATUSES_IGNORE));
                    double t3 = gt_now();
                    /* the first 32 iterations (96 stream points): later ones
                     * wait for the GPU once MPIX_ACC_STREAM_DEPTH (128) points
                     * are ahead, and would time the GPU, not the call */
                    if (r >= 0 && i < 32) {
                        host_call_ns.push_back(1e9 * (t1 - t0));
                        host_call_ns.push_back(1e9 * (t2 - t1));
                        host_call_ns.push_back(1e9 * (t3 - t2));
                    }
                }
                GT_CUDA(cudaEventRecord(e1, s));
                gt_check(&chk, GT_DEVICE, rbuf, n, seed, r, s);
                GT_CUDA(cudaStreamSynchronize(s));
                gt_checker_verify(&chk, what);
                float ms = 0;
                GT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
                if (r >= 0)
                    half.push_back(1e3 * (double)ms / (2.0 * (double)iters));
            } else {
                for (long i = 0; i < iters; i++) {
                    MPI_Request rq, sq;
                    GT_MPI(
                        MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &rq));
                    GT_MPI(MPIX_Acc_Wait(s, &rq, MPI_STATUS_IGNORE));
                    GT_MPI(
                        MPIX_Acc_Isend(s, rbuf, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &sq));
                    GT_MPI(MPIX_Acc_Wait(s, &sq, MPI_STATUS_IGNORE));
                }
                gt_check(&chk, GT_DEVICE, rbuf, n, seed, r, s);
                GT_CUDA(cudaStreamSynchronize(s));
                gt_checker_verify(&chk, what);
            }
        }
        if (me == 0) {
            printf("%-12zu %8.2f / %8.2f / %8.2f          stream-ordered MPIX_Acc\n", n,
                   median(half), vmin(half), vmax(half));
            fflush(stdout);
        }
    }

    /* ---- reference: 8 B staged through the host ---- */
    {
        gt_phase("staged reference 8 B");
        const size_t n = 8;
        std::vector<double> half;
        uint8_t hb[8];
        for (int r = -1; r < reps; r++) {
            GT_MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (!active)
                continue;
            long it2 = iters / 2 > 0 ? iters / 2 : 1;
            uint64_t seed = gt_seed(0, r + 100, 7);
            if (me == 0)
                gt_fill(GT_DEVICE, sbuf, n, seed, s);
            GT_CUDA(cudaStreamSynchronize(s));
            double t0 = gt_now();
            for (long i = 0; i < it2; i++) {
                if (me == 0) {
                    GT_CUDA(cudaMemcpyAsync(hb, sbuf, n, cudaMemcpyDeviceToHost, s));
                    GT_CUDA(cudaStreamSynchronize(s));
                    GT_MPI(MPI_Send(hb, (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD));
                    GT_MPI(
                        MPI_Recv(hb, (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                    GT_CUDA(cudaMemcpyAsync(rbuf, hb, n, cudaMemcpyHostToDevice, s));
                    GT_CUDA(cudaStreamSynchronize(s));
                } else {
                    GT_MPI(
                        MPI_Recv(hb, (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                    GT_CUDA(cudaMemcpyAsync(rbuf, hb, n, cudaMemcpyHostToDevice, s));
                    GT_CUDA(cudaStreamSynchronize(s));
                    GT_CUDA(cudaMemcpyAsync(hb, rbuf, n, cudaMemcpyDeviceToHost, s));
                    GT_CUDA(cudaStreamSynchronize(s));
                    GT_MPI(MPI_Send(hb, (int)n, MPI_BYTE, peer, 7, MPI_COMM_WORLD));
                }
            }
            double dt = gt_now() - t0;
            if (me == 0) {
                gt_check(&chk, GT_DEVICE, rbuf, n, seed, r, s);
                GT_CUDA(cudaStreamSynchronize(s));
                gt_checker_verify(&chk, "staged reference");
                if (r >= 0)
                    half.push_back(1e6 * dt / (2.0 * (double)it2));
            }
        }
        if (me == 0) {
            printf("%-12d %8.2f / %8.2f / %8.2f          reference: staged via host + MPI + "
                   "cudaStreamSynchronize (host clock)\n",
                   8, median(half), vmin(half), vmax(half));
            fflush(stdout);
        }
    }

    /* ---- bandwidth ---- */
    if (bw_size > 0) {
        char what[64];
        snprintf(what, sizeof what, "bandwidth %zu B", bw_size);
        gt_phase(what);
        std::vector<double> gbs;
        for (int r = -1; r < reps; r++) {
            int tag = 2000;
            uint64_t seed = gt_seed(0, r + 50, tag);
            GT_MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (!active)
                continue;
            std::vector<MPI_Request> req((size_t)window);
            if (me == 0) {
                gt_fill(GT_DEVICE, sbuf, bw_size, seed, s);
                GT_CUDA(cudaEventRecord(e0, s));
                for (int k = 0; k < bw_iters; k++) {
                    for (int w = 0; w < window; w++)
                        GT_MPI(MPIX_Acc_Isend(s, sbuf, (int)bw_size, MPI_BYTE, peer, tag,
                                              MPI_COMM_WORLD, &req[(size_t)w]));
                    MPI_Request ar;
                    GT_MPI(MPIX_Acc_Irecv(s, ack, 1, MPI_BYTE, peer, tag + 1, MPI_COMM_WORLD, &ar));
                    GT_MPI(MPIX_Acc_Waitall(s, window, req.data(), MPI_STATUSES_IGNORE));
                    GT_MPI(MPIX_Acc_Wait(s, &ar, MPI_STATUS_IGNORE));
                }
                GT_CUDA(cudaEventRecord(e1, s));
                GT_CUDA(cudaStreamSynchronize(s));
                float ms = 0;
                GT_CUDA(cudaEventElapsedTime(&ms, e0, e1));
                if (r >= 0)
                    gbs.push_back((double)bw_size * window * bw_iters / (1e-3 * (double)ms) / 1e9);
            } else {
                for (int k = 0; k < bw_iters; k++) {
                    for (int w = 0; w < window; w++)
                        GT_MPI(MPIX_Acc_Irecv(s, rbuf + (size_t)w * bw_size, (int)bw_size, MPI_BYTE,
                                              peer, tag, MPI_COMM_WORLD, &req[(size_t)w]));
                    GT_MPI(MPIX_Acc_Waitall(s, window, req.data(), MPI_STATUSES_IGNORE));
                    MPI_Request ar;
                    GT_MPI(MPIX_Acc_Isend(s, ack, 1, MPI_BYTE, peer, tag + 1, MPI_COMM_WORLD, &ar));
                    GT_MPI(MPIX_Acc_Wait(s, &ar, MPI_STATUS_IGNORE));
                }
                for (int w = 0; w < window; w++)
                    gt_check(&chk, GT_DEVICE, rbuf + (size_t)w * bw_size, bw_size, seed, r, s);
                GT_CUDA(cudaStreamSynchronize(s));
                gt_checker_verify(&chk, what);
            }
        }
        if (me == 0) {
            printf("%-12zu %8.1f / %8.1f / %8.1f GB/s     stream-ordered MPIX_Acc, window %d "
                   "(GPU time incl. 1-byte ack per window)\n",
                   bw_size, median(gbs), vmin(gbs), vmax(gbs), window);
            fflush(stdout);
        }
    }

    if (me == 0 && !host_call_ns.empty()) {
        printf("host time per MPIX_Acc_Isend/Irecv/Waitall call: median %.2f us, min %.2f us "
               "(%zu calls, first 32 iterations of each repetition)\n",
               median(host_call_ns) / 1e3, vmin(host_call_ns) / 1e3, host_call_ns.size());
        fflush(stdout);
    }

    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_free(GT_DEVICE, ack);
    gt_checker_free(&chk);
    GT_CUDA(cudaEventDestroy(e0));
    GT_CUDA(cudaEventDestroy(e1));
    GT_CUDA(cudaStreamDestroy(s));
    return gt_finish();
}
