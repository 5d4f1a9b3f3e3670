/*
 * stream_comm.c - stream communicators driven by UNMODIFIED MPI point-to-point
 * calls (MPI_Isend/Irecv/Send/Recv/Sendrecv/Wait/Waitall).
 *
 * A communicator becomes a stream communicator through
 *   1. MPI_Comm_set_info(comm, {mpix_acc_stream: "0x..."}),
 *   2. MPIX_Acc_Comm_set_stream(comm, stream),
 *   3. MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &comm),
 *   4. the "CUDA_STREAM" alias key;
 * and MPI_Comm_get_info returns the keys. On each, the test proves stream
 * ordering by behaviour: with the stream held by a closed gate, a send
 * enqueued after a launched function that writes the buffer carries the
 * written data, MPI_Recv/MPI_Waitall return to the host at once (before the
 * data can have arrived), and the data is there after the stream is
 * synchronized. Also:
 *   - MPI_Comm_dup of a stream communicator is NOT one (a plain MPI_Recv on
 *     it blocks until the plain MPI_Send's data has arrived);
 *   - the value "none" turns a stream communicator back into a plain one;
 *   - mpix_acc_recv_post=early posts receives at call time (completes while
 *     the stream is held), ordered (default) does not;
 *   - mpix_acc_eager_limit is accepted and messages around it are correct;
 *   - collectives on a stream communicator are ordered on its (host)
 *     stream: behind a gate MPI_Allreduce/Bcast/Barrier return at once and
 *     write nothing, then the results are there; an operation the
 *     stream-ordered code does not take (MPI_LAND) runs as the MPI
 *     library's call after the stream drained (its result at return);
 *   - one rank's malformed value (rank 1; the others pass valid ones) in
 *     MPI_Comm_dup_with_info / MPI_Comm_set_info: no rank hangs in the
 *     collective, every rank gets MPI_ERR_INFO_VALUE through the parent's
 *     error handler (once), no communicator is created, and set_info
 *     changes nothing on any rank.
 */
#include "common.h"

static int next, prev;
static MPIX_Acc_stream S, S2;
static char sstr[64];

static MPI_Info make_info(const char *k1, const char *v1, const char *k2, const char *v2)
{
    MPI_Info info;
    T_MPI(MPI_Info_create(&info));
    if (k1)
        T_MPI(MPI_Info_set(info, k1, v1));
    if (k2)
        T_MPI(MPI_Info_set(info, k2, v2));
    return info;
}

/* Returns 1 and the value when comm's info has key. */
static int get_key(MPI_Comm comm, const char *key, char *val, int len)
{
    MPI_Info info = MPI_INFO_NULL;
    int flag = 0, buflen = len;
    T_MPI(MPI_Comm_get_info(comm, &info));
    T_CHECK(info != MPI_INFO_NULL, "MPI_Comm_get_info returned MPI_INFO_NULL");
    T_MPI(MPI_Info_get_string(info, key, &buflen, val, &flag));
    T_MPI(MPI_Info_free(&info));
    return flag;
}

static void expect_stream_key(MPI_Comm comm, const char *key, const char *what)
{
    char v[128];
    T_CHECK(get_key(comm, key, v, sizeof v), "%s: MPI_Comm_get_info has no key %s", what, key);
    unsigned long long p = strtoull(v, NULL, 16);
    T_CHECK(strncmp(v, "0x", 2) == 0 && p == (unsigned long long)(uintptr_t)S,
            "%s: MPI_Comm_get_info key %s = \"%s\", expected \"%s\"", what, key, v, sstr);
}

/* Behavioural proof that comm is a stream communicator on S. */
/* on the stream: 100 ms, then *arg = 1 */
static void set_one_later(void *arg)
{
    t_sleep_ms(100);
    *(volatile int *)arg = 1;
}

static void stream_exchange(MPI_Comm comm, const char *label)
{
    char what[160];
    const size_t sizes[3] = {64, 8193, 262144};
    for (int si = 0; si < 3; si++) {
        size_t n = sizes[si];
        uint8_t *sbuf = malloc(n), *rbuf = malloc(n), *r2 = malloc(n);
        uint64_t snew = 0xABC000 + (uint64_t)t_rank * 10 + (uint64_t)si;
        uint64_t rnew = 0xABC000 + (uint64_t)prev * 10 + (uint64_t)si;
        MPI_Request rq[2];
        MPI_Status st[2], st1;

        /* a) behind a launched sleep+write: Isend/Irecv/Waitall, then
         *    Isend/Recv/Wait; all must return at once, before any data */
        if (n != 8193) {
            snprintf(what, sizeof what, "%s: MPI_Isend/Irecv/Waitall/Recv/Wait, %zu B", label, n);
            t_phase(what);
            t_fill(sbuf, n, 1);
            memset(rbuf, 0x33, n);
            memset(r2, 0x44, n);
            t_fill_arg_t fa = {.buf = sbuf, .n = n, .seed = snew};
            t_verify_arg_t va = {.buf = rbuf, .n = n, .seed = rnew, .what = what};
            t_gate_t g;
            t_gate_init(&g);
            T_MPI(MPI_Barrier(MPI_COMM_WORLD));
            T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
            double t0 = t_now();
            T_MPI(MPIX_Acc_Hoststream_launch(S, t_fill_fn, &fa));
            T_MPI(MPI_Irecv(rbuf, (int)n, MPI_BYTE, prev, 5, comm, &rq[0]));
            T_MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, next, 5, comm, &rq[1]));
            T_MPI(MPI_Waitall(2, rq, st));
            T_CHECK(rq[0] == MPI_REQUEST_NULL && rq[1] == MPI_REQUEST_NULL,
                    "%s: MPI_Waitall did not release the handles", what);
            T_MPI(MPI_Isend(sbuf, (int)n, MPI_BYTE, next, 6, comm, &rq[1]));
            T_MPI(MPI_Recv(r2, (int)n, MPI_BYTE, prev, 6, comm, &st1));
            T_MPI(MPI_Wait(&rq[1], MPI_STATUS_IGNORE));
            T_CHECK(rq[1] == MPI_REQUEST_NULL, "%s: MPI_Wait did not release the handle", what);
            double dt = t_now() - t0;
            int early_data = t_verify(rbuf, n, rnew) < 0 || t_verify(r2, n, rnew) < 0;
            /* every rank has looked at its buffers before any gate opens; a
             * blocking MPI_Recv would hold this rank here until the peers'
             * gates time out (30 s), and then fail the dt check */
            T_MPI(MPI_Barrier(MPI_COMM_WORLD));
            t_sleep_ms(100); /* window for a send started too early */
            atomic_store(&g.open, 1);
            T_CHECK(dt < T_SLOW(2.0),
                    "%s: the calls took %.3f s on the host while the stream was held: "
                    "not stream-ordered",
                    what, dt);
            T_CHECK(!early_data,
                    "%s: data already there when MPI_Waitall/MPI_Recv returned (not "
                    "stream-ordered)",
                    what);
            T_MPI(MPIX_Acc_Hoststream_launch(S, t_verify_fn, &va));
            T_MPI(MPIX_Acc_Hoststream_synchronize(S));
            t_check_async();
            if (t_verify(rbuf, n, 1) < 0)
                t_fail("%s: received the buffer contents from BEFORE the launched write: "
                       "MPI_Isend did not wait for prior stream work",
                       what);
            t_expect_pattern(rbuf, n, rnew, what);
            t_expect_status(&st[0], prev, 5, (int)n, MPI_BYTE, what);
            t_expect_pattern(r2, n, rnew, what);
            t_expect_status(&st1, prev, 6, (int)n, MPI_BYTE, what);
        } else {
            t_fill(sbuf, n, snew);
        }

        /* c) MPI_Send / MPI_Recv (even ranks send first) and MPI_Sendrecv */
        snprintf(what, sizeof what, "%s: MPI_Send/MPI_Recv/MPI_Sendrecv, %zu B", label, n);
        t_phase(what);
        memset(rbuf, 0x55, n);
        memset(r2, 0x66, n);
        if (t_rank % 2 == 0) {
            T_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, next, 7, comm));
            T_MPI(MPI_Recv(rbuf, (int)n, MPI_BYTE, prev, 7, comm, &st1));
        } else {
            T_MPI(MPI_Recv(rbuf, (int)n, MPI_BYTE, prev, 7, comm, &st1));
            T_MPI(MPI_Send(sbuf, (int)n, MPI_BYTE, next, 7, comm));
        }
        T_MPI(MPI_Sendrecv(sbuf, (int)n, MPI_BYTE, next, 8, r2, (int)n, MPI_BYTE, prev, 8, comm,
                           &st[0]));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        t_expect_pattern(rbuf, n, rnew, what);
        t_expect_status(&st1, prev, 7, (int)n, MPI_BYTE, what);
        t_expect_pattern(r2, n, rnew, what);
        t_expect_status(&st[0], prev, 8, (int)n, MPI_BYTE, "MPI_Sendrecv status");
        free(sbuf);
        free(rbuf);
        free(r2);
    }
    /* collectives are ordered on the stream */
    t_phase("collectives on a stream communicator");
    int one = 1, sum = -1, bval = t_rank == 0 ? 42 : -1;
    t_gate_t g;
    t_gate_init(&g);
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    T_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm));
    T_MPI(MPI_Bcast(&bval, 1, MPI_INT, 0, comm));
    T_MPI(MPI_Barrier(comm));
    T_CHECK(sum == -1 && (t_rank == 0 || bval == -1),
            "%s: collectives wrote before the stream ran (sum %d, bcast %d)", label, sum, bval);
    atomic_store(&g.open, 1);
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_CHECK(sum == t_size, "%s: MPI_Allreduce gave %d expected %d", label, sum, t_size);
    T_CHECK(bval == 42, "%s: MPI_Bcast gave %d expected 42", label, bval);
    /* MPI_LAND is not stream-ordered: the MPI library's call once the
     * stream drained, which sees what the stream wrote before it */
    int flag = 0, all = -1;
    T_MPI(MPIX_Acc_Hoststream_launch(S, set_one_later, &flag));
    T_MPI(MPI_Allreduce(&flag, &all, 1, MPI_INT, MPI_LAND, comm));
    T_CHECK(all == 1, "%s: MPI_Allreduce(MPI_LAND) gave %d expected 1 at return", label, all);
}

/* Behavioural proof that comm is a PLAIN communicator: the plain MPI_Recv
 * returns only with the data, sent late by a plain MPI_Send. */
static void plain_exchange(MPI_Comm comm, const char *label)
{
    char what[160];
    snprintf(what, sizeof what, "%s: plain MPI_Send/MPI_Recv", label);
    t_phase(what);
    int sv[16], rv[16];
    for (int i = 0; i < 16; i++) {
        sv[i] = t_rank * 100 + i;
        rv[i] = -1;
    }
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Request rq;
    MPI_Status st;
    /* sender is late: if MPI_Recv were stream-ordered it would return at once */
    T_MPI(MPI_Irecv(rv, 16, MPI_INT, prev, 9, comm, &rq));
    t_sleep_ms(300);
    T_MPI(MPI_Send(sv, 16, MPI_INT, next, 9, comm));
    T_MPI(MPI_Wait(&rq, &st));
    for (int i = 0; i < 16; i++)
        T_CHECK(rv[i] == prev * 100 + i,
                "%s: after MPI_Wait rv[%d] = %d expected %d (the "
                "communicator behaves like a stream communicator)",
                what, i, rv[i], prev * 100 + i);
    t_expect_status(&st, prev, 9, 16, MPI_INT, what);
    int rv2 = -1, sv2 = t_rank + 77;
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (t_rank % 2 == 0) {
        t_sleep_ms(300);
        T_MPI(MPI_Send(&sv2, 1, MPI_INT, next, 10, comm));
        T_MPI(MPI_Recv(&rv2, 1, MPI_INT, prev, 10, comm, &st));
    } else {
        T_MPI(MPI_Recv(&rv2, 1, MPI_INT, prev, 10, comm, &st));
        T_MPI(MPI_Send(&sv2, 1, MPI_INT, next, 10, comm));
    }
    T_CHECK(rv2 == prev + 77,
            "%s: MPI_Recv returned with %d, expected %d (returned before the "
            "data: behaves like a stream communicator)",
            what, rv2, prev + 77);
}

/* Receive posting: early (completes while the stream is held) or ordered. */
static void recv_post(MPI_Comm comm, int early, const char *label)
{
    char what[160];
    snprintf(what, sizeof what, "%s: receive posting %s", label, early ? "early" : "ordered");
    t_phase(what);
    int sv = t_rank + 300, rv = -1;
    t_gate_t g;
    t_gate_init(&g);
    MPI_Request rr, rs;
    MPI_Status st;
    T_MPI(MPI_Barrier(MPI_COMM_WORLD));
    T_MPI(MPIX_Acc_Hoststream_launch(S, t_gate_fn, &g));
    T_MPI(MPI_Irecv(&rv, 1, MPI_INT, prev, 11, comm, &rr));
    /* send from a second, free stream with the explicit call on the same comm */
    T_MPI(MPIX_Acc_Isend(S2, &sv, 1, MPI_INT, next, 11, comm, &rs));
    int flag = 0;
    double t0 = t_now(), limit = early ? T_SLOW(10.0) : 0.4;
    while (!flag && t_now() - t0 < limit) {
        T_MPI(MPI_Request_get_status(rr, &flag, &st));
        if (!flag)
            t_sleep_ms(2);
    }
    atomic_store(&g.open, 1);
    if (early) {
        T_CHECK(flag,
                "%s: with mpix_acc_recv_post=early the receive did not complete while "
                "its stream was held (not posted at call time)",
                what);
        T_CHECK(rv == prev + 300, "%s: early receive completed but data %d expected %d", what, rv,
                prev + 300);
        t_expect_status(&st, prev, 11, 1, MPI_INT, what);
    } else {
        T_CHECK(!flag, "%s: ordered receive completed before its stream reached it", what);
    }
    T_MPI(MPI_Wait(&rr, &st));
    T_MPI(MPIX_Acc_Wait(S2, &rs, MPI_STATUS_IGNORE));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S2));
    t_check_async();
    T_CHECK(rv == prev + 300, "%s: data %d expected %d", what, rv, prev + 300);
    t_expect_status(&st, prev, 11, 1, MPI_INT, what);
}

static void eager_limit_sizes(MPI_Comm comm, const char *label)
{
    t_phase("eager limit hint sizes");
    const size_t sizes[] = {1000, 1023, 1024, 1025, 4096, 200000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        uint8_t *s = malloc(n), *r = malloc(n);
        t_fill(s, n, 4000 + (uint64_t)t_rank + n);
        memset(r, 0, n);
        MPI_Request rq[2];
        MPI_Status st[2];
        T_MPI(MPI_Irecv(r, (int)n, MPI_BYTE, prev, 12, comm, &rq[0]));
        T_MPI(MPI_Isend(s, (int)n, MPI_BYTE, next, 12, comm, &rq[1]));
        T_MPI(MPI_Waitall(2, rq, st));
        T_MPI(MPIX_Acc_Hoststream_synchronize(S));
        char what[128];
        snprintf(what, sizeof what, "%s: %zu B", label, n);
        t_expect_pattern(r, n, 4000 + (uint64_t)prev + n, what);
        t_expect_status(&st[0], prev, 12, (int)n, MPI_BYTE, what);
        free(s);
        free(r);
    }
}

/* Error handler of the parent communicator in one_rank_bad_info. */
static int eh_calls, eh_code;
static void count_errors(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    eh_calls++;
    eh_code = *code;
}

/* Every rank's outcome must be the same: rc of class MPI_ERR_INFO_VALUE
 * (rank 1, whose own value was bad: also MPI_ERR_ARG when allowed), the
 * parent's handler called once with that code. */
static void expect_collective_error(int rc, int arg_ok, const char *what)
{
    int c = t_err_class(rc);
    T_CHECK(c == MPI_ERR_INFO_VALUE || (arg_ok && t_rank == 1 && c == MPI_ERR_ARG),
            "%s: expected class MPI_ERR_INFO_VALUE (%d) on every rank, got %s", what,
            MPI_ERR_INFO_VALUE, t_errstr(rc));
    T_CHECK(eh_calls == 1 && eh_code == rc,
            "%s: the parent communicator's error handler ran %d time(s) (code %d), expected "
            "once with the returned code %d",
            what, eh_calls, eh_code, rc);
    /* the ranks are still in step: nobody was left inside the call */
    int one = 1, n = 0;
    T_MPI(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    T_CHECK(n == t_size, "%s: allreduce after the call: %d expected %d", what, n, t_size);
}

static void one_rank_bad_info(void)
{
    static const struct {
        const char *key, *bad;
    } cases[] = {
        {MPIX_ACC_INFO_STREAM, "0xzz"},        {MPIX_ACC_INFO_STREAM_ALIAS, "stream please"},
        {MPIX_ACC_INFO_RECV_POST, "sideways"}, {MPIX_ACC_INFO_EAGER_LIMIT, "-5"},
        {MPIX_ACC_INFO_STREAM, NULL}, /* well-formed, names no stream */
    };
    char what[192], v[128], junk[64];
    static int not_a_stream;
    t_stream_str((MPIX_Acc_stream)&not_a_stream, junk, sizeof junk);
    t_need_ranks(2);
    /* the guard covers this phase only: before the fix, ranks 0, 2, ...
     * waited forever in MPI_Comm_dup_with_info while rank 1 went on */
    t_guard(60);
    MPI_Comm p;
    MPI_Errhandler eh;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &p));
    T_MPI(MPI_Comm_create_errhandler(count_errors, &eh));
    T_MPI(MPI_Comm_set_errhandler(p, eh));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *key = cases[i].key;
        const char *bad = cases[i].bad ? cases[i].bad : junk;
        int stream_key =
            strcmp(key, MPIX_ACC_INFO_STREAM) == 0 || strcmp(key, MPIX_ACC_INFO_STREAM_ALIAS) == 0;
        const char *good = stream_key                                  ? sstr
                           : strcmp(key, MPIX_ACC_INFO_RECV_POST) == 0 ? "early"
                                                                       : "4096";
        MPI_Info info = make_info(key, t_rank == 1 ? bad : good, NULL, NULL);

        snprintf(what, sizeof what, "MPI_Comm_dup_with_info, %s=\"%s\" on rank 1 only", key, bad);
        t_phase(what);
        MPI_Comm nc = MPI_COMM_NULL;
        eh_calls = 0;
        int rc = MPI_Comm_dup_with_info(p, info, &nc);
        expect_collective_error(rc, !cases[i].bad, what);
        T_CHECK(nc == MPI_COMM_NULL, "%s: a communicator was created although the call failed",
                what);

        snprintf(what, sizeof what, "MPI_Comm_set_info, %s=\"%s\" on rank 1 only", key, bad);
        t_phase(what);
        MPI_Comm c;
        T_MPI(MPI_Comm_dup(p, &c)); /* inherits the counting handler */
        eh_calls = 0;
        rc = MPI_Comm_set_info(c, info);
        expect_collective_error(rc, !cases[i].bad, what);
        T_CHECK(!get_key(c, key, v, sizeof v),
                "%s: the failed call still set %s = \"%s\" on this rank", what, key, v);
        if (stream_key)
            plain_exchange(c, what);
        T_MPI(MPI_Comm_free(&c));
        T_MPI(MPI_Info_free(&info));
    }
    T_MPI(MPI_Errhandler_free(&eh));
    T_MPI(MPI_Comm_free(&p));
    t_guard(200);
}

int main(int argc, char **argv)
{
    t_init(&argc, &argv, "stream_comm", 200);
    next = (t_rank + 1) % t_size;
    prev = (t_rank - 1 + t_size) % t_size;
    T_MPI(MPIX_Acc_Hoststream_create(&S));
    T_MPI(MPIX_Acc_Hoststream_create(&S2));
    t_stream_str(S, sstr, sizeof sstr);
    char v[128];

    /* 1. MPI_Comm_set_info */
    t_phase("MPI_Comm_set_info mpix_acc_stream");
    MPI_Comm c1;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c1));
    MPI_Info info = make_info(MPIX_ACC_INFO_STREAM, sstr, NULL, NULL);
    T_MPI(MPI_Comm_set_info(c1, info));
    T_MPI(MPI_Info_free(&info));
    expect_stream_key(c1, MPIX_ACC_INFO_STREAM, "set_info");
    stream_exchange(c1, "set_info");
    recv_post(c1, 0, "set_info (default ordered)");

    /* 2. MPIX_Acc_Comm_set_stream */
    t_phase("MPIX_Acc_Comm_set_stream");
    MPI_Comm c2;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
    T_MPI(MPIX_Acc_Comm_set_stream(c2, S));
    expect_stream_key(c2, MPIX_ACC_INFO_STREAM, "MPIX_Acc_Comm_set_stream");
    stream_exchange(c2, "MPIX_Acc_Comm_set_stream");

    /* 3. MPI_Comm_dup_with_info, with MPIX_Acc_Info_set_stream */
    t_phase("MPI_Comm_dup_with_info");
    MPI_Comm c3;
    T_MPI(MPI_Info_create(&info));
    T_MPI(MPIX_Acc_Info_set_stream(info, S));
    int flag = 0, len = sizeof v;
    T_MPI(MPI_Info_get_string(info, MPIX_ACC_INFO_STREAM, &len, v, &flag));
    T_CHECK(flag && strtoull(v, NULL, 16) == (unsigned long long)(uintptr_t)S,
            "MPIX_Acc_Info_set_stream: key %s = \"%s\" (flag %d), expected %s",
            MPIX_ACC_INFO_STREAM, flag ? v : "", flag, sstr);
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c3));
    T_MPI(MPI_Info_free(&info));
    expect_stream_key(c3, MPIX_ACC_INFO_STREAM, "dup_with_info");
    stream_exchange(c3, "dup_with_info");
    /* dup_with_info of a stream communicator with its own info copies the hint */
    MPI_Comm c3b;
    T_MPI(MPI_Comm_get_info(c3, &info));
    T_MPI(MPI_Comm_dup_with_info(c3, info, &c3b));
    T_MPI(MPI_Info_free(&info));
    stream_exchange(c3b, "dup_with_info(stream comm, its info)");

    /* 4. MPI_Comm_dup of a stream communicator is plain */
    MPI_Comm d;
    T_MPI(MPI_Comm_dup(c1, &d));
    plain_exchange(d, "MPI_Comm_dup of a stream comm");

    /* 5. CUDA_STREAM alias */
    t_phase("CUDA_STREAM alias");
    MPI_Comm c5;
    T_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c5));
    info = make_info(MPIX_ACC_INFO_STREAM_ALIAS, sstr, NULL, NULL);
    T_MPI(MPI_Comm_set_info(c5, info));
    T_MPI(MPI_Info_free(&info));
    if (get_key(c5, MPIX_ACC_INFO_STREAM_ALIAS, v, sizeof v))
        expect_stream_key(c5, MPIX_ACC_INFO_STREAM_ALIAS, "CUDA_STREAM");
    else
        expect_stream_key(c5, MPIX_ACC_INFO_STREAM, "CUDA_STREAM");
    stream_exchange(c5, "CUDA_STREAM alias");

    /* 6. "none" turns it off */
    t_phase("mpix_acc_stream=none");
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    info = make_info(MPIX_ACC_INFO_STREAM, "none", NULL, NULL);
    T_MPI(MPI_Comm_set_info(c1, info));
    T_MPI(MPI_Info_free(&info));
    if (get_key(c1, MPIX_ACC_INFO_STREAM, v, sizeof v))
        T_CHECK(strcmp(v, "none") == 0, "after setting none, get_info says %s = \"%s\"",
                MPIX_ACC_INFO_STREAM, v);
    plain_exchange(c1, "after mpix_acc_stream=none");
    /* and back on */
    info = make_info(MPIX_ACC_INFO_STREAM, sstr, NULL, NULL);
    T_MPI(MPI_Comm_set_info(c1, info));
    T_MPI(MPI_Info_free(&info));
    stream_exchange(c1, "set_info again after none");

    /* 7. mpix_acc_recv_post=early */
    t_phase("mpix_acc_recv_post=early");
    MPI_Comm c7;
    info = make_info(MPIX_ACC_INFO_STREAM, sstr, MPIX_ACC_INFO_RECV_POST, "early");
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c7));
    T_MPI(MPI_Info_free(&info));
    T_CHECK(get_key(c7, MPIX_ACC_INFO_RECV_POST, v, sizeof v) && strcmp(v, "early") == 0,
            "MPI_Comm_get_info: %s missing or not \"early\"", MPIX_ACC_INFO_RECV_POST);
    recv_post(c7, 1, "recv_post=early");
    stream_exchange(c7, "recv_post=early");
    /* set ordered explicitly on the same comm (stream key repeated) */
    info = make_info(MPIX_ACC_INFO_STREAM, sstr, MPIX_ACC_INFO_RECV_POST, "ordered");
    T_MPI(MPI_Comm_set_info(c7, info));
    T_MPI(MPI_Info_free(&info));
    recv_post(c7, 0, "recv_post=ordered after early");

    /* 8. mpix_acc_eager_limit */
    t_phase("mpix_acc_eager_limit");
    MPI_Comm c8;
    info = make_info(MPIX_ACC_INFO_STREAM, sstr, MPIX_ACC_INFO_EAGER_LIMIT, "1024");
    T_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c8));
    T_MPI(MPI_Info_free(&info));
    T_CHECK(get_key(c8, MPIX_ACC_INFO_EAGER_LIMIT, v, sizeof v) && strtol(v, NULL, 10) == 1024,
            "MPI_Comm_get_info: %s missing or not 1024", MPIX_ACC_INFO_EAGER_LIMIT);
    eager_limit_sizes(c8, "eager_limit=1024");

    /* 9. one rank's malformed value: collective error, no hang */
    one_rank_bad_info();

    t_phase("free");
    T_MPI(MPIX_Acc_Hoststream_synchronize(S));
    T_MPI(MPIX_Acc_Hoststream_synchronize(S2));
    MPI_Comm *all[] = {&c1, &c2, &c3, &c3b, &d, &c5, &c7, &c8};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        T_MPI(MPI_Comm_free(all[i]));
    T_MPI(MPIX_Acc_Hoststream_free(&S));
    T_MPI(MPIX_Acc_Hoststream_free(&S2));
    return t_finish();
}
