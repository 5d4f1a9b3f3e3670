/*
 * matching.c - MPI matching rules for stream-ordered messages:
 *   1. MPI_ANY_SOURCE + MPI_ANY_TAG at a rotating root (statuses name the real
 *      source and tag; per-source order is kept), eager and rendezvous;
 *   2. MPI_ANY_TAG from a specific source (incl. tag 0 and 2^24-1);
 *   3. communicator isolation: same source/tag on two communicators, and a
 *      split communicator with reversed rank order (status.MPI_SOURCE is the
 *      rank in that communicator);
 *   4. MPI_PROC_NULL: completes at once, status source MPI_PROC_NULL, tag
 *      MPI_ANY_TAG, count 0, buffer untouched;
 *   5. truncation: status.MPI_ERROR of class MPI_ERR_TRUNCATE (stream wait) or
 *      error class MPI_ERR_TRUNCATE from the host wait, no write past the
 *      buffer, and the stream keeps working afterwards.
 */
#include "common.h"

static int next, prev;
static MPIX_Acc_stream S;

typedef struct {
    int src, k, tag, size;
} hdr_t;

static void any_source_any_tag(void)
{
    enum { M = 150, MAXB = 64 };
    for (int root = 0; root < t_size; root++) {
        t_phase("ANY_SOURCE/ANY_TAG small messages");
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == root) {
            int nmsg = (t_size - 1) * M;
            uint8_t *rbuf = calloc((size_t)nmsg, MAXB);
            MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)nmsg);
            MPI_Status *st = calloc((size_t)nmsg, sizeof(MPI_Status));
            int *lastk = malloc(sizeof(int) * (size_t)t_size),
                *cnt = calloc((size_t)t_size, sizeof(int));
            T_CHECK(rbuf && rq && st && lastk && cnt, "malloc");
            for (int i = 0; i < t_size; i++)
                lastk[i] = -1;
            for (int i = 0; i < nmsg; i++)
                T_MPI(MPIX_Acc_Irecv(S, rbuf + (size_t)i * MAXB, MAXB, MPI_BYTE, MPI_ANY_SOURCE,
                                     MPI_ANY_TAG, MPI_COMM_WORLD, &rq[i]));
            T_MPI(MPIX_Acc_Waitall(S, nmsg, rq, st));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S));
            for (int i = 0; i < nmsg; i++) {
                hdr_t h;
                memcpy(&h, rbuf + (size_t)i * MAXB, sizeof h);
                T_CHECK(h.src >= 0 && h.src < t_size && h.src != root,
                        "receive %d: payload names source %d", i, h.src);
                T_CHECK(st[i].MPI_SOURCE == h.src,
                        "receive %d: status.MPI_SOURCE expected %d got %d", i, h.src,
                        st[i].MPI_SOURCE);
                T_CHECK(st[i].MPI_TAG == h.tag, "receive %d: status.MPI_TAG expected %d got %d", i,
                        h.tag, st[i].MPI_TAG);
                int c;
                T_MPI(MPI_Get_count(&st[i], MPI_BYTE, &c));
                T_CHECK(c == h.size, "receive %d: count expected %d got %d", i, h.size, c);
                T_CHECK(h.k > lastk[h.src],
                        "ANY_SOURCE: message %d from rank %d matched after message %d (overtaking)",
                        h.k, h.src, lastk[h.src]);
                lastk[h.src] = h.k;
                cnt[h.src]++;
                t_expect_pattern(rbuf + (size_t)i * MAXB + sizeof h, (size_t)h.size - sizeof h,
                                 (uint64_t)(h.src * 100000 + h.k), "ANY_SOURCE payload");
            }
            for (int s = 0; s < t_size; s++)
                T_CHECK(s == root || cnt[s] == M,
                        "root %d got %d messages from rank %d, expected %d", root, cnt[s], s, M);
            free(rbuf);
            free(rq);
            free(st);
            free(lastk);
            free(cnt);
        } else {
            uint8_t *sbuf = malloc((size_t)M * MAXB);
            MPI_Request *rq = malloc(sizeof(MPI_Request) * M);
            for (int k = 0; k < M; k++) {
                hdr_t h = {t_rank, k, 1000 + t_rank * 10 + k % 7,
                           (int)sizeof(hdr_t) + (k * 7) % (MAXB - (int)sizeof(hdr_t) + 1)};
                uint8_t *p = sbuf + (size_t)k * MAXB;
                memcpy(p, &h, sizeof h);
                t_fill(p + sizeof h, (size_t)h.size - sizeof h, (uint64_t)(t_rank * 100000 + k));
                T_MPI(MPIX_Acc_Isend(S, p, h.size, MPI_BYTE, root, h.tag, MPI_COMM_WORLD, &rq[k]));
            }
            T_MPI(MPIX_Acc_Waitall(S, M, rq, MPI_STATUSES_IGNORE));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S));
            free(sbuf);
            free(rq);
        }

        /* rendezvous-size messages with ANY_SOURCE and a specific tag */
        t_phase("ANY_SOURCE large messages");
        enum { L = 3, LN = 200000 };
        T_MPI(MPI_Barrier(MPI_COMM_WORLD));
        if (t_rank == root) {
            int nmsg = (t_size - 1) * L;
            uint8_t *rbuf = malloc((size_t)nmsg * LN);
            MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)nmsg);
            MPI_Status *st = calloc((size_t)nmsg, sizeof(MPI_Status));
            int *cnt = calloc((size_t)t_size, sizeof(int));
            for (int i = 0; i < nmsg; i++)
                T_MPI(MPIX_Acc_Irecv(S, rbuf + (size_t)i * LN, LN, MPI_BYTE, MPI_ANY_SOURCE, 77,
                                     MPI_COMM_WORLD, &rq[i]));
            T_MPI(MPIX_Acc_Waitall(S, nmsg, rq, st));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S));
            for (int i = 0; i < nmsg; i++) {
                int src = st[i].MPI_SOURCE;
                T_CHECK(src >= 0 && src < t_size && src != root,
                        "large ANY_SOURCE: status source %d", src);
                T_CHECK(st[i].MPI_TAG == 77, "large ANY_SOURCE: status tag %d", st[i].MPI_TAG);
                int c;
                T_MPI(MPI_Get_count(&st[i], MPI_BYTE, &c));
                T_CHECK(c == LN - src, "large ANY_SOURCE: count %d expected %d", c, LN - src);
                t_expect_pattern(rbuf + (size_t)i * LN, (size_t)(LN - src),
                                 (uint64_t)(src * 10 + cnt[src]),
                                 "large ANY_SOURCE payload (per-source order)");
                cnt[src]++;
            }
            free(rbuf);
            free(rq);
            free(st);
            free(cnt);
        } else {
            uint8_t *sbuf = malloc((size_t)L * LN);
            MPI_Request rq[L];
            for (int k = 0; k < L; k++) {
                t_fill(sbuf + (size_t)k * LN, (size_t)(LN - t_rank), (uint64_t)(t_rank * 10 + k));
                T_MPI(MPIX_Acc_Isend(S, sbuf + (size_t)k * LN, LN - t_rank, MPI_BYTE, root, 77,
                                     MPI_COMM_WORLD, &rq[k]));
            }
            T_MPI(MPIX_Acc_Waitall(S, L, rq, MPI_STATUSES_IGNORE));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S));
            free(sbuf);
        }
    }
}

static void any_tag(void)
{
    t_phase("ANY_TAG from a specific source");
    const int tags[] = {7, 0, 16777215, 3, 12345, 99};
    enum { NT = 6 };
    int sdata[NT], rdata[NT];
    MPI_Request rq[2 * NT];
    MPI_Status st[2 * NT];
    for (int i = 0; i < NT; i++) {
        sdata[i] = t_rank * 100 + i;
        rdata[i] = -1;
    }
    for (int i = 0; i < NT; i++)
        T_MPI(MPIX_Acc_Isend(S, &sdata[i], 1, MPI_INT, next, tags[i], MPI_COMM_WORLD, &rq[i]));
    for (int i = 0; i < NT; i++)
        T_MPI(MPIX_Acc_Irecv(S, &rdata[i], 1, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD,
                             &rq[NT + i]));
    T_MPI(MPIX_Acc_Waitall(S, 2 * NT, rq, st));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    for (int i = 0; i < NT; i++) {
        T_CHECK(rdata[i] == prev * 100 + i, "ANY_TAG receive %d: data expected %d got %d", i,
                prev * 100 + i, rdata[i]);
        t_expect_status(&st[NT + i], prev, tags[i], 1, MPI_INT, "ANY_TAG status");
    }
}

static void comm_isolation(void)
{
    t_phase("communicator isolation");
    MPI_Comm c1, c2, rev;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c1));
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
    int a = t_rank * 10 + 1, b = t_rank * 10 + 2, ra = -1, rb = -1, rc = -1, rd = -1;
    MPI_Request rq[4];
    MPI_Status st[4];
    /* send on c2 first, then c1, same tag; receive on c1 first */
    T_MPI(MPIX_Acc_Isend(S, &b, 1, MPI_INT, next, 4, c2, &rq[0]));
    T_MPI(MPIX_Acc_Isend(S, &a, 1, MPI_INT, next, 4, c1, &rq[1]));
    T_MPI(MPIX_Acc_Irecv(S, &ra, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, c1, &rq[2]));
    T_MPI(MPIX_Acc_Irecv(S, &rb, 1, MPI_INT, prev, 4, c2, &rq[3]));
    T_MPI(MPIX_Acc_Waitall(S, 4, rq, st));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(ra == prev * 10 + 1,
            "receive on comm 1 got %d, expected %d (message of another "
            "communicator matched?)",
            ra, prev * 10 + 1);
    T_CHECK(rb == prev * 10 + 2, "receive on comm 2 got %d, expected %d", rb, prev * 10 + 2);
    t_expect_status(&st[2], prev, 4, 1, MPI_INT, "comm 1 ANY_SOURCE/ANY_TAG status");

    /* reversed rank order: comm rank = size-1-world rank */
    T_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, t_size - t_rank, &rev));
    int rr, rs;
    MPI_Comm_rank(rev, &rr);
    MPI_Comm_size(rev, &rs);
    T_CHECK(rr == t_size - 1 - t_rank, "split: rank %d", rr);
    int rnext = (rr + 1) % rs, rprev = (rr - 1 + rs) % rs;
    int v = 1000 + rr;
    T_MPI(MPIX_Acc_Isend(S, &v, 1, MPI_INT, rnext, 21, rev, &rq[0]));
    T_MPI(MPIX_Acc_Irecv(S, &rc, 1, MPI_INT, rprev, 21, rev, &rq[1]));
    T_MPI(MPIX_Acc_Irecv(S, &rd, 1, MPI_INT, MPI_ANY_SOURCE, 22, rev, &rq[2]));
    T_MPI(MPIX_Acc_Isend(S, &v, 1, MPI_INT, rnext, 22, rev, &rq[3]));
    T_MPI(MPIX_Acc_Waitall(S, 4, rq, st));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(rc == 1000 + rprev, "split comm: got %d expected %d", rc, 1000 + rprev);
    T_CHECK(rd == 1000 + rprev, "split comm ANY_SOURCE: got %d expected %d", rd, 1000 + rprev);
    t_expect_status(&st[1], rprev, 21, 1, MPI_INT, "split comm status (comm rank, not world rank)");
    t_expect_status(&st[2], rprev, 22, 1, MPI_INT, "split comm ANY_SOURCE status (comm rank)");
    T_MPI(MPI_Comm_free(&rev));
    T_MPI(MPI_Comm_free(&c1));
    T_MPI(MPI_Comm_free(&c2));
}

static void proc_null(void)
{
    t_phase("MPI_PROC_NULL");
    int buf[4] = {11, 22, 33, 44};
    MPI_Request rq;
    MPI_Status st;
    memset(&st, 0x5A, sizeof st);
    double t0 = t_now();
    /* host wait */
    T_MPI(MPIX_Acc_Irecv(S, buf, 4, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &rq));
    T_MPI(MPI_Wait(&rq, &st));
    T_CHECK(t_now() - t0 < T_SLOW(5.0), "PROC_NULL receive took %.3f s", t_now() - t0);
    T_CHECK(rq == MPI_REQUEST_NULL, "MPI_Wait did not free the PROC_NULL request");
    t_expect_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_INT, "PROC_NULL receive (host wait)");
    T_CHECK(buf[0] == 11 && buf[3] == 44, "PROC_NULL receive wrote the buffer");
    /* MPI_Test completes it */
    int flag = 0;
    T_MPI(MPIX_Acc_Irecv(S, buf, 4, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &rq));
    t0 = t_now();
    while (!flag && t_now() - t0 < T_SLOW(5.0))
        T_MPI(MPI_Test(&rq, &flag, &st));
    T_CHECK(flag, "MPI_Test never completed a PROC_NULL receive (5 s)");
    t_expect_status(&st, MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_INT, "PROC_NULL receive (MPI_Test)");
    /* stream-ordered: send to and receive from PROC_NULL, with statuses */
    MPI_Request r2[2];
    MPI_Status s2[2], s3;
    memset(s2, 0x5A, sizeof s2);
    memset(&s3, 0x5A, sizeof s3);
    T_MPI(MPIX_Acc_Isend(S, buf, 4, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &r2[0]));
    T_MPI(MPIX_Acc_Irecv(S, buf, 4, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &r2[1]));
    T_MPI(MPIX_Acc_Waitall(S, 2, r2, s2));
    T_MPI(MPIX_Acc_Recv(S, buf, 4, MPI_INT, MPI_PROC_NULL, 6, MPI_COMM_WORLD, &s3));
    T_MPI(MPIX_Acc_Send(S, buf, 4, MPI_INT, MPI_PROC_NULL, 6, MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    t_expect_status(&s2[1], MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_INT,
                    "PROC_NULL Irecv (stream Waitall)");
    t_expect_status(&s3, MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_INT, "PROC_NULL Recv (stream)");
    T_CHECK(buf[0] == 11 && buf[3] == 44, "PROC_NULL receive wrote the buffer");
}

static void truncation(void)
{
    MPI_Comm comm;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    T_MPI(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    const int sends[2] = {100, 200000};
    for (int v = 0; v < 2; v++) {
        int n = sends[v], rn = n / 2;
        char what[128];
        uint8_t *sbuf = malloc((size_t)n), *rbuf = malloc((size_t)n);
        t_fill(sbuf, (size_t)n, (uint64_t)(t_rank * 7 + v));

        /* a) stream wait: error in status */
        snprintf(what, sizeof what, "truncation %d B into %d B, stream wait", n, rn);
        t_phase(what);
        memset(rbuf, 0x77, (size_t)n);
        MPI_Request rq[2];
        MPI_Status st;
        st.MPI_ERROR = MPI_SUCCESS;
        T_MPI(MPIX_Acc_Isend(S, sbuf, n, MPI_BYTE, next, 30, comm, &rq[0]));
        T_MPI(MPIX_Acc_Irecv(S, rbuf, rn, MPI_BYTE, prev, 30, comm, &rq[1]));
        T_MPI(MPIX_Acc_Wait(S, &rq[1], &st));
        T_MPI(MPIX_Acc_Wait(S, &rq[0], MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_CHECK(t_err_class(st.MPI_ERROR) == MPI_ERR_TRUNCATE,
                "%s: status.MPI_ERROR expected class MPI_ERR_TRUNCATE (%d), got %s", what,
                MPI_ERR_TRUNCATE, t_errstr(st.MPI_ERROR));
        T_CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == 30,
                "%s: truncated status source/tag %d/%d expected %d/30", what, st.MPI_SOURCE,
                st.MPI_TAG, prev);
        for (int i = rn; i < n; i++)
            T_CHECK(rbuf[i] == 0x77, "%s: byte %d past the %d-byte receive buffer was written",
                    what, i, rn);

        /* b) host wait: error class from MPI_Wait (or in the status) */
        snprintf(what, sizeof what, "truncation %d B into %d B, host MPI_Wait", n, rn);
        t_phase(what);
        memset(rbuf, 0x77, (size_t)n);
        T_MPI(MPIX_Acc_Isend(S, sbuf, n, MPI_BYTE, next, 31, comm, &rq[0]));
        T_MPI(MPIX_Acc_Irecv(S, rbuf, rn, MPI_BYTE, prev, 31, comm, &rq[1]));
        st.MPI_ERROR = MPI_SUCCESS;
        int rc = MPI_Wait(&rq[1], &st);
        T_CHECK(t_err_class(rc) == MPI_ERR_TRUNCATE ||
                    t_err_class(st.MPI_ERROR) == MPI_ERR_TRUNCATE,
                "%s: MPI_Wait returned %s; status.MPI_ERROR %d: expected class MPI_ERR_TRUNCATE",
                what, t_errstr(rc), st.MPI_ERROR);
        rc = MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
        T_CHECK(rc == MPI_SUCCESS, "%s: the truncated message's send completed with %s", what,
                t_errstr(rc));
        for (int i = rn; i < n; i++)
            T_CHECK(rbuf[i] == 0x77, "%s: byte %d past the receive buffer was written", what, i);

        /* c) Waitall: the truncated one carries the error */
        snprintf(what, sizeof what, "truncation %d B into %d B, stream Waitall", n, rn);
        t_phase(what);
        int okv = t_rank, okr = -1;
        MPI_Request r4[4];
        MPI_Status s4[4];
        for (int i = 0; i < 4; i++)
            s4[i].MPI_ERROR = -999;
        T_MPI(MPIX_Acc_Isend(S, &okv, 1, MPI_INT, next, 32, comm, &r4[0]));
        T_MPI(MPIX_Acc_Isend(S, sbuf, n, MPI_BYTE, next, 33, comm, &r4[1]));
        T_MPI(MPIX_Acc_Irecv(S, &okr, 1, MPI_INT, prev, 32, comm, &r4[2]));
        T_MPI(MPIX_Acc_Irecv(S, rbuf, rn, MPI_BYTE, prev, 33, comm, &r4[3]));
        T_MPI(MPIX_Acc_Waitall(S, 4, r4, s4));
        /* d) the stream is not stuck: more work after the failed wait */
        int after_s = t_rank + 500, after_r = -1;
        atomic_int flag;
        atomic_store(&flag, 0);
        T_MPI(MPIX_Acc_Send(S, &after_s, 1, MPI_INT, next, 34, comm));
        T_MPI(MPIX_Acc_Recv(S, &after_r, 1, MPI_INT, prev, 34, comm, MPI_STATUS_IGNORE));
        T_MPI(MPIX_Acc_Hoststream_launch(S, t_flag_fn, &flag));
        double t0 = t_now();
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        T_CHECK(t_now() - t0 < T_SLOW(20.0), "%s: synchronize after the error took %.1f s", what,
                t_now() - t0);
        T_CHECK(atomic_load(&flag), "%s: the function enqueued after the failed wait never ran",
                what);
        T_CHECK(after_r == prev + 500, "%s: the exchange after the failed wait got %d expected %d",
                what, after_r, prev + 500);
        T_CHECK(okr == prev, "%s: the good receive in the same Waitall got %d expected %d", what,
                okr, prev);
        T_CHECK(t_err_class(s4[3].MPI_ERROR) == MPI_ERR_TRUNCATE,
                "%s: statuses[3].MPI_ERROR expected class MPI_ERR_TRUNCATE, got %s", what,
                t_errstr(s4[3].MPI_ERROR));
        T_CHECK(s4[3].MPI_SOURCE == prev && s4[3].MPI_TAG == 33,
                "%s: truncated status source/tag %d/%d expected %d/33", what, s4[3].MPI_SOURCE,
                s4[3].MPI_TAG, prev);
        t_expect_status(&s4[2], prev, 32, 1, MPI_INT, "good receive next to a truncated one");
        free(sbuf);
        free(rbuf);
    }
    T_MPI(MPI_Comm_free(&comm));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "matching", 150);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    any_source_any_tag();
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    any_tag();
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    comm_isolation();
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    proc_null();
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    truncation();
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    return t_finish();
}
