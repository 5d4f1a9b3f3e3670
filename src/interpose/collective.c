/*
 * collective.c - the collectives the library itself calls (communicator
 * registration, finalize), waited for so that a rank that does not arrive
 * is reported instead of waited for in silence.
 *
 * MPI cannot abandon a collective, so the wait goes on; what changes is that
 * every MPIX_ACC_WAIT_REPORT seconds the rank logs which collective it is in,
 * on how many ranks, and for how long. Only MPI_Finalize gives up (after
 * MPIX_ACC_FINALIZE_PEER_TIMEOUT): it then skips the MPI library's finalize.
 */
#include "interpose/interpose.h"
#include "util/waiter.h"

#include <time.h>

int mxi_collective_wait(MPI_Request *req, MPI_Comm comm, const char *what, double give_up_s)
{
    uint64_t start = mxu_now_ns();
    uint64_t report_ns = mxu_wait_report_ns();
    uint64_t next_report = start + report_ns;
    long nap_ns = 1000;
    for (;;) {
        int done = 0;
        int rc = PMPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done)
            return rc;
        uint64_t now = mxu_now_ns();
        if (give_up_s > 0 && (double)(now - start) / 1e9 > give_up_s)
            return MXI_COLLECTIVE_GAVE_UP; /* *req stays active: the caller abandons it */
        if (report_ns && now >= next_report) {
            int size = 0, rank = 0;
            PMPI_Comm_size(comm, &size);
            PMPI_Comm_rank(comm, &rank);
            MXU_LOG(MXU_LOG_WARN,
                    "still waiting after %.0f s in the collective %s on a communicator of %d "
                    "ranks (this is rank %d): a rank has not reached it "
                    "(MPIX_ACC_WAIT_REPORT=%g)",
                    (double)(now - start) / 1e9, what, size, rank, mxu_config.wait_report);
            next_report = now + report_ns;
        }
        struct timespec ts = {0, nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
}

int mxi_allreduce_int(const int *in, int *out, MPI_Op op, MPI_Comm comm, const char *what)
{
    MPI_Request req;
    int rc = PMPI_Iallreduce(in, out, 1, MPI_INT, op, comm, &req);
    return rc == MPI_SUCCESS ? mxi_collective_wait(&req, comm, what, 0) : rc;
}

int mxi_allgather_int(const int *in, int *out, MPI_Comm comm, const char *what)
{
    MPI_Request req;
    int rc = PMPI_Iallgather(in, 1, MPI_INT, out, 1, MPI_INT, comm, &req);
    return rc == MPI_SUCCESS ? mxi_collective_wait(&req, comm, what, 0) : rc;
}

int mxi_allgatherv_bytes(const void *in, int len, void *out, const int *lens, const int *displs,
                         MPI_Comm comm, const char *what)
{
    MPI_Request req;
    int rc = PMPI_Iallgatherv(in, len, MPI_BYTE, out, lens, displs, MPI_BYTE, comm, &req);
    return rc == MPI_SUCCESS ? mxi_collective_wait(&req, comm, what, 0) : rc;
}
