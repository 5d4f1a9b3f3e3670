/*
 * capture.cu - the stream-ordered calls that cannot be captured into a CUDA
 * graph refuse the capture (mpix_acc(3), CUDA graphs; issue 21).
 *
 * Sends and receives of contiguous data and stream waits on their requests
 * replay (test/gpu/graph_p2p), as do the stream-ordered collectives whose
 * set-up exists (graph_p2p phase K) and partitioned requests on the direct
 * protocol (test/gpu/partitioned phase H). Every other stream-ordered call
 * on a stream that is being captured returns an error and invalidates the
 * capture, so the application's cudaStreamEndCapture fails and no graph
 * exists -- never a graph that would replay wrongly.
 *
 * For each capture mode (global, thread-local, relaxed) and each kind of
 * call (MPIX_Acc_Isend of a vector datatype never used outside a capture --
 * its chunk list and packed buffer would be set up inside it --,
 * MPIX_Acc_Allreduce on a stream
 * without the scratch it needs -- set-up inside a capture is refused --,
 * MPIX_Acc_Wait on a request made before the capture, MPI_Allreduce (no
 * scratch either) and an MPI_Send of a vector datatype on a stream
 * communicator, and an
 * MPI_Allreduce the stream-ordered code does not take -- MPI_BAND, which
 * would run as the MPI library's call: it must not run now):
 *   - the call returns an error of class MPI_ERR_UNSUPPORTED_OPERATION
 *     (the wait on an earlier request: MPI_ERR_REQUEST);
 *   - cudaStreamEndCapture reports an error and no graph;
 *   - the stream, the library and the matching are unharmed: a ring
 *     exchange on the same stream right after moves the right bytes (a
 *     refused call consumed no sequence number), and the request made
 *     before the capture completes.
 * Then, for each mode, a ring exchange on the stream while another stream
 * is being captured: the capture must succeed and its graph replay.
 *
 * Options: --timeout=S
 */
#include "gpu_common.h"

int main(int argc, char **argv)
{
    gt_init(&argc, &argv, "capture", 120);
    t_need_ranks(2);
    gt_warmup();
    int next = (t_rank + 1) % t_size, prev = (t_rank - 1 + t_size) % t_size;
    cudaStream_t s;
    GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    MPI_Comm sc = gt_stream_comm(s);
    T_MPI(MPI_Comm_set_errhandler(sc, MPI_ERRORS_RETURN));
    /* MPIX_Acc_Wait raises on MPI_COMM_SELF (it has no communicator) */
    T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    gt_checker_t chk;
    gt_checker_init(&chk);
    const size_t n = 4096;
    uint8_t *sbuf = (uint8_t *)gt_alloc(GT_DEVICE, n), *rbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);
    double *red = (double *)gt_alloc(GT_DEVICE, sizeof(double));
    const cudaStreamCaptureMode modes[3] = {cudaStreamCaptureModeGlobal,
                                            cudaStreamCaptureModeThreadLocal,
                                            cudaStreamCaptureModeRelaxed};
    const char *mname[3] = {"global", "thread-local", "relaxed"};
    const char *cname[6] = {"MPIX_Acc_Isend of a vector datatype",
                            "MPIX_Acc_Allreduce without its scratch",
                            "MPIX_Acc_Wait on a request made before",
                            "MPI_Allreduce on a stream communicator without its scratch",
                            "MPI_Send of a vector datatype on a stream communicator",
                            "an MPI_BAND Allreduce on a stream communicator"};
    const int cclass[6] = {MPI_ERR_UNSUPPORTED_OPERATION,
                           MPI_ERR_UNSUPPORTED_OPERATION,
                           MPI_ERR_REQUEST,
                           MPI_ERR_UNSUPPORTED_OPERATION,
                           MPI_ERR_UNSUPPORTED_OPERATION,
                           MPI_ERR_UNSUPPORTED_OPERATION};
    MPI_Datatype vec; /* 16 blocks of 64 bytes, stride 128: 1984 bytes of extent */
    T_MPI(MPI_Type_vector(16, 64, 128, MPI_BYTE, &vec));
    T_MPI(MPI_Type_commit(&vec));
    int band = 0x5a; /* host memory: if it ran anyway, it would run cleanly */
    long it = 0;
    char what[160];
    for (int m = 0; m < 3; m++)
        for (int c = 0; c < 6; c++, it++) {
            snprintf(what, sizeof what, "%s while capturing (%s mode)", cname[c], mname[m]);
            t_phase(what);
            /* a request made before the capture, for MPIX_Acc_Wait */
            MPI_Request before = MPI_REQUEST_NULL, mine = MPI_REQUEST_NULL;
            int btag = 500 + (int)it;
            if (c == 2) {
                gt_fill(GT_DEVICE, sbuf, n, gt_seed(t_rank, it, btag), s);
                T_MPI(
                    MPIX_Acc_Isend(s, sbuf, (int)n, MPI_BYTE, next, btag, MPI_COMM_WORLD, &before));
            }
            GT_CUDA(cudaStreamBeginCapture(s, modes[m]));
            int rc = MPI_SUCCESS;
            switch (c) {
            case 0:
                rc = MPIX_Acc_Isend(s, sbuf, 1, vec, next, 900, MPI_COMM_WORLD, &mine);
                break;
            case 1:
                rc = MPIX_Acc_Allreduce(s, MPI_IN_PLACE, red, 1, MPI_DOUBLE, MPI_SUM,
                                        MPI_COMM_WORLD);
                break;
            case 2:
                rc = MPIX_Acc_Wait(s, &before, MPI_STATUS_IGNORE);
                break;
            case 3:
                rc = MPI_Allreduce(MPI_IN_PLACE, red, 1, MPI_DOUBLE, MPI_SUM, sc);
                break;
            case 4:
                rc = MPI_Send(sbuf, 1, vec, next, 900, sc);
                break;
            default:
                rc = MPI_Allreduce(MPI_IN_PLACE, &band, 1, MPI_INT, MPI_BAND, sc);
                break;
            }
            cudaGraph_t g = NULL;
            cudaError_t ce = cudaStreamEndCapture(s, &g);
            (void)cudaGetLastError(); /* the capture's error is the expected one */
            T_CHECK(t_err_class(rc) == cclass[c], "%s: returned %d (class %d), expected class %d",
                    what, rc, t_err_class(rc), cclass[c]);
            T_CHECK(mine == MPI_REQUEST_NULL, "%s: a request was made", what);
            T_CHECK(band == 0x5a, "%s: the MPI library's Allreduce ran during the capture", what);
            T_CHECK(ce != cudaSuccess && g == NULL,
                    "%s: cudaStreamEndCapture returned %s and %s graph: the capture was not "
                    "invalidated",
                    what, cudaGetErrorName(ce), g ? "a" : "no");
            if (g)
                GT_CUDA(cudaGraphDestroy(g));
            if (c == 2) { /* the receive of the earlier send, and its completion */
                MPI_Request r;
                T_MPI(MPIX_Acc_Irecv(s, rbuf, (int)n, MPI_BYTE, prev, btag, MPI_COMM_WORLD, &r));
                T_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
                T_MPI(MPI_Wait(&before, MPI_STATUS_IGNORE));
                gt_check(&chk, GT_DEVICE, rbuf, n, gt_seed(prev, it, btag), it, s);
            }
            /* nothing of the refused call reached the peer or the matching */
            gt_ring_step(s, s, s, sbuf, rbuf, n, 100 + (int)it, it, &chk);
            GT_CUDA(cudaStreamSynchronize(s));
            gt_checker_verify(&chk, what);
            T_MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (t_rank == 0)
                printf("[capture] ok %s: %s, end of capture %s\n", what, "refused",
                       cudaGetErrorName(ce));
        }
    /* Communication beside another stream's capture: the application
     * captures a kernel on s2 (each mode) while it enqueues a ring exchange
     * on s. The library's driver calls on this thread (stream and pointer
     * checks, stream points) must neither fail nor invalidate that capture:
     * the graph is made and replayed twice, and the exchange moves the
     * right bytes. */
    cudaStream_t s2;
    GT_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    uint8_t *xbuf = (uint8_t *)gt_alloc(GT_DEVICE, n);
    for (int m = 0; m < 3; m++, it++) {
        snprintf(what, sizeof what, "a ring exchange beside another stream's capture (%s mode)",
                 mname[m]);
        t_phase(what);
        GT_CUDA(cudaStreamBeginCapture(s2, modes[m]));
        gt_fill(GT_DEVICE, xbuf, n, gt_seed(t_rank, it, 7), s2);
        gt_ring_step(s, s, s, sbuf, rbuf, n, 300 + (int)it, it, &chk);
        cudaGraph_t g = NULL;
        cudaError_t ce = cudaStreamEndCapture(s2, &g);
        T_CHECK(ce == cudaSuccess && g != NULL,
                "%s: cudaStreamEndCapture returned %s: the library's calls invalidated the "
                "application's capture",
                what, cudaGetErrorName(ce));
        cudaGraphExec_t ge;
        GT_CUDA(cudaGraphInstantiate(&ge, g, 0));
        GT_CUDA(cudaMemsetAsync(xbuf, 0, n, s2));
        for (int rep = 0; rep < 2; rep++)
            GT_CUDA(cudaGraphLaunch(ge, s2));
        gt_check(&chk, GT_DEVICE, xbuf, n, gt_seed(t_rank, it, 7), it, s2);
        GT_CUDA(cudaStreamSynchronize(s2));
        GT_CUDA(cudaStreamSynchronize(s));
        GT_CUDA(cudaGraphExecDestroy(ge));
        GT_CUDA(cudaGraphDestroy(g));
        gt_checker_verify(&chk, what);
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == 0)
            printf("[capture] ok %s\n", what);
    }
    gt_free(GT_DEVICE, xbuf);
    GT_CUDA(cudaStreamDestroy(s2));
    T_MPI(MPI_Comm_free(&sc));
    T_MPI(MPI_Type_free(&vec));
    gt_free(GT_DEVICE, sbuf);
    gt_free(GT_DEVICE, rbuf);
    gt_free(GT_DEVICE, red);
    gt_checker_free(&chk);
    GT_CUDA(cudaStreamDestroy(s));
    return gt_finish();
}
