/*
 * sendrecv_replace.c - MPI_Sendrecv_replace on a stream communicator (host
 * streams), stream-ordered (issue 20 item 2).
 *
 *   1. ring shift, 8 B to 1 MiB (the stream's scratch grows), behind a
 *      gate that holds the stream: the call returns at once and changes
 *      nothing until the stream runs; then every rank holds its left
 *      neighbour's data and the status says who sent how much;
 *   2. 30 shifts enqueued back to back (one scratch reused by all), one
 *      synchronize: the data went round the ring 30 times;
 *   3. a shorter message (ranks 0 and 1): rank 1 sends 10 ints with a plain
 *      MPI_Isend, rank 0 replaces a 100-int buffer: the first 10 are
 *      replaced, the other 90 keep their values (MPI's rule), count 10;
 *   4. MPI_PROC_NULL as source (the buffer is only sent), as destination
 *      (received in place) and both (nothing; status source MPI_PROC_NULL);
 *   5. argument errors (rank, tag) are MPI errors; on a plain communicator
 *      it is the MPI library's call.
 */
#include "common.h"

#include <string.h>

static int next, prev;
static MPIX_Acc_stream S;

static void fill_int(int *p, int n, int base)
{
    for (int i = 0; i < n; i++)
        p[i] = base + i;
}

static void ring_shift(MPI_Comm c)
{
    t_phase("1. ring shift behind a gate");
    size_t sizes[] = {8, 4096, 65536, 1 << 20};
    for (int k = 0; k < 4; k++) {
        size_t n = sizes[k];
        unsigned char *buf = malloc(n);
        t_fill(buf, n, (uint64_t)(t_rank * 977 + k));
        t_gate_t g;
        t_gate_init(&g);
        T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
        MPI_Status st;
        memset(&st, 0, sizeof st);
        double t0 = t_now();
        T_MPI(MPI_Sendrecv_replace(buf, (int)n, MPI_BYTE, next, 3, prev, 3, c, &st));
        double dt = t_now() - t0;
        T_CHECK(dt < T_SLOW(1.0), "%zu bytes: the call took %.2f s (it must not wait)", n, dt);
        t_expect_pattern(buf, n, (uint64_t)(t_rank * 977 + k),
                         "buffer while the stream is held (must be unchanged)");
        atomic_store(&g.open, 1);
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        t_expect_pattern(buf, n, (uint64_t)(prev * 977 + k), "shifted buffer");
        int cnt = -1;
        MPI_Get_count(&st, MPI_BYTE, &cnt);
        T_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 3 && cnt == (int)n,
                "%zu bytes: status source %d tag %d count %d", n, st.MPI_SOURCE, st.MPI_TAG, cnt);
        free(buf);
    }
}

static void back_to_back(MPI_Comm c)
{
    t_phase("2. 30 shifts back to back");
    int v[64];
    fill_int(v, 64, t_rank * 1000);
    for (int r = 0; r < 30; r++)
        T_MPI(MPI_Sendrecv_replace(v, 64, MPI_INT, next, 4, prev, 4, c, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    int from = ((t_rank - 30) % t_size + t_size) % t_size;
    for (int i = 0; i < 64; i++)
        T_CHECK(v[i] == from * 1000 + i, "after 30 shifts v[%d] = %d, expected %d (from rank %d)",
                i, v[i], from * 1000 + i, from);
}

static void shorter_message(MPI_Comm c)
{
    t_phase("3. a shorter message replaces only its part");
    int big[100], small[10], sink[100];
    MPI_Request rq[2];
    if (t_rank == 0) {
        fill_int(big, 100, 500);
        MPI_Status st;
        T_MPI(MPI_Sendrecv_replace(big, 100, MPI_INT, 1, 5, 1, 5, c, &st));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        for (int i = 0; i < 100; i++) {
            int want = i < 10 ? 9000 + i : 500 + i;
            T_CHECK(big[i] == want, "big[%d] = %d, expected %d", i, big[i], want);
        }
        int cnt = -1;
        MPI_Get_count(&st, MPI_INT, &cnt);
        T_CHECK(cnt == 10, "status count %d, expected 10", cnt);
    } else if (t_rank == 1) {
        fill_int(small, 10, 9000);
        T_MPI(MPI_Irecv(sink, 100, MPI_INT, 0, 5, c, &rq[0]));
        T_MPI(MPI_Isend(small, 10, MPI_INT, 0, 5, c, &rq[1]));
        T_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        for (int i = 0; i < 100; i++)
            T_CHECK(sink[i] == 500 + i, "rank 1 got sink[%d] = %d", i, sink[i]);
    }
}

static void proc_null(MPI_Comm c)
{
    t_phase("4. MPI_PROC_NULL");
    int v[8], w[8];
    MPI_Status st;
    /* source MPI_PROC_NULL: only sent (to next); next receives it with a plain receive */
    fill_int(v, 8, 100 * t_rank);
    MPI_Request rq;
    T_MPI(MPI_Irecv(w, 8, MPI_INT, prev, 6, c, &rq));
    T_MPI(MPI_Sendrecv_replace(v, 8, MPI_INT, next, 6, MPI_PROC_NULL, 6, c, &st));
    T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    for (int i = 0; i < 8; i++) {
        T_CHECK(v[i] == 100 * t_rank + i, "source PROC_NULL changed v[%d] to %d", i, v[i]);
        T_CHECK(w[i] == 100 * prev + i, "the send of a source-PROC_NULL call: w[%d] = %d", i, w[i]);
    }
    T_CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "source PROC_NULL: status source %d", st.MPI_SOURCE);
    /* destination MPI_PROC_NULL: received in place from prev */
    fill_int(w, 8, 100 * t_rank + 50);
    T_MPI(MPI_Isend(w, 8, MPI_INT, next, 7, c, &rq));
    T_MPI(MPI_Sendrecv_replace(v, 8, MPI_INT, MPI_PROC_NULL, 7, prev, 7, c, &st));
    T_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    for (int i = 0; i < 8; i++)
        T_CHECK(v[i] == 100 * prev + 50 + i, "destination PROC_NULL: v[%d] = %d", i, v[i]);
    T_CHECK(st.MPI_SOURCE == prev, "destination PROC_NULL: status source %d", st.MPI_SOURCE);
    /* both */
    fill_int(v, 8, 7);
    T_MPI(MPI_Sendrecv_replace(v, 8, MPI_INT, MPI_PROC_NULL, 8, MPI_PROC_NULL, 8, c, &st));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    for (int i = 0; i < 8; i++)
        T_CHECK(v[i] == 7 + i, "both PROC_NULL changed v[%d] to %d", i, v[i]);
    T_CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "both PROC_NULL: status source %d", st.MPI_SOURCE);
}

static void errors_and_plain(MPI_Comm c)
{
    t_phase("5. argument errors; a plain communicator");
    int v[4] = {1, 2, 3, 4}, cls = MPI_SUCCESS;
    int rc = MPI_Sendrecv_replace(v, 4, MPI_INT, t_size + 3, 1, prev, 1, c, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    T_CHECK(cls == MPI_ERR_RANK, "bad destination: class %d, expected MPI_ERR_RANK", cls);
    rc = MPI_Sendrecv_replace(v, 4, MPI_INT, next, -5, prev, 1, c, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    T_CHECK(cls == MPI_ERR_TAG, "bad tag: class %d, expected MPI_ERR_TAG", cls);
    MPI_Comm p;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &p));
    fill_int(v, 4, 10 * t_rank);
    T_MPI(MPI_Sendrecv_replace(v, 4, MPI_INT, next, 9, prev, 9, p, MPI_STATUS_IGNORE));
    for (int i = 0; i < 4; i++)
        T_CHECK(v[i] == 10 * prev + i, "plain communicator: v[%d] = %d", i, v[i]);
    T_MPI(MPI_Comm_free(&p));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "sendrecv_replace", 120);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    MPI_Comm c = t_stream_comm(&S);
    ring_shift(c);
    back_to_back(c);
    shorter_message(c);
    proc_null(c);
    errors_and_plain(c);
    t_stream_comm_free(&c, &S);
    return t_finish();
}
