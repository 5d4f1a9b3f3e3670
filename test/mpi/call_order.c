/*
 * call_order.c - call-order matching (mpix_acc(3), "Ordering"): the k-th
 * receive for (communicator, source, tag) gets the k-th send of that
 * channel, whatever streams they are on; mpix_acc_match=dynamic matches in
 * start order instead. Host streams, 2-4 ranks.
 *
 *  1. held stream: rank 0 enqueues send A (tag 5) on a stream held 300 ms by
 *     a host function, then send B (tag 5) on a free stream; rank 1's first
 *     receive for tag 5 must get A (call order), and B on a communicator with
 *     mpix_acc_match=dynamic (start order). The receive side too: rank 1's
 *     first receive sits on a held stream, its second on a free one: the
 *     first still gets A.
 *  2. alternating streams: every rank sends CH messages on one channel per
 *     peer, alternating between two streams, one of them delayed now and
 *     then; each peer's receives (also on two streams) see 0, 1, 2, ... .
 *  3. many messages, several streams and tags, specific and wildcard
 *     receives interleaved: every rank sends NM messages to every rank
 *     (itself included), tag k % 4, on one of three streams; each receiver
 *     calls, interleaved, specific receives for tag 0 (per source),
 *     MPI_ANY_SOURCE receives for tag 1, then MPI_ANY_TAG receives per source
 *     and MPI_ANY_SOURCE + MPI_ANY_TAG receives for tags 2 and 3. Checks:
 *     every message exactly once, statuses (source, tag, count) agree with
 *     the payload, the j-th specific receive of (source, tag 0) got that
 *     channel's j-th message, and within each kind of receive the messages
 *     of one source come in the source's call order.
 *  4. mpi_assert_no_any_source=true: an MPI_ANY_SOURCE receive is refused
 *     (MPI_ERR_ARG); mpix_acc_match=bogus is MPI_ERR_INFO_VALUE on all ranks.
 */
#include "common.h"

/* ------------------------------------------------------------ 1. held */

static void held_stream_case(MPI_Comm comm, int dynamic, int hold_recv)
{
    const char *mode = dynamic ? "mpix_acc_match=dynamic" : "call order";
    MPIX_Acc_stream s1, s2;
    T_MPI(MPIX_Acc_Hoststream_create(&s1));
    T_MPI(MPIX_Acc_Hoststream_create(&s2));
    t_sleep_arg_t hold = {300};
    if (t_rank == 0) {
        int a = 'A', b = 'B';
        MPI_Request r[2];
        T_MPI(MPIX_Acc_Hoststream_launch(s1, t_sleep_fn, &hold));
        T_MPI(MPIX_Acc_Isend(s1, &a, 1, MPI_INT, 1, 5, comm, &r[0]));
        T_MPI(MPIX_Acc_Isend(s2, &b, 1, MPI_INT, 1, 5, comm, &r[1]));
        T_MPI(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    } else if (t_rank == 1) {
        int got[2] = {0, 0};
        MPI_Request r[2];
        MPI_Status st[2];
        if (hold_recv) /* the receive side held as well: matching does not wait for it */
            T_MPI(MPIX_Acc_Hoststream_launch(s1, t_sleep_fn, &hold));
        T_MPI(MPIX_Acc_Irecv(hold_recv ? s1 : s2, &got[0], 1, MPI_INT, 0, 5, comm, &r[0]));
        T_MPI(MPIX_Acc_Irecv(s2, &got[1], 1, MPI_INT, 0, 5, comm, &r[1]));
        T_MPI(MPI_Waitall(2, r, st));
        int first = dynamic ? 'B' : 'A', second = dynamic ? 'A' : 'B';
        T_CHECK(got[0] == first && got[1] == second,
                "%s%s: first receive got '%c', second '%c'; expected '%c', '%c'", mode,
                hold_recv ? " (first receive on a held stream too)" : "", got[0], got[1], first,
                second);
        t_expect_status(&st[0], 0, 5, 1, MPI_INT, "held stream, first receive");
    }
    T_MPI(MPIX_Acc_Hoststream_free(&s1));
    T_MPI(MPIX_Acc_Hoststream_free(&s2));
    T_MPI(MPI_Barrier(comm));
}

/* ------------------------------------------------------ 2. alternating */

#define CH 200

static void alternating_case(void)
{
    MPIX_Acc_stream s[2];
    T_MPI(MPIX_Acc_Hoststream_create(&s[0]));
    T_MPI(MPIX_Acc_Hoststream_create(&s[1]));
    int n = t_size;
    int *sval = malloc(sizeof(int) * (size_t)(n * CH)),
        *rval = malloc(sizeof(int) * (size_t)(n * CH));
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(2 * n * CH));
    T_CHECK(sval && rval && req, "out of memory");
    static t_sleep_arg_t nap = {2};
    int nr = 0;
    for (int k = 0; k < CH; k++) {
        for (int p = 0; p < n; p++) {
            /* receives alternate the other way round */
            T_MPI(MPIX_Acc_Irecv(s[(k + 1) % 2], &rval[p * CH + k], 1, MPI_INT, p, 7,
                                 MPI_COMM_WORLD, &req[nr++]));
        }
        if (k % 16 == 0) /* stream 0 falls behind now and then */
            T_MPI(MPIX_Acc_Hoststream_launch(s[0], t_sleep_fn, &nap));
        for (int p = 0; p < n; p++) {
            sval[p * CH + k] = t_rank * 100000 + k;
            T_MPI(MPIX_Acc_Isend(s[k % 2], &sval[p * CH + k], 1, MPI_INT, p, 7, MPI_COMM_WORLD,
                                 &req[nr++]));
        }
    }
    T_MPI(MPI_Waitall(nr, req, MPI_STATUSES_IGNORE));
    for (int p = 0; p < n; p++)
        for (int k = 0; k < CH; k++)
            T_CHECK(rval[p * CH + k] == p * 100000 + k,
                    "alternating streams: receive %d from %d got %d, expected %d", k, p,
                    rval[p * CH + k], p * 100000 + k);
    free(sval);
    free(rval);
    free(req);
    T_MPI(MPIX_Acc_Hoststream_free(&s[0]));
    T_MPI(MPIX_Acc_Hoststream_free(&s[1]));
}

/* ------------------------------------------------------------- 3. mixed */

#define NM 96 /* messages from each rank to each rank; tag k % 4 */
#define NTAG 4

typedef struct {
    int src; /* sender's rank */
    int k;   /* sender's call index towards this receiver */
    int tag;
    int check; /* src * 7919 + k */
} msg_t;

enum { R_SPEC, R_ANYSRC, R_ANYTAG, R_ANYANY, R_KINDS };
static const char *const kind_name[R_KINDS] = {"specific", "MPI_ANY_SOURCE", "MPI_ANY_TAG",
                                               "MPI_ANY_SOURCE+MPI_ANY_TAG"};

static void mixed_case(void)
{
    int n = t_size;
    MPIX_Acc_stream s[3];
    for (int i = 0; i < 3; i++)
        T_MPI(MPIX_Acc_Hoststream_create(&s[i]));
    int total = n * NM;
    msg_t *out = malloc(sizeof(msg_t) * (size_t)total), *in = malloc(sizeof(msg_t) * (size_t)total);
    int *kind = malloc(sizeof(int) * (size_t)total),
        *want_src = malloc(sizeof(int) * (size_t)total);
    MPI_Request *rreq = malloc(sizeof(MPI_Request) * (size_t)total);
    MPI_Request *sreq = malloc(sizeof(MPI_Request) * (size_t)total);
    MPI_Status *st = malloc(sizeof(MPI_Status) * (size_t)total);
    T_CHECK(out && in && kind && want_src && rreq && sreq && st, "out of memory");
    memset(in, 0xff, sizeof(msg_t) * (size_t)total);

    /* Receives, in this order: per round j, for each source a specific
     * receive for tag 0 and an ANY_SOURCE receive for tag 1; then, for the
     * tag 2 and 3 messages, per source NM/4 ANY_TAG receives, and NM/4 *
     * n ANY_SOURCE+ANY_TAG ones. Counts: tag 0 and 1: NM/4 per source. */
    int nr = 0;
    for (int j = 0; j < NM / NTAG; j++) {
        for (int p = 0; p < n; p++) {
            kind[nr] = R_SPEC;
            want_src[nr] = p;
            T_MPI(MPIX_Acc_Irecv(s[nr % 3], &in[nr], (int)sizeof(msg_t), MPI_BYTE, p, 0,
                                 MPI_COMM_WORLD, &rreq[nr]));
            nr++;
            kind[nr] = R_ANYSRC;
            want_src[nr] = -1;
            T_MPI(MPIX_Acc_Irecv(s[nr % 3], &in[nr], (int)sizeof(msg_t), MPI_BYTE, MPI_ANY_SOURCE,
                                 1, MPI_COMM_WORLD, &rreq[nr]));
            nr++;
        }
    }
    for (int p = 0; p < n; p++)
        for (int j = 0; j < NM / NTAG; j++) {
            kind[nr] = R_ANYTAG;
            want_src[nr] = p;
            T_MPI(MPIX_Acc_Irecv(s[nr % 3], &in[nr], (int)sizeof(msg_t), MPI_BYTE, p, MPI_ANY_TAG,
                                 MPI_COMM_WORLD, &rreq[nr]));
            nr++;
        }
    while (nr < total) {
        kind[nr] = R_ANYANY;
        want_src[nr] = -1;
        T_MPI(MPIX_Acc_Irecv(s[nr % 3], &in[nr], (int)sizeof(msg_t), MPI_BYTE, MPI_ANY_SOURCE,
                             MPI_ANY_TAG, MPI_COMM_WORLD, &rreq[nr]));
        nr++;
    }
    /* Sends: to each peer in turn, stream chosen by a hash, one stream held
     * now and then so sends start out of call order. */
    static t_sleep_arg_t nap = {3};
    int ns = 0;
    for (int k = 0; k < NM; k++) {
        if (k % 8 == 3)
            T_MPI(MPIX_Acc_Hoststream_launch(s[(k / 8) % 3], t_sleep_fn, &nap));
        for (int q = 0; q < n; q++) {
            int p = (t_rank + q) % n;
            msg_t *m = &out[p * NM + k];
            m->src = t_rank;
            m->k = k;
            m->tag = k % NTAG;
            m->check = t_rank * 7919 + k;
            int si = (int)(((unsigned)k * 2654435761u + (unsigned)p * 40503u) >> 7) % 3;
            T_MPI(MPIX_Acc_Isend(s[si], m, (int)sizeof(msg_t), MPI_BYTE, p, m->tag, MPI_COMM_WORLD,
                                 &sreq[ns++]));
        }
    }
    T_MPI(MPI_Waitall(nr, rreq, st));
    T_MPI(MPI_Waitall(ns, sreq, MPI_STATUSES_IGNORE));

    /* every message once */
    char *seen = calloc((size_t)total, 1);
    int *spec_next = calloc((size_t)n, sizeof(int));
    int *last_k = malloc(sizeof(int) * (size_t)(R_KINDS * n));
    T_CHECK(seen && spec_next && last_k, "out of memory");
    for (int i = 0; i < R_KINDS * n; i++)
        last_k[i] = -1;
    for (int i = 0; i < nr; i++) {
        msg_t *m = &in[i];
        T_CHECK(m->src >= 0 && m->src < n && m->k >= 0 && m->k < NM &&
                    m->check == m->src * 7919 + m->k && m->tag == m->k % NTAG,
                "receive %d (%s): garbage payload src %d k %d tag %d", i, kind_name[kind[i]],
                m->src, m->k, m->tag);
        T_CHECK(!seen[m->src * NM + m->k], "message %d from %d received twice", m->k, m->src);
        seen[m->src * NM + m->k] = 1;
        char what[96];
        snprintf(what, sizeof what, "receive %d (%s)", i, kind_name[kind[i]]);
        t_expect_status(&st[i], m->src, m->tag, (int)sizeof(msg_t), MPI_BYTE, what);
        if (want_src[i] >= 0)
            T_CHECK(m->src == want_src[i], "%s: from %d, asked for %d", what, m->src, want_src[i]);
        if (kind[i] == R_SPEC) {
            /* the j-th receive of (p, tag 0) gets that channel's j-th message */
            int j = spec_next[m->src]++;
            T_CHECK(m->k == j * NTAG, "%s: channel (%d, tag 0) message %d, expected %d", what,
                    m->src, m->k / NTAG, j);
        }
        if (kind[i] == R_ANYSRC)
            T_CHECK(m->tag == 1, "%s: tag %d", what, m->tag);
        int *lk = &last_k[kind[i] * n + m->src];
        T_CHECK(m->k > *lk, "%s: message %d from %d after message %d (source order broken)", what,
                m->k, m->src, *lk);
        *lk = m->k;
    }
    for (int i = 0; i < total; i++)
        T_CHECK(seen[i], "message %d from %d never received", i % NM, i / NM);
    free(seen);
    free(spec_next);
    free(last_k);
    free(out);
    free(in);
    free(kind);
    free(want_src);
    free(rreq);
    free(sreq);
    free(st);
    for (int i = 0; i < 3; i++)
        T_MPI(MPIX_Acc_Hoststream_free(&s[i]));
}

/* ------------------------------------------------------------ 4. keys */

static void info_case(void)
{
    MPI_Info info;
    MPI_Comm c;
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPIX_Acc_stream s;
    T_MPI(MPIX_Acc_Hoststream_create(&s));
    int v = 0, cls = MPI_SUCCESS;
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPIX_Acc_Irecv(s, &v, 1, MPI_INT, MPI_ANY_SOURCE, 0, c, &r);
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    T_CHECK(cls == MPI_ERR_ARG && r == MPI_REQUEST_NULL,
            "MPI_ANY_SOURCE receive with mpi_assert_no_any_source=true: got %s", t_errstr(rc));
    MPI_Comm_free(&c);
    T_MPI(MPIX_Acc_Hoststream_free(&s));

    T_MPI(MPI_Info_delete(info, "mpi_assert_no_any_source"));
    T_MPI(MPI_Info_set(info, MPIX_ACC_INFO_MATCH, "bogus"));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    c = MPI_COMM_NULL;
    rc = MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c);
    cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    T_CHECK(cls == MPI_ERR_INFO_VALUE && c == MPI_COMM_NULL, "mpix_acc_match=bogus: got %s",
            t_errstr(rc));
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    T_MPI(MPI_Info_free(&info));
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "call_order", 120);
    t_need_ranks(2);

    t_phase("held stream, call order");
    held_stream_case(MPI_COMM_WORLD, 0, 0);
    held_stream_case(MPI_COMM_WORLD, 0, 1);

    t_phase("held stream, mpix_acc_match=dynamic");
    MPI_Info info;
    MPI_Comm dyn;
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPI_Info_set(info, MPIX_ACC_INFO_MATCH, "dynamic"));
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dyn));
    T_MPI(MPI_Info_free(&info));
    MPI_Info used;
    T_MPI(MPI_Comm_get_info(dyn, &used));
    char v[64];
    int flag = 0;
    T_MPI(MPI_Info_get(used, MPIX_ACC_INFO_MATCH, sizeof(v) - 1, v, &flag));
    T_CHECK(flag && strcmp(v, "dynamic") == 0, "MPI_Comm_get_info: %s=%s", MPIX_ACC_INFO_MATCH,
            flag ? v : "(unset)");
    MPI_Info_free(&used);
    held_stream_case(dyn, 1, 0);
    MPI_Comm_free(&dyn);

    t_phase("one channel alternating between streams");
    alternating_case();

    t_phase("many messages, specific and wildcard receives interleaved");
    mixed_case();

    t_phase("info keys");
    info_case();
    return t_finish();
}
