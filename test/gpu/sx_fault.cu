/*
 * sx_fault.cu - a peer killed while the stream-executed path's receive steps
 * wait on the GPU (issue 16: "a killed peer (abort path)"). Run by
 * test/mpi/peer_fault.sh (PEER_FAULT_PROG=<this>, case errors-2,
 * MPIX_ACC_PEER_ERRORS=1), which keeps the killed rank's launcher slot open
 * and checks the survivor's report and its time.
 *
 * 2 ranks, rank r on GPU r (or both on one under MPS), device buffers, a
 * communicator with mpi_assert_no_any_source/_tag. Both exchange 8-byte
 * messages on it first (rings made, device rings mapped). Then rank 0
 * enqueues:
 *   - a receive from the victim (tag 15) with a stream wait on stream a:
 *     its receive step polls the device ring on the GPU; a memset behind
 *     it on the same stream must run once the step gives up;
 *   - a receive from the victim (tag 16) waited on the host (MPI_Wait: the
 *     progress thread hunts for it, a library step would copy it);
 * and tells the victim (plain MPI_Send) to raise(SIGKILL). Both receives
 * must end with the library's transport error within T_SLOW(20) s (the
 * engine writes the abort into the step's record; the step reads it and
 * ends), stream a must be released with the error in the status, and
 * MPI_Finalize must return. Rank 0 prints "[peer_fault] PASS survivor".
 */
#include "gpu_common.h"

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "sx_fault", 90);
    t_need_ranks(2);
    t_name = "peer_fault"; /* the runner's messages */
    int victim = t_size - 1;
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm sxc = t_comm_dup(1);
    cudaStream_t a, b;
    GT_CUDA(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    GT_CUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    uint64_t *sbuf, *rbuf, *r15, *r16;
    int *flag;
    GT_CUDA(cudaMalloc(&sbuf, 64));
    GT_CUDA(cudaMalloc(&rbuf, 64));
    GT_CUDA(cudaMalloc(&r15, 64));
    GT_CUDA(cudaMalloc(&r16, 64));
    GT_CUDA(cudaMalloc(&flag, sizeof(int)));
    GT_CUDA(cudaMemset(flag, 0, sizeof(int)));

    t_phase("exchange before the failure");
    if (t_rank == 0 || t_rank == victim) {
        int peer = t_rank == 0 ? victim : 0;
        for (int i = 0; i < 20; i++) {
            uint64_t v = (uint64_t)(t_rank * 1000 + i), got = 0;
            GT_CUDA(cudaMemcpy(sbuf, &v, sizeof v, cudaMemcpyHostToDevice));
            MPI_Request rq[2];
            T_MPI(MPIX_Acc_Irecv(a, rbuf, 8, MPI_BYTE, peer, 1, sxc, &rq[0]));
            T_MPI(MPIX_Acc_Isend(a, sbuf, 8, MPI_BYTE, peer, 1, sxc, &rq[1]));
            T_MPI(MPIX_Acc_Waitall(a, 2, rq, MPI_STATUSES_IGNORE));
            GT_CUDA(cudaStreamSynchronize(a));
            GT_CUDA(cudaMemcpy(&got, rbuf, sizeof got, cudaMemcpyDeviceToHost));
            T_CHECK(got == (uint64_t)(peer * 1000 + i), "exchange %d: got %llu", i,
                    (unsigned long long)got);
        }
    }
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (t_rank == victim)
        t_victim_die_on(0, 99);

    t_phase("enqueue receives from the victim");
    MPI_Request on_stream = MPI_REQUEST_NULL, on_host = MPI_REQUEST_NULL;
    MPI_Status st;
    memset(&st, 0, sizeof st);
    T_MPI(MPIX_Acc_Irecv(a, r15, 64, MPI_BYTE, victim, 15, sxc, &on_stream));
    T_MPI(MPIX_Acc_Wait(a, &on_stream, &st));
    GT_CUDA(cudaMemsetAsync(flag, 1, 1, a)); /* runs once the receive step ends */
    T_MPI(MPIX_Acc_Irecv(b, r16, 64, MPI_BYTE, victim, 16, sxc, &on_host));
    int go = 1;
    T_MPI(MPI_Send(&go, 1, MPI_INT, victim, 99, MPI_COMM_WORLD));
    double t0 = t_now();

    t_phase("the host-waited receive ends with the error");
    t_expect_transport_error(MPI_Wait(&on_host, MPI_STATUS_IGNORE),
                             "SX-bound receive from the victim (host wait)", t0, T_SLOW(20.0));
    t_phase("the stream waiting on a receive step is released");
    GT_CUDA(cudaStreamSynchronize(a));
    double dt = t_now() - t0;
    T_CHECK(dt < T_SLOW(20.0), "stream a released after %.1f s", dt);
    int f = 0;
    GT_CUDA(cudaMemcpy(&f, flag, sizeof f, cudaMemcpyDeviceToHost));
    T_CHECK(f != 0, "the work behind the receive step's stream wait did not run");
    t_expect_transport_error(st.MPI_ERROR, "SX-bound receive from the victim (stream wait)", t0,
                             T_SLOW(20.0));
    GT_CUDA(cudaStreamSynchronize(b));

    T_MPI(MPI_Comm_free(&sxc));
    t_phase("MPI_Finalize with a failed peer");
    t_finalize_timed(45);
    printf("[peer_fault] PASS survivor (peer-errors mode, %d ranks, stream-executed receives on "
           "the GPU)\n",
           t_size);
    fflush(stdout);
    fflush(stderr);
    return 0;
}
