/*
 * link_order.c - a program that calls MPIX_Acc_* functions, built twice:
 *   link_order_good  -lmpixacc before the MPI library (as documented)
 *   link_order_bad   the MPI library first (e.g. CMake's
 *                    target_link_libraries(app MPI::MPI_C mpixacc)):
 *                    MPI_Init resolves to the MPI library, the library
 *                    never starts.
 * Each rank creates a host stream three times and prints, on stdout,
 * "link_order: rank R create rc=OK|ERR" lines. test/interpose/link_order.sh
 * checks that the bad one logs the library's link-order WARN naming the fix
 * (at load time and once more at the first failing MPIX_Acc_* call, not at
 * every call) and the good one none.
 */
#include <mpi.h>
#include <mpix_acc.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, bad = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < 3; i++) {
        MPIX_Acc_stream s = NULL;
        int rc = MPIX_Acc_Hoststream_create(&s);
        printf("link_order: rank %d create rc=%s\n", rank, rc == MPI_SUCCESS ? "OK" : "ERR");
        if (rc == MPI_SUCCESS)
            MPIX_Acc_Hoststream_free(&s);
        else
            bad = 1;
    }
    fflush(stdout);
    MPI_Finalize();
    (void)bad;
    return 0;
}
