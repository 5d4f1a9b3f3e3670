/*
 * nvshmem_pingpong.cu - the NVSHMEM anchor of issue 19 (not part of the
 * build: scripts/gpu-test.sh compiles it on a GPU machine against the
 * NVSHMEM found there, with relocatable device code, and runs it beside
 * mpixacc_bench's `ki`). Two processes, one GPU each; NVSHMEM bootstrapped
 * by a unique id broadcast over MPI; no remote transport
 * (NVSHMEM_REMOTE_TRANSPORT=none: a second libucp must not load).
 *
 *   device     ONE kernel per rank runs every round trip: rank 0
 *              nvshmem_putmem_signal_nbi(n bytes + signal) to rank 1 and
 *              nvshmem_signal_wait_until for the answer; rank 1 waits, then
 *              puts the message back (what `ki` does with partitions); one
 *              thread
 *   device-group  the same with the warp (up to 1 KiB) or block (512
 *              threads) forms nvshmemx_putmem_signal_nbi_warp/_block, the
 *              groups `ki` uses
 *   on-stream  the same from the host, per message:
 *              nvshmemx_putmem_signal_on_stream / nvshmemx_signal_wait_until_on_stream
 *
 * Half-RTT = GPU time of rank 0's stream / (2 x iterations), median of 7
 * repetitions; the last answer is checked. Prints one line per (variant,
 * size) and "RESULT: OK".
 */
#include <mpi.h>
#include <nvshmem.h>
#include <nvshmemx.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "nvshmem_pingpong: %s: %s\n", #call, cudaGetErrorString(e_));          \
            MPI_Abort(MPI_COMM_WORLD, 2);                                                          \
        }                                                                                          \
    } while (0)

/* group: 0 one thread, 1 a warp (32 threads), 2 a block -- as the ki
 * variant uses a warp up to 1 KiB and a block of 512 threads above */
template <int G>
__global__ void pp_device(char *rbuf, const char *sbuf, size_t n, uint64_t *sig, int me, int peer,
                          int iters, uint64_t base)
{
    for (int i = 0; i < iters; i++) {
        uint64_t v = base + (uint64_t)i + 1;
        if (me == 1) {
            if (threadIdx.x == 0)
                nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
            if (G == 2)
                __syncthreads();
            else if (G == 1)
                __syncwarp();
        }
        const char *src = me == 0 ? sbuf : rbuf;
        if (G == 2)
            nvshmemx_putmem_signal_nbi_block(rbuf, src, n, sig, v, NVSHMEM_SIGNAL_SET, peer);
        else if (G == 1)
            nvshmemx_putmem_signal_nbi_warp(rbuf, src, n, sig, v, NVSHMEM_SIGNAL_SET, peer);
        else
            nvshmem_putmem_signal_nbi(rbuf, src, n, sig, v, NVSHMEM_SIGNAL_SET, peer);
        if (me == 0) {
            if (threadIdx.x == 0)
                nvshmem_signal_wait_until(sig, NVSHMEM_CMP_GE, v);
            if (G == 2)
                __syncthreads();
            else if (G == 1)
                __syncwarp();
        }
    }
    if (threadIdx.x == 0)
        nvshmem_quiet();
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "nvshmem_pingpong: run with 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));

    nvshmemx_uniqueid_t id = NVSHMEMX_UNIQUEID_INITIALIZER;
    if (rank == 0)
        nvshmemx_get_uniqueid(&id);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
    nvshmemx_set_attr_uniqueid_args(rank, size, &id, &attr);
    if (nvshmemx_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0) {
        fprintf(stderr, "nvshmem_pingpong: nvshmemx_init_attr failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int me = nvshmem_my_pe(), peer = 1 - me;
    const size_t sizes[] = {8, 64, 512, 4096, 65536};
    const size_t maxn = 65536;
    char *sbuf = (char *)nvshmem_malloc(maxn), *rbuf = (char *)nvshmem_malloc(maxn);
    uint64_t *sig = (uint64_t *)nvshmem_calloc(1, sizeof(uint64_t));
    if (!sbuf || !rbuf || !sig) {
        fprintf(stderr, "nvshmem_pingpong: nvshmem_malloc failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<char> pat(maxn), back(maxn);
    for (size_t i = 0; i < maxn; i++)
        pat[i] = (char)(i * 7 + 3);
    CK(cudaMemcpy(sbuf, pat.data(), maxn, cudaMemcpyHostToDevice));
    uint64_t base = 0;
    int failures = 0;
    if (rank == 0)
        printf("# nvshmem_pingpong: NVSHMEM %d.%d, 2 PEs; half-RTT us (GPU time), median of 7 x "
               "iterations\n# variant      size        us     min     max   iters  check\n",
               NVSHMEM_VENDOR_MAJOR_VERSION, NVSHMEM_VENDOR_MINOR_VERSION);
    for (int variant = 0; variant < 3; variant++) {
        for (size_t n : sizes) {
            const int iters = variant < 2 ? 1000 : 200;
            std::vector<double> t;
            for (int rep = 0; rep < 8; rep++) {
                CK(cudaMemset(rbuf, 0, n));
                CK(cudaDeviceSynchronize());
                nvshmem_barrier_all();
                CK(cudaEventRecord(e0, s));
                if (variant == 0) {
                    pp_device<0><<<1, 1, 0, s>>>(rbuf, sbuf, n, sig, me, peer, iters, base);
                } else if (variant == 1) {
                    if (n <= 1024)
                        pp_device<1><<<1, 32, 0, s>>>(rbuf, sbuf, n, sig, me, peer, iters, base);
                    else
                        pp_device<2><<<1, 512, 0, s>>>(rbuf, sbuf, n, sig, me, peer, iters, base);
                } else {
                    for (int i = 0; i < iters; i++) {
                        uint64_t v = base + (uint64_t)i + 1;
                        if (me == 0) {
                            nvshmemx_putmem_signal_on_stream(rbuf, sbuf, n, sig, v,
                                                             NVSHMEM_SIGNAL_SET, peer, s);
                            nvshmemx_signal_wait_until_on_stream(sig, NVSHMEM_CMP_GE, v, s);
                        } else {
                            nvshmemx_signal_wait_until_on_stream(sig, NVSHMEM_CMP_GE, v, s);
                            nvshmemx_putmem_signal_on_stream(rbuf, rbuf, n, sig, v,
                                                             NVSHMEM_SIGNAL_SET, peer, s);
                        }
                    }
                }
                CK(cudaEventRecord(e1, s));
                CK(cudaStreamSynchronize(s));
                CK(cudaGetLastError());
                base += (uint64_t)iters;
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                if (rep > 0)
                    t.push_back(ms * 1000.0 / (2.0 * iters));
            }
            int bad = 0;
            if (rank == 0) {
                CK(cudaMemcpy(back.data(), rbuf, n, cudaMemcpyDeviceToHost));
                bad = memcmp(back.data(), pat.data(), n) != 0;
            }
            MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
            failures += bad;
            std::sort(t.begin(), t.end());
            if (rank == 0)
                printf("%-12s %6zu  %8.2f %7.2f %7.2f %7d  %s\n",
                       variant == 0   ? "device"
                       : variant == 1 ? "device-group"
                                      : "on-stream",
                       n, t[t.size() / 2], t.front(), t.back(), iters, bad ? "FAIL" : "ok");
            fflush(stdout);
        }
    }
    nvshmem_barrier_all();
    nvshmem_free(sbuf);
    nvshmem_free(rbuf);
    nvshmem_free(sig);
    nvshmem_finalize();
    if (rank == 0)
        printf("RESULT: %s\n", failures ? "FAIL" : "OK");
    MPI_Finalize();
    return failures ? 1 : 0;
}
