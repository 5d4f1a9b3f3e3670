/*
 * disable.c - the MPIX_ACC_DISABLE=1 path: every wrapper is a pure
 * pass-through, so a plain MPI program works unchanged. Run with
 * MPIX_ACC_DISABLE=1 (the test refuses to run without it).
 *
 *   - plain point-to-point (blocking, nonblocking, Sendrecv, ANY_SOURCE,
 *     eager and large), collectives, communicator dup/split/free;
 *   - info keys of the library are NOT interpreted: mpix_acc_stream="0x1" or
 *     "0xzz" are accepted by MPI_Comm_set_info and the communicator stays
 *     plain (MPI_Recv returns only with the data);
 *   - the MPIX_Acc_* calls fail (config.h: they return MPI_ERR_OTHER) instead
 *     of doing anything.
 */
#include "common.h"

static int next, prev;

static void ring(MPI_Comm comm, size_t n, int tag, int delay_even)
{
    int r, sz;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &sz);
    int nx = (r + 1) % sz, pv = (r - 1 + sz) % sz;
    uint8_t *s = malloc(n + 1), *d = malloc(n + 1);
    t_fill(s, n, (uint64_t)r * 31 + n);
    memset(d, 0, n + 1);
    MPI_Status st;
    if (r % 2 == 0) {
        if (delay_even)
            t_sleep_ms(300);
        T_MPI(MPI_Send(s, (int)n, MPI_BYTE, nx, tag, comm));
        T_MPI(MPI_Recv(d, (int)n, MPI_BYTE, pv, tag, comm, &st));
    } else {
        T_MPI(MPI_Recv(d, (int)n, MPI_BYTE, pv, tag, comm, &st));
        T_MPI(MPI_Send(s, (int)n, MPI_BYTE, nx, tag, comm));
    }
    char what[96];
    snprintf(what, sizeof what, "plain MPI_Send/MPI_Recv ring %zu B tag %d", n, tag);
    t_expect_pattern(d, n, (uint64_t)pv * 31 + n, what);
    t_expect_status(&st, pv, tag, (int)n, MPI_BYTE, what);
    free(s);
    free(d);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "disable", 90);
    const char *dis = getenv("MPIX_ACC_DISABLE");
    T_CHECK(dis && strcmp(dis, "1") == 0, "run this test with MPIX_ACC_DISABLE=1");
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;

    t_phase("plain point-to-point");
    const size_t sizes[] = {0, 8, 8192, 100000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        ring(MPI_COMM_WORLD, sizes[i], (int)i, 0);
    {
        int sv[3] = {t_rank, t_rank + 1, t_rank + 2}, rv[3] = {-1, -1, -1};
        MPI_Request rq[4];
        MPI_Status st[4];
        T_MPI(MPI_Irecv(&rv[0], 1, MPI_INT, prev, 20, MPI_COMM_WORLD, &rq[0]));
        T_MPI(MPI_Irecv(&rv[1], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rq[1]));
        T_MPI(MPI_Isend(&sv[0], 1, MPI_INT, next, 20, MPI_COMM_WORLD, &rq[2]));
        T_MPI(MPI_Isend(&sv[1], 1, MPI_INT, next, 21, MPI_COMM_WORLD, &rq[3]));
        T_MPI(MPI_Waitall(4, rq, st));
        T_CHECK(rv[0] == prev && rv[1] == prev + 1, "Isend/Irecv got %d/%d", rv[0], rv[1]);
        t_expect_status(&st[1], prev, 21, 1, MPI_INT, "ANY_SOURCE/ANY_TAG");
        T_MPI(MPI_Sendrecv(&sv[2], 1, MPI_INT, next, 22, &rv[2], 1, MPI_INT, prev, 22,
                           MPI_COMM_WORLD, &st[0]));
        T_CHECK(rv[2] == prev + 2, "Sendrecv got %d", rv[2]);
    }

    t_phase("collectives and communicators");
    {
        int v = t_rank + 1, sum = 0;
        T_MPI(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        T_CHECK(sum == t_size * (t_size + 1) / 2, "Allreduce %d", sum);
        int root = 7;
        if (t_rank != 0)
            root = 0;
        T_MPI(MPI_Bcast(&root, 1, MPI_INT, 0, MPI_COMM_WORLD));
        T_CHECK(root == 7, "Bcast %d", root);
        int *all = malloc(sizeof(int) * (size_t)t_size);
        T_MPI(MPI_Allgather(&t_rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD));
        for (int i = 0; i < t_size; i++)
            T_CHECK(all[i] == i, "Allgather[%d] = %d", i, all[i]);
        free(all);
        MPI_Comm half, dup;
        T_MPI(MPI_Comm_split(MPI_COMM_WORLD, t_rank % 2, -t_rank, &half));
        T_MPI(MPI_Comm_dup(half, &dup));
        int hs;
        MPI_Comm_size(dup, &hs);
        if (hs > 1)
            ring(dup, 1000, 30, 0);
        T_MPI(MPI_Comm_free(&dup));
        T_MPI(MPI_Comm_free(&half));
    }

    t_phase("library info keys are not interpreted");
    {
        MPI_Comm c;
        MPI_Info info;
        T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        T_MPI(MPI_Info_create(&info));
        T_MPI(MPI_Info_set(info, "mpix_acc_stream", "0x1"));
        T_MPI(MPI_Comm_set_info(c, info));
        T_MPI(MPI_Info_set(info, "mpix_acc_stream", "0xzz"));
        T_MPI(MPI_Info_set(info, "mpix_acc_recv_post", "sideways"));
        T_MPI(MPI_Comm_set_info(c, info));
        T_MPI(MPI_Info_free(&info));
        ring(c, 64, 40, 1);
        ring(c, 200000, 41, 1);
        T_MPI(MPI_Comm_free(&c));
    }

    t_phase("MPIX_Acc_* calls are refused");
    {
        T_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        T_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
        MPIX_Acc_stream s = NULL;
        int rc = MPIX_Acc_Hoststream_create(&s), cls = -1;
        MPI_Error_class(rc, &cls);
        T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER,
                "MPIX_Acc_Hoststream_create under MPIX_ACC_DISABLE=1: %s, expected class "
                "MPI_ERR_OTHER",
                t_errstr(rc));
        int x = 0;
        MPI_Request r;
        rc = MPIX_Acc_Isend(NULL, &x, 1, MPI_INT, next, 1, MPI_COMM_WORLD, &r);
        MPI_Error_class(rc, &cls);
        T_CHECK(rc != MPI_SUCCESS && cls == MPI_ERR_OTHER,
                "MPIX_Acc_Isend under MPIX_ACC_DISABLE=1: %s, expected class MPI_ERR_OTHER",
                t_errstr(rc));
    }
    return t_finish();
}
